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

/* On the device every product and sum is rounded on its own (no FMA contraction, which nvcc applies
   by default and differently in each kernel the function is inlined into: the fused kernel's bits
   then differed from adamw_cuda's in up to 38 % of m's elements, seen on an H100 2026-11-27); the host
   compiles ISO C11, which does not contract. So the CPU, adamw_cuda and the fused step give one answer. */
#ifdef __CUDA_ARCH__
#define ADAMW_MUL(a, b) __fmul_rn((a), (b))
#define ADAMW_ADD(a, b) __fadd_rn((a), (b))
#else
#define ADAMW_MUL(a, b) ((a) * (b))
#define ADAMW_ADD(a, b) ((a) + (b))
#endif

ADAMW_ELEMENT_FN void adamw_element(float *p, float *m, float *v, float g, float lr, float beta1, float beta2,
                                    float eps, float weight_decay, float bc1, float bc2) {
    const float mi = ADAMW_ADD(ADAMW_MUL(beta1, *m), ADAMW_MUL(1.0f - beta1, g));
    const float vi = ADAMW_ADD(ADAMW_MUL(beta2, *v), ADAMW_MUL(ADAMW_MUL(1.0f - beta2, g), g));
    *m = mi; *v = vi;
    const float mh = mi / bc1, vh = vi / bc2;
    *p -= ADAMW_MUL(lr, ADAMW_ADD(mh / ADAMW_ADD(sqrtf(vh), eps), ADAMW_MUL(weight_decay, *p)));
}

#endif
