/* dp_update.cu — the DP step's update in one pass on the GPU (kernels/cpu/dp_update.c's twin): each
   thread takes one Philox block of the DP noise (2 coordinates), draws its z(seed, step, ·) with
   noise.h's own noise_dp_normal2, as noise.cu does (the generator is not repeated here), privatizes the summed clipped gradient as
   noise_privatize_cuda does — (g + (float)(σC·z)) then · (float)(1/L), two roundings, never fused — and
   runs adamw_element.h's AdamW on it: the bits of noise_privatize_cuda followed by adamw_cuda, 28 bytes
   a parameter instead of their 44 (noise 8, scale 8, AdamW 28) and one launch instead of three. keep_noised: g also receives the
   noised gradient, as the separate path leaves it.
   Not here: SGD, several tensors in one launch. */
#include "cuda_common.cuh"
#include "kernels_cuda.h"
#include "noise.h"
#include "adamw_element.h"

__global__ void noisy_adamw_kernel(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, int add_noise,
                                   double std, float inv, uint64_t seed, uint64_t step, float lr, float beta1, float beta2, float eps,
                                   float weight_decay, float bc1, float bc2, int keep_noised, uint64_t j_first,
                                   uint64_t nblocks) {
    for (uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; q < nblocks; q += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t j = j_first + q;
        double z[2] = { 0, 0 };
        if (add_noise) noise_dp_normal2(seed, step, j, z);
        for (int k = 0; k < 2; k++) {
            const uint64_t idx = 2 * j + (uint64_t)k;
            if (idx < offset || idx >= offset + n) continue;
            const size_t i = (size_t)(idx - offset);
            float gi = g[i];
            if (add_noise) gi = __fadd_rn(gi, (float)(std * z[k]));   /* σ = 0: no add (-0 + 0 would be +0) */
            gi = __fmul_rn(gi, inv);
            if (keep_noised) g[i] = gi;
            float pi = p[i], mi = m[i], vi = v[i];
            adamw_element(&pi, &mi, &vi, gi, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
            p[i] = pi; m[i] = mi; v[i] = vi;
        }
    }
}

void dp_noisy_adamw_cuda(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, const DpNoise *noise,
                         const DpAdamW *opt, int keep_noised) {
    if (n == 0) return;
    const int add_noise = noise->sigma > 0;   /* noise_privatize_cuda's condition */
    const double std = noise->sigma * noise->max_grad_norm;
    const float inv = (float)(1.0 / noise->logical_batch);
    const float bc1 = 1.0f - powf(opt->beta1, (float)opt->t), bc2 = 1.0f - powf(opt->beta2, (float)opt->t);
    const uint64_t j_first = offset / 2, nblocks = (offset + n - 1) / 2 - j_first + 1;
    noisy_adamw_kernel<<<kcuda_blocks(nblocks, 256), 256>>>(p, g, m, v, n, offset, add_noise, std, inv, noise->seed, noise->step,
                                                            opt->lr, opt->beta1, opt->beta2, opt->eps, opt->weight_decay,
                                                            bc1, bc2, keep_noised, j_first, nblocks);
    cudaLaunchCheck();
}
