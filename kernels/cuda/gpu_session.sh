#!/bin/sh
# gpu_session.sh — everything a session on a GPU machine (H100/H200) should run for the CUDA backend,
# with the results written to docs/CUDA_RESULTS_<date>.md (a dated table to commit).
#
#   sh kernels/cuda/gpu_session.sh [build|test|bench|train|dp|levers|all] [OUT.md]
#
#   build  make the CUDA backend, its tests and the trainers for the GPU found (CUDA_ARCH from
#          nvidia-smi, sm_90 on H100/H200) into build/gpu
#   test   the CPU-vs-GPU op test, plan test, loss curves vs CPU, compute-sanitizer runs, and DP-SGD
#          on the GPU against the CPU (every norm x clip, sigma=0 vs vanilla, the same noise), and
#          dpmem_cuda.h on the GPU (test_cuda_gpu: tags vs cudaMemGetInfo, scope times, OOM report;
#          test_cuda_memcheck.sh: memcheck, leaks named by tag) — built here, never run on a GPU yet
#   bench  bench_cuda_kernels with TF32 (default), fp32 and bf16 GEMMs
#   train  train_vanilla --device cuda at the 1b preset (T = 16384) and 3b (T = 4096), each beside the
#          plan for cuda (peak tagged bytes must be equal; a run the plan says cannot fit is skipped)
#   dp     DP-SGD steps on the GPU: vanilla, direct, ghost+twopass, flash+bk, mixed+bk at small,
#          medium and 1b (T = 16384), step time and peak as ratios to vanilla in the same session
#          (issue 7's goal: flash/mixed+bk within 1.10x of vanilla's time and peak on 1b at 16384).
#          A logical batch of 2 in physical batches of 1, so that the per-sample methods really run
#          (a lone batch of 1 is clipped as one gradient, whatever --norm says)
#   levers the two memory levers on the GPU (docs/LEVERS.md): vanilla and flash+bk on 1b at T = 4096,
#          B = 2 (physical 1), in fp32, bf16, fp32 + checkpointing, bf16 + checkpointing: step time and
#          measured peak as ratios to fp32 in this session, each peak beside the plan for cuda's
# Run the stages separately when commands are time-limited. The dp stage is the long one (an estimate,
# not a measurement: at 1b, T = 16384 each DP method's 8 physical batches of flash norms on fp32 CUDA
# cores may take minutes); DP_MODELS="small medium" (or "1b") runs only those models' rows, e.g.
#   DP_MODELS="small medium" sh kernels/cuda/gpu_session.sh dp; DP_MODELS=1b sh kernels/cuda/gpu_session.sh dp
# Without a GPU it stops at once with one line (nothing to measure).
set -u
stage=${1:-all}
day=$(date -u +%Y-%m-%d)
OUT=${2:-docs/CUDA_RESULTS_$day.md}
B=${BUILD:-build/gpu}
if ! nvidia-smi -L >/dev/null 2>&1; then echo "gpu_session: no GPU (nvidia-smi -L failed): nothing to run"; exit 77; fi
arch=${CUDA_ARCH:-sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)}
J=$(nproc 2>/dev/null || echo 4)

# every file of the session goes under $B (never beside it: BUILD=build must not litter the root)
S=$B/session
mkdir -p "$S" || exit 1
# the step time of a log: dpmem-report's median over the timed steps (the first, warm-up, left out)
step_ms() { "$B/dpmem-report" "$1" --csv - | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) ix[$i] = i; next } { v = $ix["step_median_ms"]; if (v != "") printf "%.1f", v }'; }
note() { printf '%s\n' "$*" >>"$OUT"; }
block() { note '```'; cat >>"$OUT"; note '```'; note ''; }

if [ ! -f "$OUT" ]; then
  note "# CUDA backend results, $day"
  note ""
  note "Written by kernels/cuda/gpu_session.sh on: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1), $arch, $(nvcc --version 2>/dev/null | tail -1)"
  note ""
fi

if [ "$stage" = build ] || [ "$stage" = all ]; then
  make -j"$J" BUILD="$B" CUDA_ARCH="$arch" cuda-backend "$B/train_vanilla" "$B/train_dpsgd" "$B/train_ghost" "$B/train_flash" \
      "$B/train_lora" "$B/dpmem-report" "$B/tests/test_cuda_gpu" "$B/tests/test_dp_cuda_gpu" >"$S/build.log" 2>&1 \
    || { tail -n 30 "$S/build.log"; echo "gpu_session: build failed (log: $S/build.log)"; exit 1; }
  echo "built into $B for $arch"
fi

if [ "$stage" = test ] || [ "$stage" = all ]; then
  note "## Tests ($B, $arch)"
  DPMEM_BUILD="$B" sh tests/run_tests.sh "$B/tests/test_cuda_kernels" "$B/tests/test_cuda_ops_plan" \
      tests/test_cuda_ops_train.sh tests/test_cuda_ops_sanitize.sh "$B/tests/test_dp_cuda_gpu" \
      "$B/tests/test_cuda_gpu" tests/test_cuda_memcheck.sh 2>&1 | tee "$S/test.log" | block
  note "Per-op detail (test_cuda_kernels):"
  DPMEM_CUDA_TF32=0 "$B/tests/test_cuda_kernels" 2>&1 | block
fi

if [ "$stage" = bench ] || [ "$stage" = all ]; then
  note "## Kernel benchmark, TF32 on (default)"
  "$B/bench/bench_cuda_kernels" 2>&1 | block
  note "## Kernel benchmark, fp32 GEMMs (DPMEM_CUDA_GEMM=fp32)"
  DPMEM_CUDA_GEMM=fp32 "$B/bench/bench_cuda_kernels" 2>&1 | block
  note "## Kernel benchmark, bf16 GEMMs (DPMEM_CUDA_GEMM=bf16)"
  DPMEM_CUDA_GEMM=bf16 "$B/bench/bench_cuda_kernels" 2>&1 | block
fi

if [ "$stage" = train ] || [ "$stage" = all ]; then
  total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)   # MiB
  note "## Training steps with --device cuda (plan for cuda beside each run)"
  for cfg in "1b 16384 1" "3b 4096 1"; do
    set -- $cfg
    args="--model $1 --seq-len $2 --batch-size $3 --steps 3 --warmup-steps 1"
    plan=$("$B/train_vanilla" $args --device plan --plan-for cuda 2>&1)
    pp=$(printf '%s\n' "$plan" | sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p')
    note "### $args"
    if [ -n "$pp" ] && [ $((pp / 1048576)) -lt $((total - 2048)) ]; then
      run=$("$B/train_vanilla" $args --device cuda 2>&1)
      pr=$(printf '%s\n' "$run" | sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p')
      printf '%s\n' "$run" | block
      note "plan for cuda peak: $pp bytes; cuda run peak: ${pr:-?} bytes; $( [ "$pp" = "$pr" ] && echo equal || echo DIFFERENT)"
    else
      printf '%s\n' "$plan" | block
      note "not run: the plan says $pp bytes, the device has $total MiB"
    fi
    note ""
  done
fi
if [ "$stage" = dp ] || [ "$stage" = all ]; then
  note "## DP-SGD steps with --device cuda: ratios to vanilla in this session"
  note ""
  note "Step time: median of steps 2..N of the log's \`step\` scope (dpmem-report; the first, the warm-up, left out)."
  note ""
  note "| model | T | method | ms/step | x vanilla | peak MiB | x vanilla |"
  note "|---|---|---|---|---|---|---|"
  for cfg in "small 1024" "medium 4096" "1b 16384"; do
    set -- $cfg
    case " ${DP_MODELS:-small medium 1b} " in *" $1 "*) ;; *) continue ;; esac
    model=$1 T=$2 v_ms= v_peak=
    for m in vanilla "direct bk" "ghost twopass" "flash bk" "mixed bk"; do
      log="$S/dp.$model.$T.log"
      rm -f "$log"
      if [ "$m" = vanilla ]; then
        "$B/train_vanilla" --device cuda --model "$model" --seq-len "$T" --batch-size 1 --grad-accum 2 --steps 4 --quiet --log "$log" \
            >"$log.out" 2>&1
      else
        set -- $m
        "$B/train_flash" --device cuda --model "$model" --seq-len "$T" --batch-size 2 --max-physical-batch-size 1 --steps 4 \
            --norm "$1" --clip "$2" --quiet --log "$log" >"$log.out" 2>&1
      fi
      rc=$?
      name=$(echo "$m" | tr ' ' +)
      if [ $rc -ne 0 ]; then note "| $model | $T | $name | exit $rc: $(tail -n 1 "$log.out") | | | |"; continue; fi
      ms=$(step_ms "$log")
      peak=$("$B/dpmem-report" "$log" | sed -n 's/^peak total: .*(\([0-9]*\) bytes).*/\1/p')
      [ "$m" = vanilla ] && { v_ms=$ms; v_peak=$peak; }
      note "| $model | $T | $name | $ms | $(awk -v a="$ms" -v b="$v_ms" 'BEGIN { if (b > 0) printf "%.2f", a / b }') | $(awk -v p="$peak" 'BEGIN { printf "%.0f", p / 1048576 }') | $(awk -v a="$peak" -v b="$v_peak" 'BEGIN { if (b > 0) printf "%.3f", a / b }') |"
    done
  done
  note ""
fi
if [ "$stage" = levers ] || [ "$stage" = all ]; then
  note "## The levers with --device cuda (1b, T = 4096, batch 2 in physical batches of 1): ratios to fp32"
  note ""
  note "| method | config | ms/step | x fp32 | peak MiB | x fp32 | plan for cuda |"
  note "|---|---|---|---|---|---|---|"
  for m in vanilla "flash bk"; do
    f_ms= f_peak=
    for conf in fp32 bf16 "fp32 ckpt" "bf16 ckpt"; do
      set -- $conf
      lev="--precision $1"; [ $# -gt 1 ] && lev="$lev --checkpoint-activations"
      log="$S/levers.log"
      rm -f "$log"
      if [ "$m" = vanilla ]; then prog="$B/train_vanilla"; margs="--batch-size 1 --grad-accum 2"
      else set -- $m; prog="$B/train_flash"; margs="--batch-size 2 --max-physical-batch-size 1 --norm $1 --clip $2"; fi
      args="--model 1b --seq-len 4096 --steps 4 $margs $lev --quiet"
      "$prog" $args --device cuda --log "$log" >"$log.out" 2>&1
      rc=$?
      pp=$("$prog" $args --device plan --plan-for cuda 2>&1 | sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p')
      if [ $rc -ne 0 ]; then note "| $m | $conf | exit $rc: $(tail -n 1 "$log.out") | | | | $pp |"; continue; fi
      ms=$(step_ms "$log")
      peak=$(sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$log.out")
      [ "$conf" = fp32 ] && { f_ms=$ms; f_peak=$peak; }
      note "| $m | $conf | $ms | $(awk -v a="$ms" -v b="$f_ms" 'BEGIN { if (b > 0) printf "%.2f", a / b }') | $(awk -v p="$peak" 'BEGIN { printf "%.0f", p / 1048576 }') | $(awk -v a="$peak" -v b="$f_peak" 'BEGIN { if (b > 0) printf "%.3f", a / b }') | $( [ "$pp" = "$peak" ] && echo "equal" || echo "$pp (DIFFERENT)") |"
    done
  done
  note ""
fi
echo "gpu_session: results in $OUT"
