/* init.cu — init_normal on the GPU: x[i] = (float)(std · z(seed, stream, i)), value for value the
   CPU's (kernels/cpu/init.c), through the very inline function the CPU's stream is defined by
   (kernels/noise.h's noise_normal4: Philox4x32-10, Box-Muller in double). One thread per Philox block
   of 4 values, grid-stride. The weights are drawn where they live: no host staging, no upload.
   CUDA's double log/sin/cos may differ from the CPU's by an ulp; after rounding to float the values
   agree except in rare ties (tests/test_cuda_kernels.cu counts them). */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "noise.h"

__global__ void init_normal_kernel(float *x, size_t n, double std, uint64_t seed, uint64_t stream, uint64_t nblocks) {
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < nblocks; j += (uint64_t)gridDim.x * blockDim.x) {
        double z[4];
        noise_normal4(seed, stream, j, z);
        for (int k = 0; k < 4; k++)
            if (4 * j + (uint64_t)k < n) x[4 * j + k] = (float)(std * z[k]);
    }
}

void init_normal_cuda(KBackend *b, float *x, size_t n, double std, uint64_t seed, uint64_t stream) {
    (void)b;
    if (n == 0) return;
    const uint64_t nblocks = ((uint64_t)n + 3) / 4;
    init_normal_kernel<<<kcuda_blocks(nblocks, 256), 256>>>(x, n, std, seed, stream, nblocks);
    cudaLaunchCheck();
}
