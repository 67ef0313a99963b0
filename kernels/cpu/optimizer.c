/* optimizer.c — AdamW (decoupled weight decay, bias-corrected, as torch.optim.AdamW) and SGD with
   L2 weight decay added to the gradient (as torch.optim.SGD), one tensor at a time. */
#include "kernels_cpu.h"
#include "vmath.h"
#include "adamw_element.h"
#include <math.h>

/* Vectorized (omp simd: the tensors never overlap): the same IEEE operations per element as one at a
   time, so the same bits; memory-bound (7 floats moved per parameter) once in vector lanes. */
KCPU_CLONES
void adamw_cpu(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
               float beta1, float beta2, float eps, float weight_decay, int t) {
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    #pragma omp parallel for simd num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) adamw_element(p + i, m + i, v + i, g[i], lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}

void sgd_cpu(KBackend *b, float *p, const float *g, size_t n, float lr, float weight_decay) {
    #pragma omp parallel for simd num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] + weight_decay * p[i]);
}
