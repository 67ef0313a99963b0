#!/bin/sh
# gpu_session.sh — the CUDA backend's checks and measurements on a GPU as ONE run that fits a lent slot:
# the GPU machine is lent for minutes (a command at most 10), has no time to spare for compiling and
# none of Debian's -dev packages (no OpenBLAS, cJSON, OpenMPI, cairo), so the build is made HERE, on a
# machine with the same CUDA 13, and taken there with the libraries it needs (../shared/gpu/pack.sh).
#
#   here:   sh kernels/cuda/gpu_session.sh build                 make build/gpu for sm_90, copy the programs
#                                                                to build/gpu-run and pack its libraries (.gpu/)
#           sh kernels/cuda/gpu_session.sh dry-run OUT [STAGES]  the same steps with no GPU: every binary
#                                                                exists and starts, every trainer's flags parse
#                                                                (its plan for cuda runs instead of the GPU run)
#   there:  . .gpu/env.sh && DPMEM_BUILD=build/gpu-run sh kernels/cuda/gpu_session.sh run OUT [STAGES]
#           (the device tool: carry build/gpu-run and .gpu, OUT=$OUT)
#
# STAGES (default "tests bench speed dp long"), correctness first, then the speed rows:
#   tests     test_cuda_kernels: every op against its CPU twin, cuDNN attention and the native bf16 ops,
#             the noise (the CPU's values, and its untruncated tails on the device: |z| up to 9.4926),
#             the plan for cuda = the run's allocations; test_dp_cuda_gpu: DP on the GPU vs the CPU
#             (with a given --noise-seed; a sample with a NaN embedding row adds exactly 0, every method),
#             again with DPMEM_CUDA_POISON=1 (the DP buffers that skip the zero-fill start as NaN bytes)
#   bench     bench_cuda_kernels (ms, TFLOP/s or GB/s, % of the device's peak)
#   speed     1b T=4096 B=1 vanilla: bf16, TF32, and bf16 with cudaMalloc/cudaFree (DPMEM_CUDA_ALLOC=sync)
#   dp        1b T=4096, 2 samples in physical batches of 1, bf16: vanilla, direct+bk, mixed+bk, flash+bk,
#             ghost+twopass; step time and peak as ratios to vanilla; each peak = its plan (issue 34's goal:
#             direct+bk and mixed+bk <= 1.10x, flash+bk <= 1.20x, ghost+twopass <= 1.8x, peaks <= 1.02x)
#   dp8       the same rows at 1b T=1024, 16 samples in physical batches of 8 (T below the width)
#   fused     the DP step's fused noise + AdamW (dp_update.cu) against the separate path, bit for bit,
#             and against the CPU (test_cuda_kernels noise: also the noise stream itself); then the loop's
#             fused update (samples/dp/dp_fused.c) on tiny: each run saved (f32) with it and with the two passes
#             (DPMEM_FUSED_UPDATE=0), the files byte for byte, its log saying it ran (META dp.update = fused):
#             flash+bk, ghost+twopass bf16, LoRA bf16, --secure-noise, --zero 2 --ranks 1 (NCCL); then 1b T=4096,
#             2 samples in physical batches of 1, bf16, flash+bk: step times fused and separate, their ratio,
#             and the optimizer_step and noise rows (fused: the noise is inside optimizer_step, its row ~0)
#   secure    --secure-noise (ChaCha20 on the grid, kernels/secure_noise.h): test_cuda_kernels secure (the privatized
#             values and the fused update, CPU = GPU bit for bit), then 1b T=4096, 2 samples in physical batches of 1,
#             bf16, flash+bk with Philox and with --secure-noise: step times, their ratio, and the noise phase's GPU time
#             (dpmem-report); the decision of issue 45: --secure-noise becomes the default if it adds < 1 % to the step
#             (bench_cuda_kernels, stage bench, has its per-coordinate cost beside Philox's, separate and fused)
#   nsys      where Nsight Systems is installed: a DP step (1b T=4096 mixed+bk, bf16) under
#             nsys profile -t cuda,nvtx --cuda-memory-usage=true; nvtx_sum and nvtx_gpu_proj_sum into
#             OUT/nsys.log (the report itself stays in /tmp: a lent machine returns at most 8 files);
#             else one line saying it is not there
#   long      1b T=16384 bf16 with activation checkpointing: vanilla and flash+bk
#   bf16      the speed stage's bf16 row alone
#   classify  --task classify (LlamaForSequenceClassification): tiny's first loss on the CPU and the GPU
#             equal; 1b T=128, 3 labels: vanilla, LoRA r16 and ghost in physical batches of 1, each
#             peak = its plan
#   train     tests/test_cuda_ops_train.sh: CPU vs CUDA loss curves, plan = peak, the GPU-time table and MFU line
#   kit       dpmem_cuda.h on the GPU (test_cuda_gpu) and under compute-sanitizer --nvtx yes (test_cuda_memcheck.sh)
#   zero      --zero 2 --ranks 1 (a job of one rank: NCCL's per-unit reduce-scatter in the backward, all-gather), flash+bk and
#             vanilla = unsharded, bit for bit; each peak = its plan; bf16 --zero 1 --ranks 1 (sharded fp32 masters,
#             the bf16 copies gathered as ncclBfloat16, --save gathered) = unsharded bf16, the saved files byte for byte;
#             bf16 --zero 3 --ranks 1 (each unit's weights gathered by NCCL, the next unit's in flight; and
#             DPMEM_ZERO3_PREFETCH=0) = unsharded bf16, byte for byte; its peak = its plan; each sharded run's log
#             says NCCL ran (META comm.backend = nccl); 1b T=1024 --zero 2 --ranks 1 with the reduction overlapped
#             (NCCL's own stream) and serial (DPMEM_COMM_OVERLAP=0): step times, their ratio
#   lorabf16  LoRA under bf16 (the base in bf16 alone, adapters unmerged): tiny's last loss on the CPU and
#             the GPU within 5e-3; 1b T=512 r16 in physical batches of 1, its peak = its plan
#   sanitize  tests/test_cuda_ops_sanitize.sh: memcheck, racecheck, synccheck of test_cuda_kernels, a planted
#             race and out-of-bounds write that must be caught
# A lent machine runs a command for at most 10 minutes: split the stages, e.g. "tests fused", then "dp",
# then "dp8 nsys" (each writes into the same OUT).
# Every step runs under `timeout`; its output is appended to OUT/<stage>.log as it comes and its one-line
# result to OUT/summary.txt, the rows of the tables to OUT/table.md (at most 8 files: what a lent machine
# returns), so a run cut short still leaves everything it measured.
set -u
mode=${1:-}
B=${DPMEM_BUILD:-build/gpu}
case "$mode" in
build)
  # build/gpu keeps the objects (rebuilds stay incremental); what travels is a stripped copy of the
  # programs in $R (64 MiB at most with the libraries), run there as DPMEM_BUILD=$R.
  # NCCL: the trainers link the toolkit's libnccl.so.2 (mk/trainer.mk, for the zero stage's collectives) but do
  # not carry it (218 MB, past the 64 MiB a lent machine takes): the GPU machine has NCCL in its python3's
  # torch wheel (nvidia.nccl, ../shared/gpu/README.md), which .gpu/env.sh puts on LD_LIBRARY_PATH; the run's
  # library check below stops at once, naming libnccl.so.2, where it is not there.
  R=${DPMEM_RUN_DIR:-build/gpu-run}
  progs="tests/test_cuda_kernels tests/test_dp_cuda_gpu tests/test_cuda_gpu tests/cuda_sanitize_plant bench/bench_cuda_kernels train_vanilla train_flash train_ghost train_dpsgd train_lora dpmem-report dpmem-trace"
  make -j"$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)" BUILD="$B" CUDA_ARCH=${CUDA_ARCH:-sm_90} \
      $(for p in $progs; do printf '%s/%s ' "$B" "$p"; done) || exit 1
  for p in train_vanilla train_flash; do   # (a build folder made before NCCL was linked: make clean it)
    readelf -d "$B/$p" | grep -q 'libnccl\.so' || { echo "gpu_session build: $B/$p does not link NCCL (no nccl.h or libnccl.so under CUDA_HOME?)" >&2; exit 1; }
  done
  rm -rf "$R" && mkdir -p "$R/tests" "$R/bench" || exit 1
  for p in $progs; do cp "$B/$p" "$R/$p" && strip -g "$R/$p" || exit 1; done
  sh "${PACK:-../shared/gpu/pack.sh}" "$R" .gpu || exit 1
  kib=$(du -skc "$R" .gpu | tail -1 | cut -f1)
  echo "gpu_session build: $R and .gpu carry $kib KiB (the limit: 65536 KiB)"
  [ "$kib" -le 65536 ] || { echo "gpu_session build: past the 64 MiB a lent machine takes" >&2; exit 1; }
  exit 0 ;;
run|dry-run) ;;
*) echo "usage: gpu_session.sh build | dry-run OUT [STAGES] | run OUT [STAGES]" >&2; exit 2 ;;
esac
OUT=${2:?gpu_session.sh $mode: name the output folder}
shift 2
STAGES=${*:-tests bench speed dp long}
mkdir -p "$OUT" || exit 1
SUM=$OUT/summary.txt
TAB=$OUT/table.md
dry=0; [ "$mode" = dry-run ] && dry=1
if [ $dry = 0 ] && ! nvidia-smi -L >/dev/null 2>&1; then echo "gpu_session: no GPU (nvidia-smi -L failed): use dry-run here" | tee -a "$SUM"; exit 77; fi
for p in tests/test_cuda_kernels tests/test_dp_cuda_gpu tests/test_cuda_gpu bench/bench_cuda_kernels train_vanilla train_flash dpmem-report dpmem-trace; do
  [ -x "$B/$p" ] || { echo "gpu_session: $B/$p is missing: run 'sh kernels/cuda/gpu_session.sh build' here first" | tee -a "$SUM"; exit 1; }
done

say() { printf '%s\n' "$*" | tee -a "$SUM"; }
# every library each program needs must resolve here (cuDNN from torch's wheel, the carried ones):
# a run that cannot start its programs stops now, with the names, rather than step by step
missing=$(for p in tests/test_cuda_kernels bench/bench_cuda_kernels train_vanilla train_flash dpmem-report; do ldd "$B/$p"; done 2>&1 | grep "not found" | sort -u)
[ -z "$missing" ] || { say "gpu_session: libraries not found: $(echo $missing)"; exit 1; }
# step STAGE SECONDS NAME COMMAND...: COMMAND under timeout, output to OUT/STAGE.log, a line to the summary
step() {
  st=$1 lim=$2 name=$3; shift 3
  printf '\n=== %s (limit %ss): %s\n' "$name" "$lim" "$*" >>"$OUT/$st.log"
  t0=$(date +%s)
  timeout "$lim" "$@" >>"$OUT/$st.log" 2>&1
  rc=$?
  t=$(( $(date +%s) - t0 ))
  case $rc in 0) r=ok ;; 77) r=SKIP ;; 124) r="TIMEOUT after ${lim}s" ;; *) r="FAIL (exit $rc)" ;; esac
  say "$(printf '%-8s %-52s %s (%ss)' "$st" "$name" "$r" "$t")"
  return $rc
}
peak_of() { sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$1" | tail -n 1; }
ms_of() { "$B/dpmem-report" "$1" --csv - 2>/dev/null | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) ix[$i] = i; next } { v = $ix["step_median_ms"]; if (v != "") printf "%.1f", v }'; }
ratio() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { if (a != "" && b > 0) printf f, a / b }'; }

# train STAGE NAME TOKENS_PER_STEP PROGRAM ARGS...: one training run on the GPU (dry run: its plan for
# cuda), then its plan for cuda; a row: median step ms (dpmem-report, warm-up left out), tokens/s,
# measured and planned peak. Sets ROW_MS and ROW_PEAK for the ratios.
train() {
  st=$1 name=$2 tok=$3 prog=$4; shift 4
  log=$OUT/run.log.tmp out=$OUT/run.out.tmp
  rm -f "$log" "$out"
  ROW_MS= ROW_PEAK=
  if [ $dry = 1 ]; then step "$st" 60 "$name (plan)" "$B/$prog" "$@" --device plan --plan-for cuda --log "$log"
  else step "$st" 240 "$name" "$B/$prog" "$@" --device cuda --log "$log"; fi
  rc=$?
  cat "$OUT/$st.log" | tail -n 40 >"$out"
  [ $rc = 0 ] || { echo "| $name | exit $rc | | | | |" >>"$TAB"; return; }
  pp=$("$B/$prog" "$@" --device plan --plan-for cuda --quiet 2>&1 | sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' | tail -n 1)
  ROW_MS=$(ms_of "$log") ROW_PEAK=$(peak_of "$out")
  "$B/dpmem-report" "$log" >>"$OUT/$st.log" 2>&1   # phases with their GPU time (DPMEM_CUDA_TIMING=1)
  tps=$(awk -v t="$tok" -v ms="$ROW_MS" 'BEGIN { if (ms > 0) printf "%.0f", t / (ms / 1000) }')
  same=$([ -n "$pp" ] && [ "$pp" = "$ROW_PEAK" ] && echo "= plan" || echo "plan $pp")
  echo "| $name | $ROW_MS | $tps | $ROW_PEAK | $same |" >>"$TAB"
}

# dp_rows STAGE TITLE TOKENS_PER_STEP T PHYSICAL ACCUM: vanilla (PHYSICAL samples, ACCUM micro-batches),
# then each DP method on the same PHYSICAL x ACCUM samples as physical batches of PHYSICAL; ratios to vanilla
dp_rows() {
  st=$1 title=$2 tok=$3 T=$4 phys=$5 acc=$6
  echo "" >>"$TAB"; echo "| $title | ms/step | tokens/s | peak B | plan | x vanilla time | x vanilla peak |" >>"$TAB"
  echo "|---|---|---|---|---|---|---|" >>"$TAB"
  a="--model 1b --seq-len $T --steps 5 --precision bf16 --quiet"
  train "$st" "vanilla" "$tok" train_vanilla $a --batch-size "$phys" --grad-accum "$acc"; v_ms=$ROW_MS v_pk=$ROW_PEAK
  for m in "direct bk" "mixed bk" "flash bk" "ghost twopass"; do
    set -- $m
    train "$st" "$1+$2" "$tok" train_flash $a --batch-size $((phys * acc)) --max-physical-batch-size "$phys" --norm "$1" --clip "$2"
    rt=$(ratio "$ROW_MS" "$v_ms" %.3f) rp=$(ratio "$ROW_PEAK" "$v_pk" %.4f)
    say "$st: $1+$2 ${rt}x vanilla's step, ${rp}x its peak"
    [ -n "$ROW_PEAK" ] && sed -i '$ s/$/ '"$rt"' | '"$rp"' |/' "$TAB"   # the row's last two columns
  done
}

# fused_same NAME WANT PROGRAM ARGS...: a DP run saved (f32) with the loop's fused update (DPMEM_FUSED_UPDATE=1; its log
# says META dp.update = WANT) and with the two passes (DPMEM_FUSED_UPDATE=0): every saved file byte for byte (LoRA: the
# adapter's folder too). Into tests.log. Dry run: on the CPU.
fused_same() {
  fn=$1 want=$2 prog=$3; shift 3   # (not `name`: step sets it)
  dev=cuda; [ $dry = 1 ] && dev=cpu
  d0=$OUT/saved0.tmp d1=$OUT/saved1.tmp log=$OUT/saved1.log.tmp
  rm -rf "$d0" "$d1" "$log"
  step tests 120 "fused: $fn, fused update, saved ($dev)" env DPMEM_FUSED_UPDATE=1 "$B/$prog" "$@" --device $dev --save "$d1" --save-dtype f32 --log "$log"
  step tests 120 "fused: $fn, two passes, saved ($dev)" env DPMEM_FUSED_UPDATE=0 "$B/$prog" "$@" --device $dev --save "$d0" --save-dtype f32
  step tests 30 "fused: $fn, fused = two passes, byte for byte" \
      sh -c 'cd "$1" && n=0 && for f in $(find . -type f); do cmp "$f" "$2/$f" || exit 1; n=$((n + 1)); done; [ $n -gt 0 ]' - "$d0" "$d1"
  step tests 30 "fused: $fn: META dp.update = $want" \
      sh -c "\"$B/dpmem-trace\" \"$log\" -o - | grep -o '\"dp.update\":\"[a-z]*\"' | tee /dev/stderr | grep -q '\"$want\"'"
  rm -rf "$d0" "$d1" "$log"
}

# saved_same STAGE PROGRAM "ARGS" "SHARDED" [NOTE]: the run of ARGS unsharded and with the SHARDED flags, each saved
# (f32) on the GPU: the two model.safetensors byte for byte, and the sharded run's log says NCCL ran (META
# comm.backend = nccl: a job of one rank sets it when its communicator is made). Dry run: the same steps on the
# CPU (host buffers: no NCCL, so META comm.backend = none there), which checks the steps themselves.
saved_same() {
  st=$1 prog=$2 args=$3 sharded=$4 note=${5:+ $5} dev=cuda want=nccl
  [ $dry = 1 ] && dev=cpu want=none
  d0=$OUT/saved0.tmp d1=$OUT/saved1.tmp log=$OUT/saved1.log.tmp
  rm -rf "$d0" "$d1" "$log"
  step "$st" 120 "$prog unsharded, saved ($dev)" "$B/$prog" $args --device $dev --save "$d0" --save-dtype f32
  step "$st" 120 "$prog $sharded$note, saved ($dev)" "$B/$prog" $args $sharded --device $dev --save "$d1" --save-dtype f32 --log "$log"
  step "$st" 30 "$prog $sharded$note = unsharded, bit for bit" cmp "$d0/model.safetensors" "$d1/model.safetensors"
  step "$st" 30 "$prog $sharded$note: META comm.backend = $want" \
      sh -c "\"$B/dpmem-trace\" \"$log\" -o - | grep -o '\"comm.backend\":\"[a-z]*\"' | tee /dev/stderr | grep -q '\"$want\"'"
  rm -rf "$d0" "$d1" "$log"
}

DPMEM_CUDA_TIMING=1; export DPMEM_CUDA_TIMING   # the GPU time of every scope, in every run's log
say "gpu_session $mode $(date -u +%Y-%m-%dT%H:%MZ): $( [ $dry = 1 ] && echo 'no GPU (dry run)' || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1); stages: $STAGES"
for stage in $STAGES; do
  case $stage in
  tests)
    step tests 150 "test_cuda_kernels: cuDNN attention, native bf16" "$B/tests/test_cuda_kernels" cudnn bf16ops plan init
    step tests 240 "test_cuda_kernels: every group" "$B/tests/test_cuda_kernels"
    step tests 260 "test_dp_cuda_gpu: DP on the GPU vs the CPU" "$B/tests/test_dp_cuda_gpu"
    # the DP buffers allocated without a zero-fill (kbuf_alloc_overwritten) as NaN bytes: nothing reads them first
    step tests 260 "test_dp_cuda_gpu, DPMEM_CUDA_POISON=1" env DPMEM_CUDA_POISON=1 "$B/tests/test_dp_cuda_gpu" ;;
  bench)
    step bench 150 "bench_cuda_kernels" "$B/bench/bench_cuda_kernels" ;;
  train)  # CPU and CUDA loss curves (tiny, fp32, TF32 off) identical, the plan = the run's peak, the GPU-time table
    step train 300 "test_cuda_ops_train.sh" env DPMEM_BUILD="$B" sh tests/test_cuda_ops_train.sh ;;
  kit)   # dpmem_cuda.h on the GPU: tags vs cudaMemGetInfo, scope times, OOM; memcheck --nvtx yes, leaks by name
    step kit 120 "test_cuda_gpu" "$B/tests/test_cuda_gpu"
    step kit 240 "test_cuda_memcheck.sh" env DPMEM_BUILD="$B" sh tests/test_cuda_memcheck.sh ;;
  bf16)  # the bf16 step alone (the speed stage's first row)
    echo "" >>"$TAB"; echo "| 1b T=4096 B=1 vanilla | ms/step | tokens/s | peak B | plan |" >>"$TAB"; echo "|---|---|---|---|---|" >>"$TAB"
    train bf16 "bf16" 4096 train_vanilla --model 1b --seq-len 4096 --batch-size 1 --steps 6 --quiet --precision bf16 ;;
  speed)
    echo "" >>"$TAB"; echo "| 1b T=4096 B=1 vanilla | ms/step | tokens/s | peak B | plan |" >>"$TAB"; echo "|---|---|---|---|---|" >>"$TAB"
    a="--model 1b --seq-len 4096 --batch-size 1 --steps 6 --quiet"
    train speed "bf16" 4096 train_vanilla $a --precision bf16; bf=$ROW_MS
    train speed "fp32 activations, TF32 GEMMs" 4096 train_vanilla $a --precision fp32; tf=$ROW_MS
    DPMEM_CUDA_ALLOC=sync; export DPMEM_CUDA_ALLOC
    train speed "bf16, cudaMalloc/cudaFree per buffer" 4096 train_vanilla $a --precision bf16; sy=$ROW_MS
    unset DPMEM_CUDA_ALLOC
    say "speed: bf16 is $(ratio "$tf" "$bf" %.2f)x TF32's speed; the pool saves $(ratio "$sy" "$bf" %.3f)x (cudaMalloc step / pool step)" ;;
  dp)
    dp_rows dp "1b T=4096, 2 samples (physical 1), bf16" 8192 4096 1 2 ;;
  dp8)
    dp_rows dp8 "1b T=1024, 16 samples (physical 8), bf16" 16384 1024 8 2 ;;
  fused)  # the fused noise + AdamW (and the noise stream it draws from) against the separate path and the CPU
    step tests 120 "fused: test_cuda_kernels noise (noise+AdamW bit for bit)" "$B/tests/test_cuda_kernels" noise   # into tests.log: OUT holds at most 8 files
    a="--steps 3 --batch-size 4 --max-physical-batch-size 2 --noise-seed 7 --noise-multiplier 1 --quiet"
    fused_same "flash+bk" fused train_flash $a --norm flash --clip bk
    fused_same "ghost+twopass bf16" fused train_ghost $a --clip twopass --precision bf16
    fused_same "LoRA r2 bf16" fused train_lora $a --lora-rank 2 --precision bf16
    fused_same "--secure-noise" $([ $dry = 1 ] && echo separate || echo fused) train_flash $a --secure-noise   # (the CPU: no fused twin)
    fused_same "--zero 2 --ranks 1" fused train_flash $a --zero 2 --ranks 1
    echo "" >>"$TAB"; echo "| 1b T=4096, 2 samples (physical 1), bf16, flash+bk | ms/step | tokens/s | peak B | plan |" >>"$TAB"
    echo "|---|---|---|---|---|" >>"$TAB"
    a="--model 1b --seq-len 4096 --steps 5 --precision bf16 --quiet --batch-size 2 --max-physical-batch-size 1 --norm flash --clip bk"
    train tests "fused noise + AdamW (default)" 8192 train_flash $a; f_ms=$ROW_MS
    grep -h '^ *\(noise\|optimizer_step\) ' "$OUT/tests.log" | tail -n 2 | sed 's/^/fused: fused update, phase: /' | tee -a "$SUM"
    export DPMEM_FUSED_UPDATE=0
    train tests "noise, then AdamW (DPMEM_FUSED_UPDATE=0)" 8192 train_flash $a; s_ms=$ROW_MS
    unset DPMEM_FUSED_UPDATE
    grep -h '^ *\(noise\|optimizer_step\) ' "$OUT/tests.log" | tail -n 2 | sed 's/^/fused: two passes, phase: /' | tee -a "$SUM"
    say "fused: the fused update's step is $(ratio "$f_ms" "$s_ms" %.4f)x the two passes'" ;;
  secure)  # the cryptographic noise: bits against the CPU, then its cost in a 1b DP step beside Philox's
    step secure 150 "test_cuda_kernels secure: ChaCha20 noise, CPU = GPU bit for bit" "$B/tests/test_cuda_kernels" secure
    echo "" >>"$TAB"; echo "| 1b T=4096, 2 samples (physical 1), bf16, flash+bk | ms/step | tokens/s | peak B | plan |" >>"$TAB"
    echo "|---|---|---|---|---|" >>"$TAB"
    a="--model 1b --seq-len 4096 --steps 5 --precision bf16 --quiet --batch-size 2 --max-physical-batch-size 1 --norm flash --clip bk"
    train secure "Philox noise (default)" 8192 train_flash $a; p_ms=$ROW_MS
    grep -h '^ *\(noise\|optimizer_step\) ' "$OUT/secure.log" | tail -n 2 | sed 's/^/secure: Philox noise phase (fused: in optimizer_step): /' | tee -a "$SUM"
    train secure "--secure-noise (ChaCha20, grid)" 8192 train_flash $a --secure-noise; s_ms=$ROW_MS
    grep -h '^ *\(noise\|optimizer_step\) ' "$OUT/secure.log" | tail -n 2 | sed 's/^/secure: secure noise phase (fused: in optimizer_step): /' | tee -a "$SUM"
    say "secure: --secure-noise's step is $(ratio "$s_ms" "$p_ms" %.4f)x Philox's (issue 45: default if below 1.01x)" ;;
  nsys)
    if ! command -v nsys >/dev/null 2>&1; then say "nsys: not installed on this machine (nothing profiled)"; continue; fi
    say "nsys: $(nsys --version 2>&1 | head -1)"
    a="--model 1b --seq-len 4096 --steps 3 --precision bf16 --quiet --batch-size 2 --max-physical-batch-size 1 --norm mixed --clip bk"
    if [ $dry = 1 ]; then step nsys 60 "nsys: mixed+bk (plan only, dry run)" "$B/train_flash" $a --device plan --plan-for cuda
    else
      rm -f /tmp/gpu_session_dp.nsys-rep /tmp/gpu_session_dp.sqlite
      step nsys 300 "nsys profile: 1b T=4096 mixed+bk bf16" nsys profile -t cuda,nvtx --cuda-memory-usage=true \
          -o /tmp/gpu_session_dp "$B/train_flash" $a --device cuda &&
      step nsys 120 "nsys stats: nvtx_sum, nvtx_gpu_proj_sum" nsys stats --report nvtx_sum --report nvtx_gpu_proj_sum \
          /tmp/gpu_session_dp.nsys-rep
    fi ;;
  long)
    echo "" >>"$TAB"; echo "| 1b T=16384 bf16 + checkpointing | ms/step | tokens/s | peak B | plan |" >>"$TAB"; echo "|---|---|---|---|---|" >>"$TAB"
    a="--model 1b --seq-len 16384 --steps 4 --precision bf16 --checkpoint-activations --quiet"
    train long "vanilla, 2 samples (physical 1)" 32768 train_vanilla $a --batch-size 1 --grad-accum 2
    train long "flash+bk, 2 samples (physical 1)" 32768 train_flash $a --batch-size 2 --max-physical-batch-size 1 --norm flash --clip bk ;;
  zero)  # --zero 2 as a job of one rank (--ranks 1, no mpirun there): each gradient unit's reduce-scatter
         # (device buffers: NCCL over one rank, on NCCL's communication stream beside the backward's kernels for
         # vanilla, in book-keeping's formation for flash+bk) and the all-gather; the full-size gradient buffers
         # exist one unit at a time. One physical batch a step (--zero 2 adds each physical batch's sum into the
         # slices: with several, another order than the unsharded accumulation), so the weights equal the
         # unsharded run's bit for bit; each peak its plan (the table's plan column); each sharded run's log
         # says NCCL ran (META comm.backend = nccl, set when the communicator is made)
    echo "" >>"$TAB"; echo "| tiny T=64 flash+bk sigma 1 / vanilla, 1 rank | ms/step | tokens/s | peak B | plan |" >>"$TAB"; echo "|---|---|---|---|---|" >>"$TAB"
    a="--model tiny --seq-len 64 --batch-size 4 --max-physical-batch-size 4 --steps 3 --noise-multiplier 1 --noise-seed 11 --quiet"
    v="--model tiny --seq-len 64 --batch-size 4 --steps 3 --quiet"
    train zero "flash+bk unsharded" 256 train_flash $a
    train zero "flash+bk --zero 2 --ranks 1 (NCCL collectives)" 256 train_flash $a --zero 2 --ranks 1
    train zero "vanilla --zero 2 --ranks 1 (NCCL, in the backward)" 256 train_vanilla $v --zero 2 --ranks 1
    saved_same zero train_flash "$a" "--zero 2 --ranks 1"
    saved_same zero train_vanilla "$v" "--zero 2 --ranks 1"
    # bf16: the GEMM weights' fp32 masters sharded (params/<name>.shard), their bf16 copies all-gathered with
    # ncclBfloat16, --save gathered tensor by tensor: the same file as the unsharded bf16 run's
    a="$a --precision bf16"
    train zero "bf16 unsharded" 256 train_flash $a
    train zero "bf16 --zero 1 --ranks 1 (sharded masters, NCCL bf16 gather)" 256 train_flash $a --zero 1 --ranks 1
    saved_same zero train_flash "$a" "--zero 1 --ranks 1"
    train zero "bf16 --zero 3 --ranks 1 (NCCL gathers, prefetch)" 256 train_flash $a --zero 3 --ranks 1
    saved_same zero train_flash "$a" "--zero 3 --ranks 1"
    DPMEM_ZERO3_PREFETCH=0; export DPMEM_ZERO3_PREFETCH
    saved_same zero train_flash "$a" "--zero 3 --ranks 1" "(DPMEM_ZERO3_PREFETCH=0)"
    unset DPMEM_ZERO3_PREFETCH
    # the reduction overlapped with the backward (NCCL's stream beside the compute stream, the default) against
    # the serial one (DPMEM_COMM_OVERLAP=0: each unit's collective waited for at once): 1b T=1024 vanilla bf16,
    # --zero 2 --ranks 1 (one rank: a reduce-scatter is a copy on the device, so this measures the overlap's
    # cost and what it hides of the copies, not a network's time); step time as a ratio
    echo "" >>"$TAB"; echo "| 1b T=1024 vanilla bf16 --zero 2 --ranks 1 | ms/step | tokens/s | peak B | plan |" >>"$TAB"; echo "|---|---|---|---|---|" >>"$TAB"
    o="--model 1b --seq-len 1024 --batch-size 1 --steps 5 --precision bf16 --quiet --zero 2 --ranks 1"
    train zero "overlapped reduce-scatter (default)" 1024 train_vanilla $o; ov=$ROW_MS
    DPMEM_COMM_OVERLAP=0; export DPMEM_COMM_OVERLAP
    train zero "serial reduce-scatter (DPMEM_COMM_OVERLAP=0)" 1024 train_vanilla $o; se=$ROW_MS
    unset DPMEM_COMM_OVERLAP
    say "zero: the serial reduction's step is $(ratio "$se" "$ov" %.3f)x the overlapped one's (1 rank, NCCL)" ;;
  classify)   # sequence classification on the GPU: the same first loss as the CPU, and peaks = plans
    if [ $dry = 0 ]; then
      c="--model tiny --task classify --num-labels 3 --pad-id 0 --seq-len 16 --batch-size 4 --steps 1 --seed 5"
      step classify 120 "tiny classify: first loss, CPU vs CUDA (1e-4)" sh -c "
        a=\$(\"$B/train_vanilla\" $c --device cpu | sed -n 's/^loss: \\([0-9.]*\\).*/\\1/p')
        b=\$(\"$B/train_vanilla\" $c --device cuda | sed -n 's/^loss: \\([0-9.]*\\).*/\\1/p')
        echo \"cpu \$a cuda \$b\"; awk -v a=\"\$a\" -v b=\"\$b\" 'BEGIN { exit !(a > 0 && (a - b) ^ 2 <= (1e-4 * a) ^ 2) }'"
    fi
    echo "" >>"$TAB"; echo "| 1b classify T=128, 3 labels, 8 samples | ms/step | tokens/s | peak B | plan |" >>"$TAB"; echo "|---|---|---|---|---|" >>"$TAB"
    a="--model 1b --task classify --num-labels 3 --pad-id 0 --seq-len 128 --steps 4 --quiet"
    train classify "vanilla (batch 8)" 1024 train_vanilla $a --batch-size 8
    train classify "LoRA r16, physical 1" 1024 train_lora $a --batch-size 8 --max-physical-batch-size 1 --lora-rank 16
    train classify "ghost+twopass, physical 1" 1024 train_ghost $a --batch-size 8 --max-physical-batch-size 1 ;;
  lorabf16)   # LoRA under bf16: the frozen base in bf16 alone, the adapters unmerged beside it (lora.h)
    if [ $dry = 0 ]; then
      c="--model tiny --precision bf16 --lora-rank 4 --lora-targets q,k,v,o,gate,up,down --seq-len 32 --batch-size 4 --steps 3 --seed 5 --noise-seed 9"
      step lorabf16 120 "tiny bf16 LoRA: last loss, CPU vs CUDA (5e-3)" sh -c "
        a=\$(\"$B/train_lora\" $c --device cpu | sed -n 's/^loss: .* -> \([0-9.]*\).*/\1/p')
        b=\$(\"$B/train_lora\" $c --device cuda | sed -n 's/^loss: .* -> \([0-9.]*\).*/\1/p')
        echo \"cpu \$a cuda \$b\"; awk -v a=\"\$a\" -v b=\"\$b\" 'BEGIN { exit !(a > 0 && (a - b) ^ 2 <= (5e-3 * a) ^ 2) }'"
    fi
    echo "" >>"$TAB"; echo "| 1b bf16 LoRA r16 T=512, 4 samples | ms/step | tokens/s | peak B | plan |" >>"$TAB"; echo "|---|---|---|---|---|" >>"$TAB"
    train lorabf16 "physical 1 (base in bf16 alone)" 2048 train_lora --model 1b --seq-len 512 --batch-size 4 \
        --max-physical-batch-size 1 --lora-rank 16 --precision bf16 --steps 4 --quiet ;;
  sanitize)   # memcheck, racecheck, synccheck of test_cuda_kernels and a planted race / out-of-bounds write
    step sanitize 200 "test_cuda_ops_sanitize.sh" env DPMEM_BUILD="$B" sh tests/test_cuda_ops_sanitize.sh ;;
  *) say "gpu_session: unknown stage '$stage' (tests bench speed bf16 dp dp8 fused secure nsys long train kit sanitize classify zero lorabf16)" ;;
  esac
done
rm -f "$OUT/run.log.tmp" "$OUT/run.out.tmp"
say "gpu_session: done; $OUT/table.md:"
cat "$TAB" 2>/dev/null || true   # no table: the stages run wrote none
