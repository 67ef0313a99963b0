#!/bin/sh
# Under DPMEM_DISABLE, dpmem_cuda.h must leave only the bare CUDA allocation calls in the object:
# no dpmem_, nvtx, cudaEvent* or cudaMemGetInfo symbol. Then the program itself checks the calls work.
B=${DPMEM_BUILD:-build}
obj=$B/tests/test_cuda_disabled.o
[ -f "$obj" ] || { echo "FAIL: $obj missing (make builds it)"; exit 1; }
syms=$(nm -u "$obj") || { echo "FAIL: nm $obj"; exit 1; }
fail=0
for want in cudaMalloc cudaMallocAsync cudaMallocHost cudaMallocManaged cudaFree cudaFreeAsync cudaFreeHost; do
  printf '%s\n' "$syms" | grep -qw "$want" || { echo "FAIL: $want is not called under DPMEM_DISABLE"; fail=1; }
done
bad=$(nm "$obj" | grep -Ei 'dpmem|nvtx|cudaEvent|cudaMemGetInfo|pthread_create')
[ -z "$bad" ] || { echo "FAIL: symbols left under DPMEM_DISABLE:"; echo "$bad"; fail=1; }
[ $fail -eq 0 ] || exit 1
exec "$B/tests/test_cuda_disabled"
