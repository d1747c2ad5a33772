#!/usr/bin/env bash
# The speed targets of issue 30 on this machine, two ranks of `mpirun --oversubscribe` against one
# process (docs/performance.md, "Distributed runs over MPI"):
#   1. a crossing's cost: duet_bench_dist (a round of two busy stages, 256 B each way);
#   2. a decode step split over two ranks: duet-llama on a small Llama-shaped GGUF
#      (tools/make_llama_gguf.py), one process and `--distributed --every-rank`, greedy, the same
#      ids; per run the "decode steady" tokens/s, and the CPU time of every process (user +
#      system) per token: the difference between a run of 144 tokens and one of 16, over 128, so
#      that start-up (reading the file, planning, measuring the link) cancels out.
#   The overhead of the split per decode step, over the crossings --explain lists, is the cost of
#   a crossing in a real pipeline (target: under 100 us plus its bytes over the link's measured
#   bandwidth); the split's tokens/s over one process's is target (b) (at least 0.8).
# Usage: [SKIP_BENCH=1] tools/bench/dist/targets.sh BUILD_DIR [REPEATS] [MAKE_LLAMA_GGUF_ARGS...]
#   e.g. tools/bench/dist/targets.sh build 3 --layers 4 --embd 256 --heads 4 --kv-heads 2 --ff 768 --vocab 4000
# Needs an idle machine with at least two free cores per rank to measure duet rather than its
# scheduler; say so beside the figures otherwise.
set -u
B=$(cd "$1" && pwd); N=${2:-3}; shift; shift || true
GGUF_ARGS=${*:---layers 4 --embd 256 --heads 4 --kv-heads 2 --ff 768 --vocab 4000}
here=$(cd "$(dirname "$0")" && pwd)
L=$B/tools/duet-llama; [ -x "$L" ] || L=$B/examples/llama/duet-llama
BD=$B/tools/duet_bench_dist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun -np 2 --oversubscribe ${MPI_ARGS:-}"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  echo "== 1. duet_bench_dist (crossing = (round - 2 gap) / 2; CPU: share of a core while waiting)"
  $MPI "$BD" --bytes 256 --gaps 0,100,1000 --ms 500 --waits default 2>&1 | tail -5
fi

echo "== 2. duet-llama decode, one process vs two ranks ($GGUF_ARGS)"
python3 "$here/../../make_llama_gguf.py" "$T/m.gguf" $GGUF_ARGS > /dev/null
A="$T/m.gguf --prompt-ids 1,2,3,4,5,6,7,8 --temp 0 --ignore-eos --devices cpu:0 -c 256 --print-ids"
TF="cpu %U %S wall %e"
run() {  # run ONE|SPLIT TOKENS: the stderr of rank 0 and the CPU lines of every rank in $T/out
  if [ "$1" = one ]; then
    /usr/bin/time -f "$TF" "$L" $A -n "$2" > "$T/ids" 2> "$T/out"
  else
    $MPI /usr/bin/time -f "$TF" "$L" $A -n "$2" --distributed --every-rank --explain \
      > "$T/ids" 2> "$T/out"
  fi
}
cpu_sum() { awk '/^cpu /{s += $2 + $3} END {printf "%.3f", s}' "$T/out"; }
for i in $(seq "$N"); do
  for mode in one split; do
    run $mode 16 || { echo "$mode failed:"; tail -5 "$T/out"; exit 1; }
    c16=$(cpu_sum)
    run $mode 144 || { echo "$mode failed:"; tail -5 "$T/out"; exit 1; }
    c144=$(cpu_sum)
    steady=$(grep -o 'decode steady: [^;]*' "$T/out" | head -1)
    echo "$mode #$i: $steady; CPU a token (every rank) $(awk -v a="$c144" -v b="$c16" 'BEGIN{printf "%.2f ms", (a-b)*1e3/128}'); ids $(md5sum < "$T/ids" | cut -c1-8)"
    [ "$mode" = split ] && [ "$i" = 1 ] && grep -E "^  (rank0 -> rank1|input|activation|output)[: ]" "$T/out"
  done
done
