/* init.c — init_normal on the CPU: x[i] = (float)(std · z(seed, stream, i)) with kernels/cpu/noise.c's
   vector path (noise_normal_batch: the bits of noise_normal4, 64 Philox blocks at a time).
   Chunks of 16384 values (whole Philox blocks) go to the backend's threads; each value depends only
   on its index, so the thread count changes no bit (tests/test_kernels_cpu.c checks 1 vs 2 threads
   and every value against noise_normal). A 1B model's 1.2·10⁹ values: about 2.5 ns each per thread. */
#include "kernels_cpu.h"
#include "noise.h"

#ifdef _OPENMP
#define INIT_SIMD _Pragma("omp simd")
#else
#define INIT_SIMD
#endif

/* x[0 .. len) = values first .. first + len of the stream; first a multiple of 4 (a block boundary). */
static void init_range(float *x, size_t len, double std, uint64_t seed, uint64_t stream, uint64_t first) {
    double z[4][NOISE_BATCH];
    for (size_t i = 0; i < len; i += 4 * NOISE_BATCH) {
        noise_normal_batch(seed, stream, (first + i) / 4, z);
        float *xb = x + i;
        const size_t take = len - i < 4 * NOISE_BATCH ? len - i : 4 * NOISE_BATCH;
        if (take == 4 * NOISE_BATCH) {
            INIT_SIMD
            for (int j = 0; j < NOISE_BATCH; j++) {   /* the four lanes interleaved: coordinate 4j + k is lane k */
                xb[4 * j + 0] = (float)(std * z[0][j]);
                xb[4 * j + 1] = (float)(std * z[1][j]);
                xb[4 * j + 2] = (float)(std * z[2][j]);
                xb[4 * j + 3] = (float)(std * z[3][j]);
            }
        } else
            for (size_t t = 0; t < take; t++) xb[t] = (float)(std * z[t % 4][t / 4]);
    }
}

void init_normal_cpu(KBackend *b, float *x, size_t n, double std, uint64_t seed, uint64_t stream) {
    const size_t chunk = 16384;
    const long long nchunks = (long long)((n + chunk - 1) / chunk);
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(nchunks > 1)
    for (long long k = 0; k < nchunks; k++) {
        const size_t start = (size_t)k * chunk, len = n - start < chunk ? n - start : chunk;
        init_range(x + start, len, std, seed, stream, start);
    }
}
