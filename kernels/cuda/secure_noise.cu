/* secure_noise.cu — the cryptographic noise (--secure-noise, kernels/secure_noise.h) on the GPU: the CPU's
   bits. One thread per ChaCha20 block (6 coordinates), computed by secure_noise.h's own inline functions
   (ChaCha20, the 128-bit uniform, noise.h's polynomial ln, sin and cos, the grid's rounding); built with
   -fmad=false (mk/cuda_backend.mk), so that no product and sum is fused into one rounding where the host
   rounds twice: every value is the CPU's, bit for bit (test_cuda_kernels' "secure" group).
   Also the fused update with this noise (the twin of dp_update.cu's Philox one, AdamW by adamw_element.h
   with its own rounded intrinsics): what bench_cuda_kernels times beside the Philox fused update.
   Not here: the key (secure_noise_key_random, host), Poisson's draws (host). */
#include "cuda_common.cuh"
#include "kernels_cuda.h"
#include "ops_cuda.h"
#include "secure_noise.h"
#include "adamw_element.h"

/* The SECURE_NOISE_PER_BLOCK standard normal values of block j: z(key, step, 6j + c) in z[c] (secure_noise_z's). */
__device__ __forceinline__ void block_z(const SecureKey *key, uint64_t step, uint64_t j, double z[SECURE_NOISE_PER_BLOCK]) {
    uint32_t w[16];
    secure_noise_block(key, SECURE_NOISE_DOMAIN_DP, step, j, w);
    for (int p = 0; p < SECURE_NOISE_PER_BLOCK / 2; p++) secure_noise_pair(w, p, &z[2 * p], &z[2 * p + 1]);
}

/* g[i] for the coordinates of block j that fall in [offset, offset + n): secure_noise_apply with z. */
__global__ void secure_privatize_kernel(float *g, size_t n, uint64_t offset, SecureKey key, SecureGrid gr, float inv,
                                        uint64_t step, uint64_t j_first, uint64_t nblocks) {
    for (uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; q < nblocks; q += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t j = j_first + q;
        double z[SECURE_NOISE_PER_BLOCK];
        block_z(&key, step, j, z);
        for (int c = 0; c < SECURE_NOISE_PER_BLOCK; c++) {
            const uint64_t idx = SECURE_NOISE_PER_BLOCK * j + (uint64_t)c;
            if (idx >= offset && idx < offset + n) g[idx - offset] = secure_noise_apply(g[idx - offset], z[c], gr, inv);
        }
    }
}

static SecureKey key_of(const uint32_t key[8]) {
    SecureKey k;
    for (int i = 0; i < 8; i++) k.k[i] = key[i];
    return k;
}

void secure_noise_privatize_cuda(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                                 const uint32_t key[8], uint64_t step, uint64_t offset) {
    if (n == 0) return;
    const float inv = (float)(1.0 / logical_batch);
    if (!(sigma > 0)) { scale_cuda(NULL, g, inv, n); return; }
    const uint64_t j_first = offset / SECURE_NOISE_PER_BLOCK, nblocks = (offset + n - 1) / SECURE_NOISE_PER_BLOCK - j_first + 1;
    secure_privatize_kernel<<<kcuda_blocks(nblocks, 128), 128>>>(g, n, offset, key_of(key), secure_noise_grid(sigma * max_grad_norm),
                                                                 inv, step, j_first, nblocks);
    cudaLaunchCheck();
}

/* The fused update with the secure noise: privatize as above, then adamw_element, per coordinate. */
__global__ void secure_noisy_adamw_kernel(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, SecureKey key,
                                          SecureGrid gr, float inv, uint64_t step, float lr, float beta1, float beta2, float eps,
                                          float weight_decay, float bc1, float bc2, uint64_t j_first, uint64_t nblocks) {
    for (uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; q < nblocks; q += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t j = j_first + q;
        double z[SECURE_NOISE_PER_BLOCK];
        block_z(&key, step, j, z);
        for (int c = 0; c < SECURE_NOISE_PER_BLOCK; c++) {
            const uint64_t idx = SECURE_NOISE_PER_BLOCK * j + (uint64_t)c;
            if (idx < offset || idx >= offset + n) continue;
            const size_t i = (size_t)(idx - offset);
            float pi = p[i], mi = m[i], vi = v[i];
            adamw_element(&pi, &mi, &vi, secure_noise_apply(g[i], z[c], gr, inv), lr, beta1, beta2, eps, weight_decay, bc1, bc2);
            p[i] = pi; m[i] = mi; v[i] = vi;
        }
    }
}

void secure_noisy_adamw_cuda(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, const DpNoise *noise,
                             const uint32_t key[8], const DpAdamW *opt) {
    if (n == 0) return;
    if (!(noise->sigma > 0)) { dp_noisy_adamw_cuda(p, g, m, v, n, offset, noise, opt, 0); return; }   /* no noise: no grid */
    const SecureGrid gr = secure_noise_grid(noise->sigma * noise->max_grad_norm);
    const float inv = (float)(1.0 / noise->logical_batch);
    const float bc1 = 1.0f - powf(opt->beta1, (float)opt->t), bc2 = 1.0f - powf(opt->beta2, (float)opt->t);
    const uint64_t j_first = offset / SECURE_NOISE_PER_BLOCK, nblocks = (offset + n - 1) / SECURE_NOISE_PER_BLOCK - j_first + 1;
    secure_noisy_adamw_kernel<<<kcuda_blocks(nblocks, 128), 128>>>(p, g, m, v, n, offset, key_of(key), gr, inv, noise->step,
                                                                   opt->lr, opt->beta1, opt->beta2, opt->eps, opt->weight_decay,
                                                                   bc1, bc2, j_first, nblocks);
    cudaLaunchCheck();
}
