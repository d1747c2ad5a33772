#!/usr/bin/env bash
# On the GPU machine: unpack the bundle made by pack.sh and run, each step under a timeout, the
# CUDA and Vulkan checks, benches of both backends, PyTorch's peer timings on the same shapes, and
# the Llama example on a Llama-3-8B-shaped q4_0 file; then one table of ratios (summarize.py).
# Everything lands in $OUT (default /tmp/out): log.txt, summary.md, the JSON rows.
# Usage: BUNDLE=gpub/bundle.tar.xz OUT=dir tools/gpu/run.sh [STEP ...]
#   steps (default all, in this order): env check bench decode torch model llama vkcheck vkbench
#   vkllama
#   Budget: the whole default run is sized for about 7 minutes on an H100/H200.
set -u
B=/tmp/duet-gpu; O=${OUT:-/tmp/out}; mkdir -p "$O"
steps=${*:-env check bench decode torch model llama vkcheck vkbench vkllama}
want() { case " $steps " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
T0=$(date +%s)
step() { echo; echo "===== $* (t+$(( $(date +%s) - T0 ))s, $(date +%T))"; }
{
if [ ! -x $B/bin/duet ]; then mkdir -p $B && xz -T8 -dc "${BUNDLE:-gpub/bundle.tar.xz}" | tar -C $B -xf -; fi
lt=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 2>/dev/null || find / -xdev -name 'libcublasLt.so.13' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$B/lib:${lt:+$(dirname "$lt"):}/usr/local/nvidia/lib64:/usr/local/cuda/lib64:$B/gl:${LD_LIBRARY_PATH:-}
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] || icd=$(find / -xdev -name 'nvidia_icd*.json' 2>/dev/null | head -1)
[ -n "$icd" ] && export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
export VK_LAYER_PATH=$B/layers DUET_VULKAN_CACHE_DIR=/tmp/vkcache
D=$B/bin/duet; L=$B/bin/duet-llama
echo "bundle of commit $(cat $B/commit 2>/dev/null)"
if want env; then
  step env; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  echo "icd=$icd lt=$lt"; nproc
  step devices; timeout 60 $D devices
fi
if want check; then
  step gpu-tests; timeout 90 $B/bin/duet_cuda_gpu_tests > $O/gtest_gpu.txt 2>&1; echo rc=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|tests ran" $O/gtest_gpu.txt | head -30
  step lost-tests; timeout 40 $B/bin/duet_cuda_lost_tests 2>&1 | tail -4
  step check-cuda; timeout 120 $D check --device cuda:0 --json $O/check_cuda.json > $O/check_cuda.txt 2>&1
  echo rc=$?; grep -v -E "^\s*(ok|pass)" $O/check_cuda.txt | tail -25
fi
if want bench; then
  step bench-cuda; timeout 120 $D bench --device cuda:0 --op matmul --op attention --min-seconds 0.1 \
    --json $O/bench_cuda.json > $O/bench_cuda.txt 2>&1; echo rc=$?; tail -60 $O/bench_cuda.txt
fi
# The integer-dot mat-vec of every block format (decode M1 and M8 rows: GB/s and %bw of the
# record's bandwidth) beside the copy bandwidth of the same run (issue 26: at least 70% of it).
if want decode; then
  step bench-cuda-decode; timeout 75 $D bench --device cuda:0 --op matmul --tier int_dot \
    --min-seconds 0.05 --json $O/bench_cuda_decode.json > $O/bench_cuda_decode.txt 2>&1
  echo rc=$?; grep -E "decode|GB/s" $O/bench_cuda_decode.txt | head -40
  step bench-cuda-copy; timeout 30 $D bench --device cuda:0 --op copy --min-seconds 0.05 \
    --json $O/bench_cuda_copy.json 2>&1 | tail -6
fi
if want torch; then
  step torch; timeout 90 python3 $B/peer_torch.py > $O/torch.jsonl 2>$O/torch.err; echo rc=$?
  wc -l < $O/torch.jsonl; tail -3 $O/torch.err
fi
P=$(python3 -c "print(','.join(str(i) for i in range(1,513)))")
if want model || want llama || want vkllama; then
  [ -f /tmp/m8.gguf ] || { step model; timeout 90 python3 $B/make_big.py /tmp/m8.gguf 8b q4_0; }
fi
# duet-llama takes ids with --prompt-ids (older builds: --prompt); the first form it accepts wins.
llama() {
  local dev=$1; shift
  if $L --help 2>&1 | grep -q -- --prompt-ids; then ids=--prompt-ids; else ids=--prompt; fi
  step "llama $dev prefill 512 + 64 decode"
  timeout 90 $L /tmp/m8.gguf $ids $P -n 64 --devices $dev --max-context 1024 "$@" 2>&1 | tail -12
  step "llama $dev decode timing"
  timeout 60 $L /tmp/m8.gguf $ids 1,2,3 -n 32 --devices $dev --timing "$@" 2>&1 | tail -22
}
if want llama; then llama cuda:0; fi
if want vkcheck; then
  step check-vulkan; timeout 150 $D check --device vulkan:0 --json $O/check_vulkan.json > $O/check_vulkan.txt 2>&1
  echo rc=$?; grep -v -E "^\s*(ok|pass)" $O/check_vulkan.txt | tail -25
  step check-vulkan-validation; DUET_VULKAN_VALIDATION=1 timeout 60 $D check --device vulkan:0 --op matmul 2>&1 | tail -3
fi
if want vkbench; then
  step bench-vulkan; timeout 90 $D bench --device vulkan:0 --op matmul --op attention --min-seconds 0.1 \
    --json $O/bench_vulkan.json > $O/bench_vulkan.txt 2>&1; echo rc=$?; tail -60 $O/bench_vulkan.txt
fi
if want vkllama; then llama vulkan:0; fi
step summary; python3 $B/summarize.py $O > $O/summary.md; cat $O/summary.md
step done
} 2>&1 | tee $O/log.txt
