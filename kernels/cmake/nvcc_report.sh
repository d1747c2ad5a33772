#!/usr/bin/env bash
# CUDA compiler launcher for the kernel objects: runs the nvcc command it is given with the
# ptxas resource report on and the intermediate files kept, then stores, for the test suite,
#   <report-dir>/<source>.ptxas.txt         registers, spills, stack and shared memory per kernel
#                                           and architecture (ptxas -v)
#   <report-dir>/<source>.compute_XX.ptx    the PTX each architecture was compiled from
# The report comes from the real compilation: nothing is compiled twice.
# Usage (CUDA_COMPILER_LAUNCHER): bash nvcc_report.sh <report-dir> <nvcc> <args...>
set -euo pipefail
report_dir=$1
shift

obj=""
compile=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    -o) obj="${args[$((i + 1))]}" ;;
    -c) compile=1 ;;
  esac
done
if [[ $compile -eq 0 || -z "$obj" ]]; then exec "$@"; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duet-nvcc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rc=0
"$@" --ptxas-options=-v --keep --keep-dir "$tmp" 2>"$tmp/stderr" || rc=$?
report='^(ptxas info|    [0-9]+ bytes stack frame)'
grep -v -E "$report" "$tmp/stderr" >&2 || true
if [[ $rc -ne 0 ]]; then exit $rc; fi

mkdir -p "$report_dir"
src=$(basename "$obj")
src=${src%.o}
src=${src%.cu}
grep -E "$report" "$tmp/stderr" >"$report_dir/$src.ptxas.txt" || true
for ptx in "$tmp"/*.ptx; do
  [[ -e "$ptx" ]] || continue
  # Named by the architecture it targets (nvcc omits it when there is only one).
  arch=$(sed -n 's/^\.target[[:space:]]*sm_\([0-9a-z]*\).*/\1/p' "$ptx" | head -1)
  cp "$ptx" "$report_dir/$src.compute_$arch.ptx"
done
exit 0
