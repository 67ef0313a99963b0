/* adamw_element.h — one parameter's AdamW update (decoupled weight decay, bias-corrected: torch.optim.AdamW),
   the one definition that the optimizer (kernels/cpu/optimizer.c, kernels/cuda/optimizer.cu) and the DP
   step's fused noise + update (kernels/cpu/dp_update.c, kernels/cuda/dp_update.cu) both run, so that the
   fused path gives the separate path's bits. bc1, bc2: 1 − β₁ᵗ, 1 − β₂ᵗ (powf on the host, once a tensor).
   Plain C that nvcc compiles for the device too. Not here: the loops, the bias corrections. */
#ifndef KERNELS_ADAMW_ELEMENT_H
#define KERNELS_ADAMW_ELEMENT_H

#include <math.h>

#ifdef __CUDACC__
#define ADAMW_ELEMENT_FN static inline __host__ __device__
#elif defined(__GNUC__)
#define ADAMW_ELEMENT_FN static inline __attribute__((always_inline))   /* into the callers' vector loops */
#else
#define ADAMW_ELEMENT_FN static inline
#endif

ADAMW_ELEMENT_FN void adamw_element(float *p, float *m, float *v, float g, float lr, float beta1, float beta2,
                                    float eps, float weight_decay, float bc1, float bc2) {
    const float mi = beta1 * *m + (1.0f - beta1) * g;
    const float vi = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mi; *v = vi;
    const float mh = mi / bc1, vh = vi / bc2;
    *p -= lr * (mh / (sqrtf(vh) + eps) + weight_decay * *p);
}

#endif
