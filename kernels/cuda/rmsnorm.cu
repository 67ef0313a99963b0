/* rmsnorm.cu — RMSNorm (LlamaRMSNorm) forward and backward on the GPU, one block per row, sums of
   squares and dot products in double as the CPU does. The weight gradient is deterministic:
   KCUDA_RMSNORM_PARTS groups of rows (row n in group n mod P) each write a partial row into the
   scratch, then one thread per column adds the partials in group order into dw.
   Not here: mean-subtracting LayerNorm, fusing with the residual add. */
#include "cuda_common.cuh"
#include "ops_cuda.h"

#define RMS_THREADS 256

__global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp, const float *w, int C, float eps) {
    __shared__ double sh[32];
    const float *x = inp + (size_t)blockIdx.x * C;
    float *o = out + (size_t)blockIdx.x * C;
    double ss = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (double)x[c] * x[c];
    ss = kcuda_block_sum_d(ss, sh);
    float r = (float)(1.0 / sqrt(ss / C + eps));
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = x[c] * r * w[c];
}

/* dx = r * (w*dy - xhat * mean(w*dy*xhat)), xhat = x*r; accumulated into dinp as the CPU does. */
__global__ void rmsnorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *w,
                                             const float *rstd, int C) {
    __shared__ double sh[32];
    size_t row = (size_t)blockIdx.x * C;
    const float *x = inp + row, *dy = dout + row;
    float *dx = dinp + row;
    float r = rstd[blockIdx.x];
    double dot = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)w[c] * dy[c] * x[c] * r;
    dot = kcuda_block_sum_d(dot, sh);
    float m = (float)(dot / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) dx[c] += r * (w[c] * dy[c] - x[c] * r * m);
}

__global__ void rmsnorm_dw_partial_kernel(float *part, const float *dout, const float *inp, const float *rstd,
                                          int N, int C, int P) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    if (c >= C) return;
    float acc = 0.0f;
    for (int n = p; n < N; n += P) acc += dout[(size_t)n * C + c] * inp[(size_t)n * C + c] * rstd[n];
    part[(size_t)p * C + c] = acc;
}
__global__ void rmsnorm_dw_final_kernel(float *dw, const float *part, int C, int P) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int p = 0; p < P; p++) acc += part[(size_t)p * C + c];
    dw[c] += acc;
}

void rmsnorm_forward_cuda(KBackend *b, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    (void)b;
    if (N <= 0) return;
    rmsnorm_forward_kernel<<<N, RMS_THREADS>>>(out, rstd, inp, w, C, eps);
    cudaLaunchCheck();
}

void rmsnorm_backward_cuda(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                           const float *w, const float *rstd, int N, int C, void *scratch) {
    (void)b;
    if (N <= 0) return;
    if (dinp) {                                  /* NULL: the weight's gradient alone */
        rmsnorm_backward_dinp_kernel<<<N, RMS_THREADS>>>(dinp, dout, inp, w, rstd, C);
        cudaLaunchCheck();
    }
    if (!dw) return;
    int P = N < KCUDA_RMSNORM_PARTS ? N : KCUDA_RMSNORM_PARTS;  /* as kcuda_scratch_bytes */
    float *part = (float *)scratch;
    rmsnorm_dw_partial_kernel<<<dim3((C + 127) / 128, P), 128>>>(part, dout, inp, rstd, N, C, P);
    cudaLaunchCheck();
    rmsnorm_dw_final_kernel<<<(C + 127) / 128, 128>>>(dw, part, C, P);
    cudaLaunchCheck();
}
