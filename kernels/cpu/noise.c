/* noise.c — adding DP-SGD's Gaussian noise to a gradient (see noise.h for the exact stream).

   Works on batches of NOISE_BATCH blocks (2 coordinates per Philox call; the initial weights' stream:
   4) in vector lanes: Philox's
   ten rounds on NOISE_BATCH counters at once (its 32×32→64-bit products are vector multiplies),
   then noise.h's Box-Muller, whose ln, sin and cos are branch-free polynomials, on all of them
   (one libm call per value made this half of vanilla's step at T=128). The values are those of
   noise_dp_normal2 (and noise_normal4), bit for bit (the same operations; tests/test_noise.c checks it), and a tensor that
   starts or ends in the middle of a block takes its lanes from the same batch computation, so that
   splitting the flat parameter vector into tensors (or the work into threads) never changes a value.
   Not here: the GPU kernel (kernels/cuda does it with noise_dp_normal2 itself). */
#include "noise.h"
#include "vmath.h"

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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define NOISE_PHILOX_AVX512 1
/* The same rounds with AVX-512 intrinsics, 16 counters per register: the products of the even and odd
   32-bit lanes (vpmuludq) are blended back into the high and low words in place, where GCC's
   vectorization of the portable loop widens every word to 64 bits and back (1.6 ns per value, half
   of the noise's time). Integer arithmetic: the same words. */
__attribute__((target("avx512f"))) static void philox_batch_avx512(uint64_t seed, uint64_t step, uint64_t j0,
                                                                    uint32_t r[4][NOISE_BATCH]) {
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __mmask16 odd = 0xAAAA;
    for (int i = 0; i < NOISE_BATCH; i += 16) {
        const uint64_t j = j0 + (uint64_t)i;   /* j .. j + 15: the high word steps where the low one wraps */
        const __m512i lo = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)j), lane);
        const __mmask16 carry = _mm512_cmplt_epu32_mask(lo, _mm512_set1_epi32((int)(uint32_t)j));
        __m512i c0 = lo, c1 = _mm512_mask_add_epi32(_mm512_set1_epi32((int)(uint32_t)(j >> 32)), carry,
                                                    _mm512_set1_epi32((int)(uint32_t)(j >> 32)), _mm512_set1_epi32(1));
        __m512i c2 = _mm512_set1_epi32((int)(uint32_t)step), c3 = _mm512_set1_epi32((int)(uint32_t)(step >> 32));
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int round = 0; round < 10; round++) {
            const __m512i p0e = _mm512_mul_epu32(c0, m0), p0o = _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), m0);
            const __m512i p1e = _mm512_mul_epu32(c2, m1), p1o = _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), m1);
            const __m512i lo0 = _mm512_mask_blend_epi32(odd, p0e, _mm512_slli_epi64(p0o, 32));
            const __m512i hi0 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(p0e, 32), p0o);
            const __m512i lo1 = _mm512_mask_blend_epi32(odd, p1e, _mm512_slli_epi64(p1o, 32));
            const __m512i hi1 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(p1e, 32), p1o);
            c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
            c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
            c1 = lo1;
            c3 = lo0;
            k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
        }
        _mm512_storeu_si512((void *)&r[0][i], c0);
        _mm512_storeu_si512((void *)&r[1][i], c1);
        _mm512_storeu_si512((void *)&r[2][i], c2);
        _mm512_storeu_si512((void *)&r[3][i], c3);
    }
}
#endif

/* z[lane][i] = noise_normal4(seed, step, j0 + i)[lane] for i < NOISE_BATCH (one array per lane:
   contiguous vector stores). */
/* Philox's four words for indices j0 .. j0 + NOISE_BATCH - 1, with AVX-512 where the CPU has it. */
static void philox_words(uint64_t seed, uint64_t step, uint64_t j0, uint32_t r[4][NOISE_BATCH]) {
#ifdef NOISE_PHILOX_AVX512
    if (__builtin_cpu_supports("avx512f")) { philox_batch_avx512(seed, step, j0, r); return; }
#endif
    philox_batch(seed, step, j0, r);
}

KCPU_CLONES
void noise_normal_batch(uint64_t seed, uint64_t step, uint64_t j0, double z[4][NOISE_BATCH]) {
    uint32_t r[4][NOISE_BATCH];
    philox_words(seed, step, j0, r);
    NOISE_SIMD
    for (int i = 0; i < NOISE_BATCH; i++) {
        noise_box_muller(r[0][i], r[1][i], &z[0][i], &z[1][i]);
        noise_box_muller(r[2][i], r[3][i], &z[2][i], &z[3][i]);
    }
}

/* z[lane][i] = noise_dp_normal2(seed, step, j0 + i)[lane] for i < NOISE_BATCH: Philox's words 0 and 1
   make u (64 bits), word 2 the angle (noise.h). */
KCPU_CLONES
void noise_dp_batch(uint64_t seed, uint64_t step, uint64_t j0, double z[2][NOISE_BATCH]) {
    uint32_t r[4][NOISE_BATCH];
    philox_words(seed, step, j0, r);
    NOISE_SIMD
    for (int i = 0; i < NOISE_BATCH; i++) noise_dp_box_muller(r[0][i], r[1][i], r[2][i], &z[0][i], &z[1][i]);
}

/* x[i] = (x[i] + (float)(std · noise_dp_z(offset + i))) · scale over one range (scale 1: the plain
   sum). A whole batch (the common case) is one loop in vector lanes that interleaves the two lanes'
   arrays (the element-by-element loop with its index arithmetic was 16 % of the noise's time). */
KCPU_CLONES
static void add_range(float *x, size_t n, double std, float scale, uint64_t seed, uint64_t step, uint64_t offset) {
    double z[2][NOISE_BATCH];
    size_t i = 0;
    while (i < n) {
        const uint64_t idx = offset + i;
        const size_t lane0 = (size_t)(idx % 2), take0 = 2 * NOISE_BATCH - lane0;
        const size_t take = n - i < take0 ? n - i : take0;
        noise_dp_batch(seed, step, idx / 2, z);
        if (take == 2 * NOISE_BATCH) {
            float *xb = x + i;
            NOISE_SIMD
            for (int j = 0; j < NOISE_BATCH; j++) {   /* the two lanes written out: one interleaving store group */
                xb[2 * j + 0] = (xb[2 * j + 0] + (float)(std * z[0][j])) * scale;
                xb[2 * j + 1] = (xb[2 * j + 1] + (float)(std * z[1][j])) * scale;
            }
        } else
            for (size_t t = 0; t < take; t++) {
                const size_t k = lane0 + t;
                x[i + t] = (x[i + t] + (float)(std * z[k % 2][k / 2])) * scale;
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
