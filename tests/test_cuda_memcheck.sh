#!/bin/sh
# compute-sanitizer memcheck --nvtx yes over test_cuda_gpu ("clean" mode: everything but the OOM,
# including a sub-allocator pool whose blocks are NVTX regions of its heap): exit 0, judged clean by
# memcheck's own summary, and no NVTX call refused (tests/sanitizer_summary.sh). Then a run that
# leaks a tagged buffer on purpose: memcheck must report the leak by the buffer's tag ("Leaked
# 1,048,576 bytes at 0x... called params/leaked_on_purpose", the name given through NVTX), again with
# no NVTX call refused. Holds the GPU test lock (tests/gpu_lock.sh). Needs a GPU and compute-sanitizer;
# otherwise one SKIP line.
B=${DPMEM_BUILD:-build}
here=$(dirname "$0")
. "$here/sanitizer_summary.sh"
. "$here/gpu_lock.sh"
CS=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" 2>/dev/null)
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP test_cuda_memcheck: no GPU: compute-sanitizer memcheck and NVTX-named leak reports not checked"; exit 77
fi
if [ -z "$CS" ]; then
  echo "SKIP test_cuda_memcheck: no compute-sanitizer: memcheck and NVTX-named leak reports not checked"; exit 77
fi
[ -x "$B/tests/test_cuda_gpu" ] || { echo "FAIL: $B/tests/test_cuda_gpu is missing (make builds it)"; exit 1; }
gpu_lock test_cuda_memcheck
out=$("$CS" --tool memcheck --leak-check full --nvtx yes --error-exitcode 9 "$B/tests/test_cuda_gpu" clean 2>&1); rc=$?
printf '%s\n' "$out" | tail -n 5
verdict=$(printf '%s\n' "$out" | sanitizer_verdict memcheck "$rc") ||
  { printf '%s\n' "$out" | tail -n 40; echo "FAIL: memcheck of test_cuda_gpu clean: $verdict"; exit 1; }
out=$("$CS" --tool memcheck --leak-check full --nvtx yes "$B/tests/test_cuda_gpu" leak 2>&1)
nvtx=$(printf '%s\n' "$out" | grep -m1 -E 'Call to nvtx[A-Za-z0-9_]* failed')
[ -z "$nvtx" ] || { printf '%s\n' "$out" | tail -n 30; echo "FAIL: the leak run: the tool refused an NVTX call: $nvtx"; exit 1; }
leak=$(printf '%s\n' "$out" | grep -m1 -E "Leaked 1,?048,?576 bytes at 0x[0-9a-fA-F]+")
[ -n "$leak" ] || { printf '%s\n' "$out" | tail -n 30; echo "FAIL: the deliberate 1 MiB leak was not reported"; exit 1; }
printf '%s\n' "$leak" | grep -q "called params/leaked_on_purpose" ||
  { printf '%s\n' "$out" | tail -n 30; echo "FAIL: the leak report does not name the buffer by its tag: $leak"; exit 1; }
echo "memcheck clean ($verdict); the deliberate leak is reported as: ${leak#========= }"
