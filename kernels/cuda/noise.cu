/* noise.cu — DP-SGD's Gaussian noise on the GPU, value for value the stream of kernels/noise.h:
   coordinate i of a tensor at flat offset `offset` gets z(seed, step, offset + i), computed by the
   very inline functions the CPU calls (noise_dp_normal2: Philox4x32-10 from Random123, Box-Muller in
   double on a 64-bit uniform). One thread per Philox block of 2 coordinates; a tensor that starts or ends inside a block
   takes only its own lanes, so splitting the flat vector never changes a value.
   CUDA's double log/sqrt/sin/cos may differ from glibc's by an ulp; after rounding to float the values
   agree except in rare ties (the test counts them). Not here: the seed (noise_secure_seed, host). */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "noise.h"

__global__ void noise_add_kernel(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset,
                                 uint64_t j_first, uint64_t nblocks) {
    for (uint64_t q = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; q < nblocks; q += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t j = j_first + q;
        double z[2];
        noise_dp_normal2(seed, step, j, z);
        for (int k = 0; k < 2; k++) {
            uint64_t idx = 2 * j + (uint64_t)k;
            if (idx >= offset && idx < offset + n) x[idx - offset] += (float)(std * z[k]);
        }
    }
}

void noise_add_gaussian_cuda(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset) {
    if (n == 0) return;
    uint64_t j_first = offset / 2, j_last = (offset + n - 1) / 2, nblocks = j_last - j_first + 1;
    noise_add_kernel<<<kcuda_blocks(nblocks, 256), 256>>>(x, n, std, seed, step, offset, j_first, nblocks);
    cudaLaunchCheck();
}

void noise_privatize_cuda(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                          uint64_t seed, uint64_t step, uint64_t offset) {
    if (n == 0) return;
    if (sigma > 0) noise_add_gaussian_cuda(g, n, sigma * max_grad_norm, seed, step, offset);
    scale_cuda(NULL, g, (float)(1.0 / logical_batch), n);
}
