/* optimizer.cu — AdamW (decoupled weight decay, bias-corrected, as torch.optim.AdamW) and SGD with
   L2 decay added to the gradient (as torch.optim.SGD), elementwise on the GPU with the CPU's exact
   formulas (bias corrections computed once on the host with powf, as the CPU does).
   Not here: fused multi-tensor updates, fp32 master weights for a bf16 model. */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "adamw_element.h"

__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float bc1, float bc2) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = p[i], mi = m[i], vi = v[i];
        adamw_element(&pi, &mi, &vi, g[i], lr, beta1, beta2, eps, weight_decay, bc1, bc2);
        p[i] = pi; m[i] = mi; v[i] = vi;
    }
}

__global__ void sgd_kernel(float *p, const float *g, size_t n, float lr, float weight_decay) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] -= lr * (g[i] + weight_decay * p[i]);
}

void adamw_cuda(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, int t) {
    (void)b;
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    adamw_kernel<<<kcuda_blocks(n, 256), 256>>>(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
    cudaLaunchCheck();
}

void sgd_cuda(KBackend *b, float *p, const float *g, size_t n, float lr, float weight_decay) {
    (void)b;
    sgd_kernel<<<kcuda_blocks(n, 256), 256>>>(p, g, n, lr, weight_decay);
    cudaLaunchCheck();
}
