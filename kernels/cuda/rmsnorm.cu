/* rmsnorm.cu — RMSNorm (LlamaRMSNorm) forward and backward on the GPU, one block per row, sums of
   squares and dot products in double as the CPU does. The weight gradient is deterministic:
   KCUDA_RMSNORM_PARTS groups of rows (row n in group n mod P) each write a partial row into the
   scratch, then one thread per column adds the partials in group order into dw.
   Activations are fp32 or bf16 (E: storage.cuh); rstd, w and dw are fp32.
   Not here: mean-subtracting LayerNorm, fusing with the residual add. */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "storage.cuh"

#define RMS_THREADS 256

template <typename E>
__global__ void rmsnorm_forward_kernel(E *out, float *rstd, const E *inp, const float *w, int C, float eps) {
    __shared__ double sh[32];
    const E *x = inp + (size_t)blockIdx.x * C;
    E *o = out + (size_t)blockIdx.x * C;
    double ss = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) { double xc = ld(x, c); ss += xc * xc; }
    ss = kcuda_block_sum_d(ss, sh);
    float r = (float)(1.0 / sqrt(ss / C + eps));
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (int c = threadIdx.x; c < C; c += blockDim.x) st(o, c, ld(x, c) * r * w[c]);
}

/* dx = r * (w*dy - xhat * mean(w*dy*xhat)), xhat = x*r; accumulated into dinp as the CPU does. */
template <typename E>
__global__ void rmsnorm_backward_dinp_kernel(E *dinp, const E *dout, const E *inp, const float *w,
                                             const float *rstd, int C) {
    __shared__ double sh[32];
    size_t row = (size_t)blockIdx.x * C;
    const E *x = inp + row, *dy = dout + row;
    E *dx = dinp + row;
    float r = rstd[blockIdx.x];
    double dot = 0.0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)w[c] * ld(dy, c) * ld(x, c) * r;
    dot = kcuda_block_sum_d(dot, sh);
    float m = (float)(dot / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) st(dx, c, ld(dx, c) + r * (w[c] * ld(dy, c) - ld(x, c) * r * m));
}

template <typename E>
__global__ void rmsnorm_dw_partial_kernel(float *part, const E *dout, const E *inp, const float *rstd,
                                          int N, int C, int P) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    if (c >= C) return;
    float acc = 0.0f;
    for (int n = p; n < N; n += P) acc += ld(dout, (size_t)n * C + c) * ld(inp, (size_t)n * C + c) * rstd[n];
    part[(size_t)p * C + c] = acc;
}
__global__ void rmsnorm_dw_final_kernel(float *dw, const float *part, int C, int P) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int p = 0; p < P; p++) acc += part[(size_t)p * C + c];
    dw[c] += acc;
}

template <typename E>
static void forward(E *out, float *rstd, const E *inp, const float *w, int N, int C, float eps) {
    if (N <= 0) return;
    rmsnorm_forward_kernel<<<N, RMS_THREADS>>>(out, rstd, inp, w, C, eps);
    cudaLaunchCheck();
}

template <typename E>
static void backward(E *dinp, float *dw, const E *dout, const E *inp, const float *w, const float *rstd, int N, int C,
                     void *scratch) {
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

void rmsnorm_forward_cuda(KBackend *b, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    (void)b; forward(out, rstd, inp, w, N, C, eps);
}
void rmsnorm_backward_cuda(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                           const float *w, const float *rstd, int N, int C, void *scratch) {
    (void)b; backward(dinp, dw, dout, inp, w, rstd, N, C, scratch);
}
void rmsnorm_forward_bf16_cuda(KBackend *b, void *out, float *rstd, const void *inp, const float *w, int N, int C, float eps) {
    (void)b; forward((uint16_t *)out, rstd, (const uint16_t *)inp, w, N, C, eps);
}
void rmsnorm_backward_bf16_cuda(KBackend *b, void *dinp, float *dw, const void *dout, const void *inp,
                                const float *w, const float *rstd, int N, int C, void *scratch) {
    (void)b;
    backward((uint16_t *)dinp, dw, (const uint16_t *)dout, (const uint16_t *)inp, w, rstd, N, C, scratch);
}
