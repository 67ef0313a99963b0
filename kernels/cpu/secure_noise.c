/* secure_noise.c — the secure stream of kernels/secure_noise.h on the CPU (--secure-noise).

   ChaCha20 on SECURE_NOISE_BATCH blocks at once, one block per vector lane (32-bit adds, xors and
   rotations), then the sampler (noise.h's polynomial ln, sin, cos: no branch) on the 96 values, then
   the grid's rounding. The values are secure_noise_z's bit for bit and a range that starts or ends
   inside a block takes its values from the same batch, so the split of the flat vector into tensors,
   or of the work into threads, never changes one (tests/test_secure_noise.c).
   Not here: the GPU (kernels/cuda/secure_noise.cu), Poisson's draws (secure_noise_poisson_take, inline). */
#include "secure_noise.h"
#include "vmath.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#ifdef _OPENMP
#define SECURE_SIMD _Pragma("omp simd")
#else
#define SECURE_SIMD
#endif

/* One quarter round of RFC 8439 on every lane: each statement a loop over the lanes (vector code). */
#define QR_LANES(x, a, b, c, d)                                                                               \
    SECURE_SIMD for (int l = 0; l < SECURE_NOISE_BATCH; l++) {                                                \
        x[a][l] += x[b][l]; x[d][l] ^= x[a][l]; x[d][l] = CHACHA20_ROTL(x[d][l], 16);                         \
        x[c][l] += x[d][l]; x[b][l] ^= x[c][l]; x[b][l] = CHACHA20_ROTL(x[b][l], 12);                         \
        x[a][l] += x[b][l]; x[d][l] ^= x[a][l]; x[d][l] = CHACHA20_ROTL(x[d][l], 8);                          \
        x[c][l] += x[d][l]; x[b][l] ^= x[c][l]; x[b][l] = CHACHA20_ROTL(x[b][l], 7);                          \
    }

/* The ChaCha20 words of blocks j0 .. j0 + SECURE_NOISE_BATCH - 1 of the DP stream, one lane each: the
   block function of chacha20.h (tests/test_secure_noise.c checks the lanes against it). */
KCPU_INLINE void chacha_batch(const SecureKey *key, uint64_t step, uint64_t j0, uint32_t x[16][SECURE_NOISE_BATCH]) {
    uint32_t in[16][SECURE_NOISE_BATCH];
    for (int l = 0; l < SECURE_NOISE_BATCH; l++) {
        const uint64_t j = j0 + (uint64_t)l;
        const uint32_t init[16] = { 0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u, key->k[0], key->k[1], key->k[2], key->k[3],
                                    key->k[4], key->k[5], key->k[6], key->k[7], (uint32_t)j, (uint32_t)(j >> 32), (uint32_t)step,
                                    SECURE_NOISE_DOMAIN_DP ^ (uint32_t)(step >> 32) };
        for (int t = 0; t < 16; t++) in[t][l] = x[t][l] = init[t];
    }
    for (int r = 0; r < 10; r++) {
        QR_LANES(x, 0, 4, 8, 12) QR_LANES(x, 1, 5, 9, 13) QR_LANES(x, 2, 6, 10, 14) QR_LANES(x, 3, 7, 11, 15)
        QR_LANES(x, 0, 5, 10, 15) QR_LANES(x, 1, 6, 11, 12) QR_LANES(x, 2, 7, 8, 13) QR_LANES(x, 3, 4, 9, 14)
    }
    for (int t = 0; t < 16; t++) {
        SECURE_SIMD for (int l = 0; l < SECURE_NOISE_BATCH; l++) x[t][l] += in[t][l];
    }
}

KCPU_CLONES
void secure_noise_batch(const SecureKey *key, uint64_t step, uint64_t j0, double z[SECURE_NOISE_PER_BLOCK][SECURE_NOISE_BATCH]) {
    uint32_t w[16][SECURE_NOISE_BATCH];
    chacha_batch(key, step, j0, w);
    for (int p = 0; p < 3; p++) {
        SECURE_SIMD
        for (int i = 0; i < SECURE_NOISE_BATCH; i++)
            secure_noise_box_muller(w[5 * p][i], w[5 * p + 1][i], w[5 * p + 2][i], w[5 * p + 3][i], w[5 * p + 4][i],
                                    &z[2 * p][i], &z[2 * p + 1][i]);
    }
}

/* g[i] = secure_noise_apply(g[i], z(offset + i)) over one range: whole batches in one loop over the
   blocks (the six values of a block written out), the range's ragged ends value by value. */
KCPU_CLONES
static void privatize_range(float *g, size_t n, SecureGrid gr, float inv, const SecureKey *key, uint64_t step, uint64_t offset) {
    const uint64_t per = (uint64_t)SECURE_NOISE_PER_BLOCK * SECURE_NOISE_BATCH;
    double z[SECURE_NOISE_PER_BLOCK][SECURE_NOISE_BATCH];
    size_t i = 0;
    while (i < n) {
        const uint64_t idx = offset + i, first = idx % per;         /* the batch's first coordinate is idx - first */
        const size_t take = n - i < per - first ? n - i : (size_t)(per - first);
        secure_noise_batch(key, step, (idx - first) / SECURE_NOISE_PER_BLOCK, z);
        if (take == per) {
            /* the values in coordinate order (block b's six at 6b), then one contiguous loop */
            double zf[SECURE_NOISE_PER_BLOCK * SECURE_NOISE_BATCH];
            for (int c = 0; c < SECURE_NOISE_PER_BLOCK; c++)
                for (int b = 0; b < SECURE_NOISE_BATCH; b++) zf[SECURE_NOISE_PER_BLOCK * b + c] = z[c][b];
            float *gb = g + i;
            SECURE_SIMD
            for (int t = 0; t < SECURE_NOISE_PER_BLOCK * SECURE_NOISE_BATCH; t++) gb[t] = secure_noise_apply(gb[t], zf[t], gr, inv);
        } else
            for (size_t t = 0; t < take; t++) {
                const uint64_t c = first + t;                         /* block c / 6 of the batch, value c % 6 */
                g[i + t] = secure_noise_apply(g[i + t], z[c % SECURE_NOISE_PER_BLOCK][c / SECURE_NOISE_PER_BLOCK], gr, inv);
            }
        i += take;
    }
}

void secure_noise_privatize(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                            const SecureKey *key, uint64_t step, uint64_t offset) {
    const float inv = (float)(1.0 / logical_batch);
    if (!(sigma > 0)) {
        for (size_t i = 0; i < n; i++) g[i] *= inv;
        return;
    }
    const SecureGrid gr = secure_noise_grid(sigma * max_grad_norm);
    const size_t chunk = 16128;   /* a multiple of a batch (96): chunks start on batch boundaries of an aligned range */
    const long long nchunks = (long long)((n + chunk - 1) / chunk);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nchunks > 1)
#endif
    for (long long k = 0; k < nchunks; k++) {
        const size_t start = (size_t)k * chunk, len = n - start < chunk ? n - start : chunk;
        privatize_range(g + start, len, gr, inv, key, step, offset + start);
    }
}

int secure_noise_key_random(SecureKey *key) {
    unsigned char *p = (unsigned char *)key->k;
    size_t got = 0;
    while (got < sizeof key->k) {
        ssize_t r = getrandom(p + got, sizeof key->k - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "secure noise: getrandom() failed (%s): cannot make a key\n", strerror(errno));
            memset(key, 0, sizeof *key);
            return 0;
        }
        got += (size_t)r;
    }
    return 1;
}

void secure_noise_key_from_seed(SecureKey *key, uint64_t seed) {
    memset(key, 0, sizeof *key);
    key->k[0] = (uint32_t)seed;
    key->k[1] = (uint32_t)(seed >> 32);
}
