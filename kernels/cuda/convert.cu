/* convert.cu — bf16 <-> fp32 on the GPU (kernels.h's mixed precision), the same rounding as the CPU
   (kbf16_from_f32: round to nearest even, NaN kept quiet), narrowing in place, byte copies and
   zero fills for buffers of either element type. bf16 is stored as uint16_t.
   Not here: the bf16 GEMM (backend_cuda.cu, cuBLAS GemmEx). */
#include "cuda_common.cuh"
#include "ops_cuda.h"

#define CV_THREADS 256

__global__ void widen_kernel(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = kbf16_to_f32(src[i]);
}
__global__ void narrow_kernel(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = kbf16_from_f32(src[i]);
}
/* One round of the in-place narrowing: elements [lo, hi) with hi <= 2 lo read floats [lo, hi) and
   write halves into floats [lo/2, lo), which earlier rounds have read (see kernels/cpu/convert.c). */
__global__ void narrow_round_kernel(char *p, size_t lo, size_t hi) {
    for (size_t i = lo + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < hi; i += (size_t)gridDim.x * blockDim.x) {
        float v;
        memcpy(&v, p + 4 * i, sizeof v);
        uint16_t h = kbf16_from_f32(v);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}
/* The head [0, head) in order, by one thread. */
__global__ void narrow_head_kernel(char *p, size_t head) {
    for (size_t i = 0; i < head; i++) {
        float v;
        memcpy(&v, p + 4 * i, sizeof v);
        uint16_t h = kbf16_from_f32(v);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}

void widen_cuda(KBackend *b, float *dst, const void *src, size_t n) {
    (void)b;
    widen_kernel<<<kcuda_blocks(n, CV_THREADS), CV_THREADS>>>(dst, (const uint16_t *)src, n);
    cudaLaunchCheck();
}
void narrow_cuda(KBackend *b, void *dst, const float *src, size_t n) {
    (void)b;
    narrow_kernel<<<kcuda_blocks(n, CV_THREADS), CV_THREADS>>>((uint16_t *)dst, src, n);
    cudaLaunchCheck();
}
void narrow_inplace_cuda(KBackend *b, void *x, size_t n) {
    (void)b;
    char *p = (char *)x;
    size_t head = n < 64 ? n : 64;
    narrow_head_kernel<<<1, 1>>>(p, head);
    cudaLaunchCheck();
    for (size_t lo = head; lo < n; lo *= 2) {   /* the default stream orders the rounds */
        size_t hi = 2 * lo < n ? 2 * lo : n;
        narrow_round_kernel<<<kcuda_blocks(hi - lo, CV_THREADS), CV_THREADS>>>(p, lo, hi);
        cudaLaunchCheck();
    }
}
void copy_bytes_cuda(KBackend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    if (dst != src) cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
void zero_bytes_cuda(KBackend *b, void *x, size_t bytes) {
    (void)b;
    cudaCheck(cudaMemsetAsync(x, 0, bytes));
}
