/* crossentropy.cu — softmax cross-entropy over the vocabulary on the GPU, one block per position.
   The forward writes each position's loss; the backward recomputes the row's max and sum and turns
   the logits into dlogits IN PLACE, scaled by `scale` and the row's sample weight (as the CPU: no
   second B×T×V buffer, no scratch). Sums of exponentials in double, as the CPU.
   Not here: a fused lm_head + loss that never materializes the logits (the model owns that choice). */
#include "cuda_common.cuh"
#include "ops_cuda.h"

#define CE_THREADS 512

/* The row's max and Σ exp(x - max), both to every thread. */
__device__ void ce_row_stats(const float *x, int V, float *mx, double *sum) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, x[i]);
    m = kcuda_block_max(m, shf);
    double s = 0.0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) s += exp((double)(x[i] - m));
    *sum = kcuda_block_sum_d(s, shd);
    *mx = m;
}

__global__ void crossentropy_forward_kernel(float *losses, const float *logits, const int *targets, int V) {
    const float *x = logits + (size_t)blockIdx.x * V;
    float m; double s;
    ce_row_stats(x, V, &m, &s);
    if (threadIdx.x == 0) losses[blockIdx.x] = (float)(log(s) + m - x[targets[blockIdx.x]]);
}

__global__ void crossentropy_backward_kernel(float *logits, const int *targets, float scale, const float *sample_weight,
                                             int T, int V) {
    float *x = logits + (size_t)blockIdx.x * V;
    float m; double s;
    ce_row_stats(x, V, &m, &s);
    float w = scale * (sample_weight ? sample_weight[blockIdx.x / T] : 1.0f);
    float inv = (float)(1.0 / s);
    __syncthreads();   /* every thread has read the row before any overwrites it */
    for (int i = threadIdx.x; i < V; i += blockDim.x) x[i] = expf(x[i] - m) * inv * w;
    __syncthreads();
    if (threadIdx.x == 0) x[targets[blockIdx.x]] -= w;
}

void crossentropy_forward_cuda(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V,
                               void *scratch) {
    (void)b; (void)scratch;
    if (N <= 0) return;
    crossentropy_forward_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V);
    cudaLaunchCheck();
}

void crossentropy_backward_cuda(KBackend *b, float *logits, const int *targets, float scale,
                                const float *sample_weight, int B, int T, int V, void *scratch) {
    (void)b; (void)scratch;
    if (B * T <= 0) return;
    crossentropy_backward_kernel<<<B * T, CE_THREADS>>>(logits, targets, scale, sample_weight, T, V);
    cudaLaunchCheck();
}
