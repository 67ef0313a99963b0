/* elementwise.cu — fills, copies, y += x, scaling, SwiGLU and the reductions (sum, sum of squares,
   count of NaN/Inf) on the GPU. Reductions accumulate in double: KCUDA_REDUCE_BLOCKS blocks each
   write one partial into the scratch, one block adds them in a fixed tree, the host reads the total;
   the same input gives the same bits every run (no atomics).
   Not here: fused optimizer updates (optimizer.cu). */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "storage.cuh"

#define EW_THREADS 256

__global__ void fill_kernel(float *x, float value, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = value;
}
__global__ void add_kernel(float *y, const float *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] += x[i];
}
__global__ void scale_kernel(float *x, float s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] *= s;
}

void fill_cuda(KBackend *b, float *x, float value, size_t n) {
    (void)b;
    if (value == 0.0f) { cudaCheck(cudaMemsetAsync(x, 0, n * sizeof *x)); return; }
    fill_kernel<<<kcuda_blocks(n, EW_THREADS), EW_THREADS>>>(x, value, n);
    cudaLaunchCheck();
}
void copy_cuda(KBackend *b, float *dst, const float *src, size_t n) {
    (void)b;
    if (dst != src) cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice));
}
void add_cuda(KBackend *b, float *y, const float *x, size_t n) {
    (void)b;
    add_kernel<<<kcuda_blocks(n, EW_THREADS), EW_THREADS>>>(y, x, n);
    cudaLaunchCheck();
}
void scale_cuda(KBackend *b, float *x, float s, size_t n) {
    (void)b;
    scale_kernel<<<kcuda_blocks(n, EW_THREADS), EW_THREADS>>>(x, s, n);
    cudaLaunchCheck();
}

/* kind 0: sum, 1: sum of squares, 2: count of non-finite values. */
template <int KIND>
__global__ void reduce_partials_kernel(const float *x, size_t n, double *part) {
    __shared__ double sh[32];
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double v = x[i];
        acc += KIND == 0 ? v : KIND == 1 ? v * v : (isfinite(x[i]) ? 0.0 : 1.0);
    }
    acc = kcuda_block_sum_d(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}
__global__ void reduce_final_kernel(double *part) {
    __shared__ double sh[32];
    double v = kcuda_block_sum_d(part[threadIdx.x], sh);   /* blockDim.x == KCUDA_REDUCE_BLOCKS */
    if (threadIdx.x == 0) part[KCUDA_REDUCE_BLOCKS] = v;
}

template <int KIND>
static double reduce(const float *x, size_t n, void *scratch) {
    double *part = (double *)scratch, total = 0.0;
    reduce_partials_kernel<KIND><<<KCUDA_REDUCE_BLOCKS, EW_THREADS>>>(x, n, part);
    cudaLaunchCheck();
    reduce_final_kernel<<<1, KCUDA_REDUCE_BLOCKS>>>(part);
    cudaLaunchCheck();
    cudaCheck(cudaMemcpy(&total, part + KCUDA_REDUCE_BLOCKS, sizeof total, cudaMemcpyDeviceToHost));
    return total;
}

double sum_cuda(KBackend *b, const float *x, size_t n, void *scratch) { (void)b; return reduce<0>(x, n, scratch); }
double sumsq_cuda(KBackend *b, const float *x, size_t n, void *scratch) { (void)b; return reduce<1>(x, n, scratch); }
size_t count_nonfinite_cuda(KBackend *b, const float *x, size_t n, void *scratch) {
    (void)b; return (size_t)reduce<2>(x, n, scratch);
}

/* SwiGLU on fp32 or bf16 storage (E: storage.cuh), fp32 arithmetic. */
template <typename E>
__global__ void swiglu_forward_kernel(E *h, const E *gate, const E *up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = ld(gate, i);
        st(h, i, g / (1.0f + expf(-g)) * ld(up, i));
    }
}
template <typename E>
__global__ void swiglu_backward_kernel(E *dgate, E *dup, const E *dh, const E *gate, const E *up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = ld(gate, i), sig = 1.0f / (1.0f + expf(-g)), silu = g * sig, d = ld(dh, i);
        float u = ld(up, i);   /* read before writing: dup may alias up (in-place backward) */
        st(dup, i, d * silu);
        st(dgate, i, d * u * sig * (1.0f + g * (1.0f - sig)));
    }
}

void swiglu_forward_cuda(KBackend *b, float *h, const float *gate, const float *up, size_t n) {
    (void)b;
    swiglu_forward_kernel<<<kcuda_blocks(n, EW_THREADS), EW_THREADS>>>(h, gate, up, n);
    cudaLaunchCheck();
}
void swiglu_backward_cuda(KBackend *b, float *dgate, float *dup, const float *dh, const float *gate,
                          const float *up, size_t n) {
    (void)b;
    swiglu_backward_kernel<<<kcuda_blocks(n, EW_THREADS), EW_THREADS>>>(dgate, dup, dh, gate, up, n);
    cudaLaunchCheck();
}
void swiglu_forward_bf16_cuda(KBackend *b, void *h, const void *gate, const void *up, size_t n) {
    (void)b;
    swiglu_forward_kernel<<<kcuda_blocks(n, EW_THREADS), EW_THREADS>>>((uint16_t *)h, (const uint16_t *)gate,
                                                                      (const uint16_t *)up, n);
    cudaLaunchCheck();
}
void swiglu_backward_bf16_cuda(KBackend *b, void *dgate, void *dup, const void *dh, const void *gate,
                               const void *up, size_t n) {
    (void)b;
    swiglu_backward_kernel<<<kcuda_blocks(n, EW_THREADS), EW_THREADS>>>((uint16_t *)dgate, (uint16_t *)dup,
                                                                       (const uint16_t *)dh, (const uint16_t *)gate,
                                                                       (const uint16_t *)up, n);
    cudaLaunchCheck();
}
