#!/usr/bin/env bash
# On the GPU machine: unpack the bundle made by pack.sh and run, each step under a timeout, the
# CUDA and Vulkan checks, benches of both backends, PyTorch's peer timings on the same shapes, and
# the Llama example on a Llama-3-8B-shaped q4_0 file; then one table of ratios (summarize.py).
# Everything lands in $OUT (default /tmp/out): log.txt, summary.md, the JSON rows.
# Usage: BUNDLE=gpub/bundle.tar.xz OUT=dir [DEADLINE=seconds] tools/gpu/run.sh [STEP ...]
#   (the device tool returns at most eight files from its $OUT: give this script a folder of its
#   own and pack it afterwards, e.g. OUT=/tmp/o timeout 500 run.sh; tar -czf $OUT/logs.tgz -C /tmp/o .)
#   steps (default all, in this order): env check onnx pydlpack bench tiers decode rows profile torch model
#   llama groups fusions addnorm pdl attnpick ncudecode longctx vkdecode vkllama vkcheck vkattn vkbench (the Vulkan steps that were never measured
#   first: on 2026-11-27 the run's time ended inside vkbench); not in the default list: vkfuse
#   (the Vulkan decode fusions on and off), clocks (the GPU's clocks sampled in the background,
#   clocks.csv), vksweep (the Vulkan mat-vec's shapes) and
#   vkread (a Vulkan decode step with and without copied reads)
#   Budget: on an H200 (2026-11-27) the steps up to vkbench took 7.5 minutes, bench-vulkan stopped
#   by its timeout; env, check, onnx, torch, llama and longctx alone took 31 s. Name the steps a
#   run needs when its device time is short.
set -u
B=/tmp/duet-gpu; O=${OUT:-/tmp/out}; mkdir -p "$O"
steps=${*:-env check onnx pydlpack qprefill bench tiers decode rows profile torch model llama groups fusions addnorm pdl attnpick ncudecode longctx vkdecode vkllama vkcheck vkattn vkbench}
T0=$(date +%s)
# DEADLINE=S: a step not begun S seconds after the start is skipped (said in the log), so that a
# call's timeout cuts no step in the middle and the summary still runs.
want() {
  case " $steps " in *" $1 "*) ;; *) return 1 ;; esac
  [ $(( $(date +%s) - T0 )) -lt "${DEADLINE:-999999}" ] && return 0
  echo "===== $1 skipped: past DEADLINE=${DEADLINE}s"; return 1
}
step() { echo; echo "===== $* (t+$(( $(date +%s) - T0 ))s, $(date +%T))"; }
{
# A machine may keep /tmp/duet-gpu from an earlier call (2026-11-28: a fresh lease had one):
# remove it before a run of a new bundle, as nothing here compares the two.
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
# The exported ONNX models of tests/onnx/models (convolutions, masks, attention) op by op on the GPU
# (run from the repository root, where those files are).
if want onnx; then
  step onnx-models
  for m in conv1d_encoder resnet_block masked_attention bert_layer gpt2_block; do
    [ -f tests/onnx/models/$m.onnx ] || continue
    timeout 30 $D check tests/onnx/models/$m.onnx --inputs tests/onnx/models/$m.inputs.safetensors \
      --device cuda:0 > $O/onnx_$m.txt 2>&1; echo "$m rc=$?: $(tail -1 $O/onnx_$m.txt)"
  done
fi
if want bench; then
  step bench-cuda; timeout 120 $D bench --device cuda:0 --op matmul --op attention --min-seconds 0.1 \
    --json $O/bench_cuda.json > $O/bench_cuda.txt 2>&1; echo rc=$?; tail -60 $O/bench_cuda.txt
fi
# Attention at each CUDA tier side by side (sm_90a wgmma, sm_80 flash, the SIMT generic kernels).
if want tiers; then
  step bench-cuda-attention-tiers; timeout 60 $D bench --device cuda:0 --op attention --tier wgmma \
    --tier flash --tier generic --min-seconds 0.05 --json $O/bench_attn_tiers.json \
    > $O/bench_attn_tiers.txt 2>&1; echo rc=$?; tail -45 $O/bench_attn_tiers.txt
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
# A decode step's small kernels alone (issue 27): rmsnorm of one 4096 row (rows_kernel's
# registers path, was 19 us under ncu), the SwiGLU gate of one row, and the attention rows (the
# decode ones end in attention_combine).
if want rows; then
  step bench-cuda-rows; timeout 60 $D bench --device cuda:0 --op rmsnorm --op silu_mul --op softmax \
    --op attention --dtype f32 --dtype f16 --min-seconds 0.02 --json $O/bench_cuda_rows.json \
    > $O/bench_cuda_rows.txt 2>&1; echo rc=$?; tail -30 $O/bench_cuda_rows.txt
fi
# ncu on the decode mat-vec (q4_0 M1 first) and on duet's copy kernel: duration, DRAM throughput,
# occupancy and warp stall reasons, the first thing to read when a kernel misses the bandwidth.
if want profile; then
  step profile; N=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout 60 $N -k regex:qmv -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section LaunchStats $D bench --device cuda:0 --op matmul \
    --tier int_dot --dtype q4_0 --min-seconds 0.01 > $O/ncu_qmv.txt 2>&1; echo rc=$?
  # Mem Busy / Mem Pipes Busy / L1/TEX beside DRAM Throughput: whether the mat-vec's 4-byte
  # weight loads (quant_mv.h) are bound by the L1 pipeline rather than by DRAM.
  grep -E "Duration|Throughput|Achieved Occupancy|Registers Per|Block Size|Grid Size|Stall|Waves|Mem Busy|Mem Pipes|L1/TEX|Issued" $O/ncu_qmv.txt | head -40
  timeout 45 $N -k regex:copy -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    $D bench --device cuda:0 --op copy --min-seconds 0.01 > $O/ncu_copy.txt 2>&1; echo rc=$?
  grep -E "Duration|Throughput|Achieved Occupancy|Block Size|Grid Size" $O/ncu_copy.txt | head -12
fi
# Quantized prefill (issue 26: M512 N4096 K14336 with f16 activations): the dequantized-tile path
# (cuBLASLt on f16 tiles the generic cast writes, 0.47 ms in the second run against f16 cuBLAS's
# 0.10 ms, where its bytes and flops allow about 0.2) and int8_mma, timed; then every kernel of
# one run of each under Nsight Compute (name, duration, DRAM and compute throughput): which of
# the casts, the chunked GEMMs and the result cast takes the time.
if want qprefill; then
  step bench-cuda-qprefill
  # QPREFILL_DTYPES, QPREFILL_NCU: fewer formats and tiers for a short run.
  dts=""; for t in ${QPREFILL_DTYPES:-q4_0 q8_0 q4_k q6_k f16}; do dts="$dts --dtype $t"; done
  DUET_CALIBRATION=off timeout 60 $D bench --device cuda:0 --op matmul --tier cublas --tier int8_mma \
    $dts --min-seconds 0.05 --json $O/bench_qprefill.json > $O/bench_qprefill.txt 2>&1; echo rc=$?
  grep -E "M4096|N512|M512" $O/bench_qprefill.txt | head -30
  step ncu-qprefill; N=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for t in ${QPREFILL_NCU:-cublas int8_mma}; do
    DUET_CALIBRATION=off timeout 60 $N -c 24 --section SpeedOfLight $D bench --device cuda:0 \
      --op matmul --tier $t --dtype q4_0 --repeats 1 --min-seconds 0 > $O/ncu_qprefill_$t.txt 2>&1
    echo "$t rc=$?"; grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput" \
      $O/ncu_qprefill_$t.txt | head -80
  done
fi
# PyTorch CUDA tensors in and out of duet's Python module without a host copy (issue 29): PASS or
# the failed check; the freeing hazard (PyTorch frees duet's output while its stream still has a
# read of it queued: "freeing hazard PASS", the late read matching float64); then a run's time
# with CUDA tensors in and out beside host memory in and out.
# The module in the bundle is built for the build machine's Python (cp311). When this machine's
# python3 cannot import it, build_python.sh (from python.tar.xz beside the bundle, made by
# pack_python.sh; PYBUNDLE=FILE names another) compiles the module's Python-facing units for this
# interpreter and links them with the packed engine (9 units, about 160 s of CPU time on the
# build machine: well under a minute on 16 cores; PYBUILD_TIMEOUT, default 240 s); what failed is
# printed ("python-build: FAIL: ..."; $OUT/python_build.txt), and dlpack_cuda.py then prints SKIP.
if want pydlpack; then
  step pydlpack; pyp=$B/python
  if ! (cd "$(mktemp -d)" && PYTHONPATH=$pyp python3 -c "import duet") > /dev/null 2>&1; then
    pb=${PYBUNDLE:-$(dirname "${BUNDLE:-gpub/bundle.tar.xz}")/python.tar.xz}
    [ -f "$pb" ] && rm -rf $B/pysrc $B/pybuild && mkdir -p $B && xz -T8 -dc "$pb" | tar -C $B -xf -
    if [ -f $B/pysrc/build_python.sh ]; then
      echo "the bundle's module does not import here ($(python3 -V 2>&1)): building it"
      timeout ${PYBUILD_TIMEOUT:-240} bash $B/pysrc/build_python.sh $B/pybuild > $O/python_build.txt 2>&1
      [ $? = 124 ] && echo "python-build: FAIL: not done in ${PYBUILD_TIMEOUT:-240} s" >> $O/python_build.txt
      tail -20 $O/python_build.txt
      ls $B/pybuild/duet/_duet*.so > /dev/null 2>&1 && pyp=$B/pybuild
      cp $B/pybuild/build.log $O/python_build.log 2>/dev/null
    else
      echo "no $pb (tools/gpu/pack_python.sh makes it): the bundle's module only"
    fi
  fi
  # -X faulthandler: a crash prints the Python stack (2026-11-28: a silent segfault beside PyTorch).
  PYTHONPATH=$pyp timeout 60 python3 -X faulthandler $B/dlpack_cuda.py > $O/dlpack_cuda.txt 2>&1
  echo "rc=$?"; tail -12 $O/dlpack_cuda.txt
fi
if want torch; then
  step torch; timeout 90 python3 $B/peer_torch.py > $O/torch.jsonl 2>$O/torch.err; echo rc=$?
  wc -l < $O/torch.jsonl; tail -3 $O/torch.err
fi
P=$(python3 -c "print(','.join(str(i) for i in range(1,513)))")
# The GPU's clocks beside the steps, every 100 ms (an idle H200 holds its SM clock at 345 MHz
# against 1980 busy, and a bench row's first batches after a second of drawing its inputs ran
# before it rose: the 2026-11-27 rows of every block format but q8_0 and q6_k 4-8x slow).
if want clocks; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,utilization.gpu --format=csv \
    -lms 100 > $O/clocks.csv 2>&1 & CLOCKS=$!
fi
if want model || want llama || want fusions || want addnorm || want pdl || want attnpick || want vkllama || want vkfuse || want vkread; then
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
if want llama; then
  llama cuda:0
  # The decode step replayed as CUDA graphs (the default) against step by step: what the graphs buy.
  for g in 1 0; do
    step "llama cuda:0 decode at ~512, DUET_CUDA_GRAPHS=$g"
    DUET_CUDA_GRAPHS=$g timeout 60 $L /tmp/m8.gguf --bench-prompt 512 -n 64 --temp 0 --ignore-eos \
      --ctx 1024 --devices cuda:0 2>&1 >/dev/null | grep -iE 'prefill|decode|replay|stop|error'
  done
fi
# Grouped mat-vecs (issue 27: q, k and v in one q8_act and one mat-vec launch, gate and up in
# another) against one launch each, with and without CUDA graphs: the step time of each pair of
# settings, and how many mat-vecs ran grouped per synchronize (the debug line). Expect per step
# about 192 launches fewer (6 a layer of 32: 837 -> 645) and the k/v blocks inside q's launch.
if want groups; then
  for gm in ${GROUPS_M:-1 0}; do for g in ${GROUPS_G:-0 1}; do
    step "llama cuda:0 decode, DUET_CUDA_GROUP_MATVECS=$gm DUET_CUDA_GRAPHS=$g"
    DUET_CUDA_GROUP_MATVECS=$gm DUET_CUDA_GRAPHS=$g DUET_LOG=debug timeout 45 $L /tmp/m8.gguf \
      --prompt-ids 1,2,3 -n 16 --devices cuda:0 --timing 2>&1 >/dev/null \
      | grep -E "^timing: (16|plain|device-timed|by op)|grouped launches|error" | sort | uniq -c \
      | sort -rn | head -8
  done; done
fi
# Fused decode ops (issue 27), each off and both on, with graphs and without: each rmsnorm
# quantizing the activations of the mat-vecs after it (DUET_CUDA_FUSE_NORM_QUANT: an 8B step
# launches 65 q8_act kernels fewer, about 3.5 us each in the fourth run) and k's rope writing
# the K and V cache rows (DUET_CUDA_FUSE_ROPE_WRITE: 64 write_slice kernels fewer, about 4 us
# each). Each line is the steady decode rate at ~512 (NQ RW G: the two switches and graphs);
# the last, with DUET_LOG=debug, says how many groups a norm quantized for and how many ropes
# wrote their cache rows. Expect "1 1" about 0.4-0.5 ms a step shorter than "0 0" (each fusion
# about half of it), and the rmsnorm and rope by-op times only slightly up.
if want fusions; then
  # FUSIONS: the settings to time, "NQ RW G" separated by commas (a short run names fewer).
  IFS=, read -r -a fus <<< "${FUSIONS:-1 1 0,0 1 0,1 0 0,0 0 0,1 1 1,0 0 1}"
  for f in "${fus[@]}"; do
    read -r nq rw g <<< "$f"
    step "llama cuda:0 decode at ~512, NQ RW G = $f"
    DUET_CUDA_FUSE_NORM_QUANT=$nq DUET_CUDA_FUSE_ROPE_WRITE=$rw DUET_CUDA_GRAPHS=$g timeout 45 \
      $L /tmp/m8.gguf --bench-prompt 512 -n 64 --temp 0 --ignore-eos --ctx 1024 --devices cuda:0 \
      2>&1 >/dev/null | grep -iE 'decode steady|error'
  done
  # The fused kernels keep the unfused arithmetic (the same bits on the emulator): the greedy ids
  # with both fusions on and both off should be equal here too.
  step "llama cuda:0 greedy ids, fusions on and off"
  for f in 1 0; do
    DUET_CUDA_FUSE_NORM_QUANT=$f DUET_CUDA_FUSE_ROPE_WRITE=$f DUET_CUDA_GRAPHS=0 timeout 45 $L \
      /tmp/m8.gguf --prompt-ids 1,2,3 -n 24 --temp 0 --ignore-eos --print-ids --devices cuda:0 \
      2>/dev/null | tail -1 > $O/fusion_ids_$f.txt
  done
  cmp -s $O/fusion_ids_1.txt $O/fusion_ids_0.txt && echo "same ids" || { echo "IDS DIFFER:"; cat $O/fusion_ids_[01].txt; }
  step "llama cuda:0 decode timing, fusions on"
  DUET_LOG=debug timeout 45 $L /tmp/m8.gguf --prompt-ids 1,2,3 -n 16 --devices cuda:0 --timing \
    2>&1 >/dev/null | grep -E "^timing: (16|plain|by op)|quantized their|wrote their|error" \
    | sort | uniq -c | sort -rn | head -8
fi
# The residual add inside the rmsnorm after it (DUET_CUDA_FUSE_ADD_NORM, 2026-11-28: 64 kernels
# fewer an 8B step), on and off, graphs on: the steady rate and the greedy ids (equal).
if want addnorm; then
  for a in 1 0; do
    step "llama cuda:0 decode at ~512, DUET_CUDA_FUSE_ADD_NORM=$a"
    DUET_CUDA_FUSE_ADD_NORM=$a timeout 45 $L /tmp/m8.gguf --bench-prompt 512 -n 64 --temp 0 \
      --ignore-eos --ctx 1024 --devices cuda:0 2>&1 >/dev/null | grep -iE 'decode steady|error'
    DUET_CUDA_FUSE_ADD_NORM=$a timeout 45 $L /tmp/m8.gguf --prompt-ids 1,2,3 -n 24 --temp 0 \
      --ignore-eos --print-ids --devices cuda:0 2>/dev/null | tail -1 > $O/addnorm_ids_$a.txt
  done
  cmp -s $O/addnorm_ids_1.txt $O/addnorm_ids_0.txt && echo "same ids" || { echo "IDS DIFFER:"; cat $O/addnorm_ids_[01].txt; }
  # The add fusion and silu_mul quantizing ffn_down's activations (DUET_CUDA_FUSE_SILU_QUANT,
  # 2026-11-28), each on and off: the steady rate and what the device launched (the engine's
  # "recorded (N kernels)" counts plan steps; the device's "recording R: O ops in L launches"
  # counts its launches; expect 64 launches fewer with the adds folded, 32 with silu_mul).
  for f in "1 1" "0 1" "1 0"; do
    read -r a s <<< "$f"
    step "llama cuda:0 decode, DUET_CUDA_FUSE_ADD_NORM=$a DUET_CUDA_FUSE_SILU_QUANT=$s"
    DUET_CUDA_FUSE_ADD_NORM=$a DUET_CUDA_FUSE_SILU_QUANT=$s DUET_LOG=debug timeout 45 $L \
      /tmp/m8.gguf --bench-prompt 512 -n 64 --temp 0 --ignore-eos --ctx 1024 --devices cuda:0 \
      2>&1 >/dev/null | grep -E 'decode steady|recording [0-9]+:|residual themselves|error' \
      | sort | uniq -c | sort -rn | head -8
  done
fi
# Programmatic dependent launch (DUET_CUDA_PDL, off by default until measured): every check
# case with it on, then the 8B decode step on and off, with graphs (the default) and launched one
# by one, and the greedy ids of both.
if want pdl; then
  step "check-cuda, DUET_CUDA_PDL=1"
  DUET_CUDA_PDL=1 timeout 60 $D check --device cuda:0 > $O/check_cuda_pdl.txt 2>&1; echo rc=$?
  tail -1 $O/check_cuda_pdl.txt
  for g in 1 0; do
    for p in 0 1; do
      step "llama cuda:0 decode at ~512, DUET_CUDA_PDL=$p DUET_CUDA_GRAPHS=$g"
      DUET_CUDA_PDL=$p DUET_CUDA_GRAPHS=$g timeout 45 $L /tmp/m8.gguf --bench-prompt 512 -n 64 \
        --temp 0 --ignore-eos --ctx 1024 --devices cuda:0 2>&1 >/dev/null | grep -iE 'decode steady|error'
    done
  done
  for p in 0 1; do
    DUET_CUDA_PDL=$p timeout 45 $L /tmp/m8.gguf --prompt-ids 1,2,3 -n 24 --temp 0 --ignore-eos \
      --print-ids --devices cuda:0 2>/dev/null | tail -1 > $O/pdl_ids_$p.txt
  done
  cmp -s $O/pdl_ids_1.txt $O/pdl_ids_0.txt && echo "same ids" || { echo "IDS DIFFER:"; cat $O/pdl_ids_[01].txt; }
fi
# Which attention tier a decode step wants (issue 27): the 8B step with wgmma (the default on
# sm_90a), without it (flash), and without both (the generic split-key kernel), each at ~512 and
# ~2048: the steady rate and --timing's by-op line. On 2026-11-28 wgmma's decode attention took
# 19-21 us a layer whatever the position (34 or 550), with a combine of 4.8 us after it.
if want attnpick; then
  # Since 2026-11-28 decode lists flash first (the default), so deny=cuda.flash gives wgmma.
  for pol in "" "deny=cuda.flash" "deny=cuda.wgmma,cuda.flash"; do
    for n in 512 2048; do
      step "llama cuda:0 decode at ~$n, policy '${pol:-default}'"
      timeout 45 $L /tmp/m8.gguf --bench-prompt $n -n 32 --temp 0 --ignore-eos --ctx 4096 \
        --devices cuda:0 ${pol:+--policy $pol} --timing 2>&1 >/dev/null \
        | grep -E "decode steady|by op|error" | head -3
    done
  done
fi
# One decode step's kernels under Nsight Compute (launched one by one, no graphs): each kernel's
# name, duration and DRAM throughput for about three layers, after skipping the prefill and the first
# decode steps (3 ids prefill; 6 tokens, so that the skip lands inside a decode step at about 600
# kernels a step as at 680).
if want ncudecode; then
  step ncu-decode-step; N=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  DUET_CUDA_GRAPHS=0 timeout 90 $N --launch-skip 2600 --launch-count 90 --section SpeedOfLight \
    $L /tmp/m8.gguf --prompt-ids 1,2,3 -n 6 --temp 0 --ignore-eos --devices cuda:0 \
    > $O/ncu_decode.txt 2>&1; echo rc=$?
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput" $O/ncu_decode.txt | head -150
fi
# Decode at position ~2048 (long cache, f16 by default) with the per-kernel timing.
if want longctx; then
  step "llama cuda:0 prefill 2048 + decode at 2048"
  timeout 75 $L /tmp/m8.gguf --bench-prompt 2048 -n 32 --temp 0 --ignore-eos --ctx 4096 \
    --devices cuda:0 --timing 2>&1 >/dev/null | grep -iE 'cache|prefill|decode|timing|stop|error|ms' | head -30
fi
# The Vulkan decode mat-vecs (subgroup matvec and integer-dot tiers). On 2026-11-27 this step (every
# format, beside cuda:0, calibration on) printed nothing in 75 s: a cold `duet bench` first
# calibrates every device it was given (cold Vulkan pipelines included; on lavapipe 40 s, one
# pipeline 26 s), then draws and uploads each row's inputs (about 1 s a row). So: calibration off
# (the vkattn step times it), vulkan:0 alone (the decode step has the CUDA rows), the formats of
# issue 25's target in two commands, each under its own timeout; DUET_LOG=info prints the
# pipelines' line at exit ("N pipelines made in X s on T threads, slowest ...") and
# `first runs ... in all` says what the rows' first runs cost.
if want vkdecode; then
  step bench-vulkan-decode-warmup
  DUET_CALIBRATION=off DUET_LOG=info timeout 45 $D bench --device vulkan:0 --op matmul --tier matvec \
    --tier int_dot --dtype f16 --dtype q4_0 --repeats 5 --min-seconds 0.02 \
    --json $O/bench_vk_decode.json > $O/bench_vk_decode.txt 2>&1
  echo rc=$?; grep -E "decode|first runs|pipeline|calibration|error" $O/bench_vk_decode.txt | head -30
  step bench-vulkan-decode-formats
  DUET_CALIBRATION=off DUET_LOG=info timeout 60 $D bench --device vulkan:0 --op matmul --tier matvec \
    --tier int_dot --dtype q8_0 --dtype q4_k --dtype q6_k --repeats 5 --min-seconds 0.02 \
    --json $O/bench_vk_decode2.json > $O/bench_vk_decode2.txt 2>&1
  echo rc=$?; grep -E "decode|first runs|pipeline|error" $O/bench_vk_decode2.txt | head -30
  # VKDECODE_QUICK=1: only the rows above and the plan (a short run's device time).
  if [ -z "${VKDECODE_QUICK:-}" ]; then
    # The mat-vec alone in the formats and dtypes above leave out: every block format and float
    # dtype has its decode rows (M1, M8; the M512 rows have no mat-vec and are skipped).
    step bench-vulkan-decode-rest
    DUET_CALIBRATION=off DUET_LOG=info timeout 60 $D bench --device vulkan:0 --op matmul --tier matvec \
      --dtype f32 --dtype bf16 --dtype q4_1 --dtype q5_0 --dtype q5_1 --dtype q4_z --dtype q2_k \
      --dtype q3_k --dtype q5_k --repeats 5 --min-seconds 0.02 \
      --json $O/bench_vk_decode3.json > $O/bench_vk_decode3.txt 2>&1
    echo rc=$?; grep -E "decode|first runs|pipeline|error" $O/bench_vk_decode3.txt | head -30
    # The suspect of the silent 75 s: Vulkan's calibration alone, each probe's preparation timed.
    step calibrate-vulkan-alone
    ( time DUET_LOG=debug timeout 60 $D calibrate --device vulkan:0 --refresh ) 2>&1 |
      grep -E "prepared|calibrat|pipeline|real|source" | head -30
    # A second process reads the cached outcome (used or not) and measures nothing: "source: cache"
    # and well under a second.
    step calibrate-vulkan-cached
    ( time timeout 30 $D calibrate --device vulkan:0 ) 2>&1 | grep -E "source|real" | head -5
  fi
  # The decode tier the planner picks on this GPU (issue 25: int_dot was picked, 2.6-5x slower
  # than matvec): the plan of one q4_0 decode mat-vec on vulkan:0, and the device's own record
  # (a profile of it: `duet plan --profile FILE`).
  step vulkan-decode-plan
  timeout 20 $D devices --profile vulkan:0 > $O/vulkan0_profile.json 2>&1; echo rc=$?
  printf '%s\n' '{"format":"duet-graph","version":1,"name":"decode","inputs":[{"name":"x","dtype":"f32","shape":[1,4096]}],' \
    '"constants":[{"name":"w","dtype":"q4_0","shape":[14336,4096]}],' \
    '"nodes":[{"name":"up","op":"matmul","inputs":["x","w"],"attrs":{"transpose_b":true}}],"outputs":["up"]}' > /tmp/decode_q4.json
  DUET_CALIBRATION=off timeout 20 $D plan /tmp/decode_q4.json --devices vulkan:0 --explain 2>&1 |
    grep -E "up|matvec|int_dot|estimate|error" | head -12
fi
# duet-llama on vulkan:0 (calibration off: one device needs no placement; DUET_LOG=info for the
# pipelines' line: a plan's first run makes its pipelines on several threads at once).
# First the cost of a cold start: the 8B plan's pipelines made one at a time, then on 16 threads,
# each with an empty pipeline cache and NVIDIA's shader disk cache off (its `real` and the
# "pipelines made in" line of each).
if want vkllama; then
  for t in 1 16; do
    step "llama vulkan:0 cold pipelines, DUET_VULKAN_PIPELINE_THREADS=$t"
    c=$(mktemp -d)
    ( time DUET_VULKAN_PIPELINE_THREADS=$t DUET_VULKAN_CACHE_DIR=$c __GL_SHADER_DISK_CACHE=0 \
      DUET_CALIBRATION=off DUET_LOG=info timeout 45 $L /tmp/m8.gguf --prompt-ids 1,2,3 -n 2 \
      --devices vulkan:0 --ctx 1024 ) 2>&1 | grep -E "pipeline|prefill|decode|error|real"
  done
  (export DUET_CALIBRATION=off DUET_LOG=info; llama vulkan:0)
fi
# The Vulkan decode fusions (grouped mat-vecs, shared q8 activations, the add inside the
# rmsnorm, rope/cast writing the cache; docs/vulkan.md) all on and all off: the steady step and
# the greedy ids of both. --timing shows the unfused step (nothing is held while timing).
if want vkfuse; then
  for f in 1 0; do
    step "llama vulkan:0 decode at ~512, fusions $f"
    DUET_VULKAN_GROUP_MATVECS=$f DUET_VULKAN_SHARE_Q8=$f DUET_VULKAN_FUSE_ADD_NORM=$f \
      DUET_VULKAN_FUSE_ROPE_WRITE=$f DUET_CALIBRATION=off timeout 60 $L /tmp/m8.gguf \
      --bench-prompt 512 -n 64 --temp 0 --ignore-eos --ctx 1024 --devices vulkan:0 2>&1 \
      >/dev/null | grep -iE 'decode steady|error'
    DUET_VULKAN_GROUP_MATVECS=$f DUET_VULKAN_SHARE_Q8=$f DUET_VULKAN_FUSE_ADD_NORM=$f \
      DUET_VULKAN_FUSE_ROPE_WRITE=$f DUET_CALIBRATION=off timeout 45 $L /tmp/m8.gguf \
      --prompt-ids 1,2,3 -n 24 --temp 0 --ignore-eos --print-ids --devices vulkan:0 2>/dev/null \
      | tail -1 > $O/vkfuse_ids_$f.txt
  done
  cmp -s $O/vkfuse_ids_1.txt $O/vkfuse_ids_0.txt && echo "same ids" || { echo "IDS DIFFER:"; cat $O/vkfuse_ids_[01].txt; }
fi
# The Vulkan mat-vec's weight rows a workgroup (DUET_VULKAN_MATVEC_ROWS) against its invocations
# (DUET_VULKAN_MATVEC_THREADS) on q4_0 and q8_0, by the kernels' own clock (bench's kernel ms).
if want vksweep; then
  step bench-vulkan-matvec-sweep
  for c in 1x128 2x128 4x128 8x128 2x64 4x64 4x256 8x256; do
    echo "rows ${c%x*} threads ${c#*x}:"
    DUET_VULKAN_MATVEC_ROWS=${c%x*} DUET_VULKAN_MATVEC_THREADS=${c#*x} DUET_CALIBRATION=off \
      timeout 30 $D bench --device vulkan:0 --op matmul --tier matvec --dtype q4_0 --dtype q8_0 \
      --repeats 5 --min-seconds 0.02 2>&1 | grep -E " decode M"
  done
fi
# A decode step's host overhead: its logits read from the resizable-BAR mapping (memcpy over PCIe)
# against a copy into host-cached memory first (the default where the mapped memory is not cached).
if want vkread; then
  for c in 1 0; do
    step "llama vulkan:0 decode timing, DUET_VULKAN_COPIED_READS=$c"
    DUET_VULKAN_COPIED_READS=$c DUET_CALIBRATION=off timeout 60 $L /tmp/m8.gguf --prompt-ids 1,2,3 \
      -n 32 --devices vulkan:0 --timing 2>&1 | grep -E "decode|timing|error" | head -12
  done
fi
if want vkcheck; then
  step check-vulkan; timeout 150 $D check --device vulkan:0 --json $O/check_vulkan.json > $O/check_vulkan.txt 2>&1
  echo rc=$?; grep -v -E "^\s*(ok|pass)" $O/check_vulkan.txt | tail -25
  step check-vulkan-validation; DUET_VULKAN_VALIDATION=1 timeout 60 $D check --device vulkan:0 --op matmul 2>&1 | tail -3
fi
# Vulkan attention (decode kernel, keys split across workgroups) against CUDA on the same GPU,
# the larger cases checked first; the one-GPU planning line; calibration at GPU sizes.
if want vkattn; then
  step check-vulkan-attention-full; timeout 60 $D check --device vulkan:0 --op attention --full 2>&1 | tail -4
  step bench-vulkan-vs-cuda-attention; timeout 60 $D bench --device vulkan:0 --device cuda:0 --op attention \
    --dtype f16 --min-seconds 0.05 --json $O/bench_vk_cuda_attn.json > $O/bench_vk_cuda_attn.txt 2>&1
  echo rc=$?; tail -40 $O/bench_vk_cuda_attn.txt
  step calibrate; ( time timeout 60 $D calibrate --device cuda:0,vulkan:0 --refresh ) 2>&1 | tail -20
  step one-gpu-plan; timeout 20 $D plan examples/attention.json --explain 2>&1 | grep -iE "one GPU|budget|whole graph" | head -5
fi
if want vkbench; then
  step bench-vulkan; timeout 90 $D bench --device vulkan:0 --op matmul --op attention --min-seconds 0.03 \
    --json $O/bench_vulkan.json > $O/bench_vulkan.txt 2>&1; echo rc=$?; tail -60 $O/bench_vulkan.txt
fi
[ -n "${CLOCKS:-}" ] && kill $CLOCKS
step summary; python3 $B/summarize.py $O > $O/summary.md; cat $O/summary.md
step done
} 2>&1 | tee $O/log.txt
