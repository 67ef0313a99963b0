#!/bin/sh
# gpu_session.sh — everything a session on a GPU machine (H100/H200) should run for the CUDA backend,
# with the results written to docs/CUDA_RESULTS_<date>.md (a dated table to commit).
#
#   sh kernels/cuda/gpu_session.sh [build|test|bench|train|all] [OUT.md]
#
#   build  make the CUDA backend, its tests and the trainers for the GPU found (CUDA_ARCH from
#          nvidia-smi, sm_90 on H100/H200) into build/gpu
#   test   the CPU-vs-GPU op test, plan test, loss curves vs CPU, compute-sanitizer runs
#   bench  bench_cuda_kernels with TF32 (default), fp32 and bf16 GEMMs
#   train  train_vanilla --device cuda at the 1b preset (T = 16384) and 3b (T = 4096), each beside the
#          plan for cuda (peak tagged bytes must be equal; a run the plan says cannot fit is skipped)
# Each stage fits in a few minutes; run them separately when commands are time-limited.
# Without a GPU it stops at once with one line (nothing to measure). Not here: the DP trainers on
# the GPU (they refuse --device cuda until samples/dp_sgd.c calls the dp_*_cuda kernels).
set -u
stage=${1:-all}
day=$(date -u +%Y-%m-%d)
OUT=${2:-docs/CUDA_RESULTS_$day.md}
B=${BUILD:-build/gpu}
if ! nvidia-smi -L >/dev/null 2>&1; then echo "gpu_session: no GPU (nvidia-smi -L failed): nothing to run"; exit 77; fi
arch=${CUDA_ARCH:-sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)}
J=$(nproc 2>/dev/null || echo 4)

note() { printf '%s\n' "$*" >>"$OUT"; }
block() { note '```'; cat >>"$OUT"; note '```'; note ''; }

if [ ! -f "$OUT" ]; then
  note "# CUDA backend results, $day"
  note ""
  note "Written by kernels/cuda/gpu_session.sh on: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1), $arch, $(nvcc --version 2>/dev/null | tail -1)"
  note ""
fi

if [ "$stage" = build ] || [ "$stage" = all ]; then
  make -j"$J" BUILD="$B" CUDA_ARCH="$arch" cuda-backend "$B/train_vanilla" "$B/tests/test_cuda_gpu" >"$B.build.log" 2>&1 \
    || { tail -n 30 "$B.build.log"; echo "gpu_session: build failed (log: $B.build.log)"; exit 1; }
  echo "built into $B for $arch"
fi

if [ "$stage" = test ] || [ "$stage" = all ]; then
  note "## Tests ($B, $arch)"
  DPMEM_BUILD="$B" sh tests/run_tests.sh "$B/tests/test_cuda_kernels" "$B/tests/test_cuda_ops_plan" \
      tests/test_cuda_ops_train.sh tests/test_cuda_ops_sanitize.sh 2>&1 | tee "$B.test.log" | block
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
echo "gpu_session: results in $OUT"
