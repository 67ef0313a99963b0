/* vmath.h — exp in fp32 that a compiler vectorizes: straight-line code with no calls and no
   branches, so a loop over it under `#pragma omp simd` runs 4 (SSE2), 8 or 16 lanes at a time
   where libm's expf is one call per element (the softmaxes of attention and the loss spent most of
   their time in it).

   kexpf(x): x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2 (Cody-Waite: ln2 in two parts, so
   r is exact to ~1e-10), e^r by Cephes expf's degree-7 polynomial (relative error ~1e-7, about one
   ulp; the kernels' tolerances are 2e-5), and 2^n built in two halves, each a normal float, so that
   results down to the subnormal range come out right. x > 88.72: +inf; x < -103.97 (below half the
   smallest subnormal): 0; -inf: 0; NaN: NaN, as expf. */
#ifndef KCPU_VMATH_H
#define KCPU_VMATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A hot loop's function compiled three times (AVX-512, AVX2, baseline x86-64), the best one for the
   CPU chosen when the program loads (GCC's target_clones, an ifunc). The arithmetic is the same
   IEEE operations in every version (C11 mode: no FMA contraction), so element-wise results are the
   same bits on every x86-64; a vectorized sum's order follows the vector width, so sums are the
   same bits on one machine, for any thread count. Elsewhere: one portable version. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 8
#define KCPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KCPU_CLONES
#endif

/* An OpenMP pragma where OpenMP is on (the DP kernels are also built without it: dp_bench_norms). */
#ifdef _OPENMP
#define KCPU_PRAGMA(x) _Pragma(#x)
#else
#define KCPU_PRAGMA(x)
#endif

/* A helper of such a function: inlined, so that it is compiled into each version. */
#if defined(__GNUC__)
#define KCPU_INLINE static inline __attribute__((always_inline))
#else
#define KCPU_INLINE static inline
#endif

/* Σ x_k y_k in double, in vector lanes (the DP kernels' norms and Gram products: float sums over
   millions of terms would lose digits the tests check). A KCPU_CLONES caller gets it in each width. */
KCPU_INLINE double kdot_f64(const float *x, const float *y, size_t n) {
    double s = 0;
    KCPU_PRAGMA(omp simd reduction(+:s))
    for (size_t k = 0; k < n; k++) s += (double)x[k] * y[k];
    return s;
}

KCPU_INLINE float kexp2i(int32_t n) {   /* 2^n for -126 <= n <= 127 */
    uint32_t u = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

KCPU_INLINE float kexpf(float x) {
    /* Everything is computed for every x and the special cases are chosen at the end, on the bits
       (integer compares): a float compare may trap on NaN, and a compiler keeps a branch (no vector
       code) around anything that may trap or that it sees only on one path. */
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    const uint32_t ax = xb & 0x7fffffffu;
    const int over = (xb < 0x80000000u) & (ax > 0x42B17218u) & (ax <= 0x7f800000u);  /* 88.7228 < x <= +inf */
    const int under = (xb >= 0x80000000u) & (ax > 0x42CFF1B5u) & (ax <= 0x7f800000u); /* -inf <= x < -103.972 */
    const float shifter = 12582912.0f;                       /* 1.5 * 2^23: adding it rounds to an integer */
    float t = x * 1.44269504088896341f + shifter;
    float n = t - shifter;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    int32_t ni = (int32_t)(tb - 0x4B400000u);                /* n as an integer (-150 .. 128 in range) */
    ni = ni > 128 ? 128 : ni;                                /* out of range: kept finite, chosen away below */
    ni = ni < -150 ? -150 : ni;
    float r = x - n * 0.693359375f;                          /* ln2 = 0.693359375 - 2.12194440e-4 */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t n1 = ni / 2;                                     /* 2^n = 2^n1 * 2^(n - n1), both normal */
    float y = (p * kexp2i(n1)) * kexp2i(ni - n1);
    /* the choice by masks on the bits: y is used on every path, so no compiler sinks its
       arithmetic into a branch */
    uint32_t yb, special = (uint32_t)over * 0x7f800000u, m = 0u - (uint32_t)(over | under);
    memcpy(&yb, &y, sizeof yb);
    yb = (yb & ~m) | (special & m);                          /* +inf, 0, or y (NaN: y is NaN) */
    memcpy(&y, &yb, sizeof y);
    return y;
}

#endif
