#!/bin/sh
# compute-sanitizer memcheck over test_cuda_gpu ("clean" mode: everything but the OOM), then a run that
# leaks a tagged buffer on purpose: the leak report must name it by its tag (NVTX memory regions,
# --nvtx yes). Needs a GPU and compute-sanitizer; otherwise one SKIP line.
B=${DPMEM_BUILD:-build}
CS=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" 2>/dev/null)
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP test_cuda_memcheck: no GPU: compute-sanitizer memcheck and NVTX-named leak reports not checked"; exit 77
fi
if [ -z "$CS" ]; then
  echo "SKIP test_cuda_memcheck: no compute-sanitizer: memcheck and NVTX-named leak reports not checked"; exit 77
fi
out=$("$CS" --tool memcheck --leak-check full --nvtx yes --error-exitcode 9 "$B/tests/test_cuda_gpu" clean 2>&1); rc=$?
printf '%s\n' "$out" | tail -n 5
[ $rc -eq 0 ] || { printf '%s\n' "$out" | tail -n 40; echo "FAIL: memcheck run exited $rc"; exit 1; }
printf '%s\n' "$out" | grep -q "ERROR SUMMARY: 0 errors" || { echo "FAIL: memcheck found errors"; exit 1; }
out=$("$CS" --tool memcheck --leak-check full --nvtx yes "$B/tests/test_cuda_gpu" leak 2>&1)
printf '%s\n' "$out" | grep -Eq "Leaked 1,?048,?576 bytes" || { printf '%s\n' "$out" | tail -n 30; echo "FAIL: the deliberate 1 MiB leak was not reported"; exit 1; }
printf '%s\n' "$out" | grep -q "params/leaked_on_purpose" || { printf '%s\n' "$out" | tail -n 30; echo "FAIL: the leak report does not name the buffer by its tag"; exit 1; }
echo "memcheck clean; the deliberate leak is reported as params/leaked_on_purpose"
