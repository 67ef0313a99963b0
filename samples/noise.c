/* noise.c — adding DP-SGD's Gaussian noise to a gradient (see noise.h for the exact stream).

   Works on batches of NOISE_BATCH blocks (4 coordinates per Philox call) in vector lanes: Philox's
   ten rounds on NOISE_BATCH counters at once (its 32×32→64-bit products are vector multiplies),
   then noise.h's Box-Muller, whose ln, sin and cos are branch-free polynomials, on all of them
   (one libm call per value made this half of vanilla's step at T=128). The values are those of
   noise_normal4, bit for bit (the same operations; tests/test_noise.c checks it), and a tensor that
   starts or ends in the middle of a block takes its lanes from the same batch computation, so that
   splitting the flat parameter vector into tensors (or the work into threads) never changes a value.
   Not here: the GPU kernel (kernels/cuda does it with noise_normal4 itself). */
#include "noise.h"
#include "cpu/vmath.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

/* Loops in vector lanes where OpenMP's simd pragma is known (-fopenmp); the values are the same without. */
#ifdef _OPENMP
#define NOISE_SIMD _Pragma("omp simd")
#else
#define NOISE_SIMD
#endif

/* Philox4x32-10 (Random123's philox4x32: ten rounds, the key bumped between them) of the counters
   {j, step} for j = j0 .. j0 + NOISE_BATCH - 1, one lane each, the rounds in registers. */
KCPU_INLINE void philox_batch(uint64_t seed, uint64_t step, uint64_t j0, uint32_t r[4][NOISE_BATCH]) {
    NOISE_SIMD
    for (int i = 0; i < NOISE_BATCH; i++) {
        const uint64_t j = j0 + (uint64_t)i;
        uint32_t c0 = (uint32_t)j, c1 = (uint32_t)(j >> 32), c2 = (uint32_t)step, c3 = (uint32_t)(step >> 32);
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int round = 0; round < 10; round++) {
            const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
            const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
            c0 = n0; c1 = (uint32_t)p1; c2 = n2; c3 = (uint32_t)p0;
            k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
        }
        r[0][i] = c0; r[1][i] = c1; r[2][i] = c2; r[3][i] = c3;
    }
}

/* z[lane][i] = noise_normal4(seed, step, j0 + i)[lane] for i < NOISE_BATCH (one array per lane:
   contiguous vector stores). */
KCPU_CLONES
void noise_normal_batch(uint64_t seed, uint64_t step, uint64_t j0, double z[4][NOISE_BATCH]) {
    uint32_t r[4][NOISE_BATCH];
    philox_batch(seed, step, j0, r);
    NOISE_SIMD
    for (int i = 0; i < NOISE_BATCH; i++) {
        noise_box_muller(r[0][i], r[1][i], &z[0][i], &z[1][i]);
        noise_box_muller(r[2][i], r[3][i], &z[2][i], &z[3][i]);
    }
}

/* x[i] = (x[i] + (float)(std · z(offset + i))) · scale over one range (scale 1: the plain sum). A whole
   batch (the common case) is one loop in vector lanes that interleaves the four lanes' arrays (the
   element-by-element loop with its index arithmetic was 16 % of the noise's time). */
KCPU_CLONES
static void add_range(float *x, size_t n, double std, float scale, uint64_t seed, uint64_t step, uint64_t offset) {
    double z[4][NOISE_BATCH];
    size_t i = 0;
    while (i < n) {
        const uint64_t idx = offset + i;
        const size_t lane0 = (size_t)(idx % 4), take0 = 4 * NOISE_BATCH - lane0;
        const size_t take = n - i < take0 ? n - i : take0;
        noise_normal_batch(seed, step, idx / 4, z);
        if (take == 4 * NOISE_BATCH) {
            float *xb = x + i;
            NOISE_SIMD
            for (int j = 0; j < NOISE_BATCH; j++) {   /* the four lanes written out: one interleaving store group */
                xb[4 * j + 0] = (xb[4 * j + 0] + (float)(std * z[0][j])) * scale;
                xb[4 * j + 1] = (xb[4 * j + 1] + (float)(std * z[1][j])) * scale;
                xb[4 * j + 2] = (xb[4 * j + 2] + (float)(std * z[2][j])) * scale;
                xb[4 * j + 3] = (xb[4 * j + 3] + (float)(std * z[3][j])) * scale;
            }
        } else
            for (size_t t = 0; t < take; t++) {
                const size_t k = lane0 + t;
                x[i + t] = (x[i + t] + (float)(std * z[k % 4][k / 4])) * scale;
            }
        i += take;
    }
}

/* Chunks of 16384 coordinates on the OpenMP threads (when built with -fopenmp): each value depends
   only on its index, so the split changes nothing. */
static void add_chunks(float *x, size_t n, double std, float scale, uint64_t seed, uint64_t step, uint64_t offset) {
    const size_t chunk = 16384;
    const long long nchunks = (long long)((n + chunk - 1) / chunk);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nchunks > 1)
#endif
    for (long long k = 0; k < nchunks; k++) {
        size_t start = (size_t)k * chunk, len = n - start < chunk ? n - start : chunk;
        add_range(x + start, len, std, scale, seed, step, offset + start);
    }
}

void noise_add_gaussian(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset) {
    add_chunks(x, n, std, 1.0f, seed, step, offset);
}

/* One pass: the noise and the division by the logical batch, each element's two float operations
   in the order of the definition (add, then scale), so the bits are those of two passes. */
void noise_privatize(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                     uint64_t seed, uint64_t step, uint64_t offset) {
    const float inv = (float)(1.0 / logical_batch);
    if (sigma > 0) { add_chunks(g, n, sigma * max_grad_norm, inv, seed, step, offset); return; }
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) if (n >= 65536)
#endif
    for (size_t i = 0; i < n; i++) g[i] *= inv;
}

uint64_t noise_secure_seed(int *ok) {
    uint64_t seed = 0;
    unsigned char *p = (unsigned char *)&seed;
    size_t got = 0;
    while (got < sizeof seed) {
        ssize_t r = getrandom(p + got, sizeof seed - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "noise: getrandom() failed (%s): cannot make a secure seed\n", strerror(errno));
            if (ok) *ok = 0;
            return 0;
        }
        got += (size_t)r;
    }
    if (ok) *ok = 1;
    return seed;
}
