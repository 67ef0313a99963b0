#!/bin/sh
# test_cuda_ops_sanitize.sh — compute-sanitizer over the CUDA backend: memcheck (out-of-bounds and
# misaligned accesses, leaks of device memory) on test_cuda_kernels and on a 3-step --device cuda run
# of the tiny trainer; racecheck (shared-memory hazards: the attention and flash-norm tiles) and
# synccheck (__syncthreads in divergent code) on test_cuda_kernels. Each must report 0 errors.
# SKIP (exit 77) without a GPU or without compute-sanitizer.
B=${DPMEM_BUILD:-build}
CS=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" 2>/dev/null)
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP test_cuda_ops_sanitize: no GPU: memcheck/racecheck/synccheck of the CUDA kernels not run"; exit 77
fi
if [ -z "$CS" ]; then
  echo "SKIP test_cuda_ops_sanitize: no compute-sanitizer: memcheck/racecheck/synccheck of the CUDA kernels not run"; exit 77
fi
fail=0
run() {   # run NAME ARGS...: one sanitizer run that must exit 0 with "0 errors"
  name=$1; shift
  out=$("$CS" --error-exitcode 9 "$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "ERROR SUMMARY: 0 errors"; then
    echo "ok   $name: $(printf '%s\n' "$out" | grep -m1 'ERROR SUMMARY')"
  else
    printf '%s\n' "$out" | tail -n 40; echo "FAIL $name (exit $rc)"; fail=1
  fi
}
run "memcheck test_cuda_kernels" --tool memcheck --leak-check full "$B/tests/test_cuda_kernels"
run "racecheck test_cuda_kernels" --tool racecheck "$B/tests/test_cuda_kernels"
run "synccheck test_cuda_kernels" --tool synccheck "$B/tests/test_cuda_kernels"
if [ -x "$B/train_vanilla" ]; then
  run "memcheck train_vanilla --device cuda" --tool memcheck --leak-check full "$B/train_vanilla" --model tiny --steps 3 --device cuda --quiet
fi
exit $fail
