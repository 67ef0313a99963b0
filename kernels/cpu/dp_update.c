/* dp_update.c — the DP step's update in one pass: noise (kernels/noise.h's noise_privatize) and AdamW
   (adamw_element.h) per block of the gradient while it is in cache. The separate path writes the noised
   gradient out and AdamW reads it back: 8 of its 36 bytes a parameter. Here each block of DP_UPDATE_BLOCK
   coordinates is copied to a buffer on the stack, privatized there by noise_privatize itself (the
   generator is not repeated here: whatever z(seed, step, i) it draws, the fused path draws too), and
   fed to the same AdamW formula: the same bits as the two passes (tests/test_dp_update.c).
   Not here: SGD (the DP trainers' fused path is AdamW's; SGD keeps the two passes), the GPU
   (kernels/cuda/dp_update.cu). */
#include "dp_kernels.h"
#include "noise.h"
#include "adamw_element.h"
#include "vmath.h"   /* KCPU_CLONES: AdamW's loop in AVX-512 / AVX2 lanes, as adamw_cpu's (the same IEEE operations: the same bits) */

#include <string.h>

/* a multiple of noise.c's batches (2 or 4 coordinates a Philox block, NOISE_BATCH blocks): a block never
   splits a batch it could fill */
enum { DP_UPDATE_BLOCK = 4096 };

KCPU_CLONES
void dp_noisy_adamw(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, const DpNoise *noise,
                    const DpAdamW *opt, int keep_noised, int nthreads) {
    const float bc1 = 1.0f - powf(opt->beta1, (float)opt->t), bc2 = 1.0f - powf(opt->beta2, (float)opt->t);
    const long long nblocks = (long long)((n + DP_UPDATE_BLOCK - 1) / DP_UPDATE_BLOCK);
    (void)nthreads;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nthreads > 0 ? nthreads : 1) schedule(static) if (nblocks > 1)
#endif
    for (long long k = 0; k < nblocks; k++) {
        const size_t start = (size_t)k * DP_UPDATE_BLOCK, len = n - start < DP_UPDATE_BLOCK ? n - start : DP_UPDATE_BLOCK;
        float gb[DP_UPDATE_BLOCK];
        memcpy(gb, g + start, len * sizeof *gb);
        noise_privatize(gb, len, noise->sigma, noise->max_grad_norm, noise->logical_batch, noise->seed, noise->step,
                        offset + start);
        float *pb = p + start, *mb = m + start, *vb = v + start;
#ifdef _OPENMP
#pragma omp simd
#endif
        for (size_t i = 0; i < len; i++)
            adamw_element(pb + i, mb + i, vb + i, gb[i], opt->lr, opt->beta1, opt->beta2, opt->eps, opt->weight_decay, bc1, bc2);
        if (keep_noised) memcpy(g + start, gb, len * sizeof *gb);
    }
}
