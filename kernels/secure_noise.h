/* secure_noise.h — DP-SGD's noise from a cryptographic generator, rounded to a grid (--secure-noise).

   The generator: ChaCha20 (RFC 8439, kernels/chacha20.h) with a 256-bit key from getrandom(), used as a
   counter-based function, so that every value is a pure function of (key, step, index), the same on
   the CPU and the GPU, for any thread count or sharding:
     block j of a stream = ChaCha20(key, counter = j mod 2³², nonce = {j / 2³², step mod 2³², domain ^ step / 2³²})
     domain "DPNZ" (0x5A4E5044): the DP noise;  "POIS" (0x504F4953): Poisson sampling's draws.
   Whoever does not hold the key cannot tell the blocks from random (ChaCha20's claim); Philox (noise.h)
   makes no such claim and has a 64-bit key.

   The DP noise of coordinate i (block j = i / 6, pair p = (i mod 6) / 2, lane i mod 2), words w[0..15]:
     u = (w[5p]·2⁹⁶ + w[5p+1]·2⁶⁴ + w[5p+2]·2³² + w[5p+3] + ½)·2⁻¹²⁸  (128 bits; u ∈ [2⁻¹²⁹, 1])
     θ = 2π·w[5p+4]·2⁻³²;  z = √(−2 ln u)·(cos θ, sin θ)[lane]        (w[15] unused)
   with noise.h's polynomial ln, sin and cos on both devices (the GPU file is built with -fmad=false:
   every product and sum rounded on its own, as on the host), so z has the same bits everywhere.

   The floating-point attack (Mironov 2012; Holohan & Braghin 2021; Jin et al. 2022): the doubles a
   sampler can return are unevenly spaced, so g + noise, rounded, can land only on some values, and
   which ones depends on g: an observer who knows every other record can tell two neighbouring g's
   apart by the output alone. Here the gradient and the noise live on one grid of spacing
   Λ = 2^(⌊log₂(σC)⌋ − 28) (2²⁸ to 2²⁹ points per σC):
     q = rint(g / Λ)  (the private value, rounded: ‖Λq − g‖ ≤ Λ√d / 2),   k = rint(σC / Λ · z)
     g ← (float)((q + k)·Λ) · (float)(1/L)
   The integer q + k is the mechanism's output; everything after it (its double and float roundings, the
   division by L, the optimizer) is a function of it alone: post-processing. k is the Gaussian σC·Z
   rounded to the grid, so Λ(q + k) = Λ·rint((Λq + σC·Z)/Λ) is a rounding of the Gaussian mechanism's
   output on Λq: as private as that mechanism with sensitivity S + Λ√d (S = C, or 2C for replace-one):
   the accountant is run at σ·C / (S + Λ√d) (secure_noise_sigma_for_accountant). Every grid point
   within 11.9σ of q is a possible output (z's resolution from the 128-bit u stays finer than a grid
   cell, 2⁻²⁸σ, out to there), whatever g: no output rules a neighbour out.
   What is not exact: k's law is that of rint(σC·Z/Λ) to within the rounding of z (a few ulp against a
   cell of 2⁻²⁸σ: a relative error of about 2⁻¹⁸·|z| in a cell's probability); an exact integer
   sampler (Canonne, Kamath & Steinke 2020's discrete Gaussian) would remove it, at the price of
   rejection loops (variable time, divergent GPU threads). docs/DP_METHODS.md says more.

   Time: ChaCha20 and the sampler are straight-line integer and double arithmetic (no branch, no table):
   a value's cost does not depend on the value (the timing attack of Jin et al. on samplers whose
   loops depend on the output). */
#ifndef SECURE_NOISE_H
#define SECURE_NOISE_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>

#include "chacha20.h"
#include "noise.h"

#define SECURE_NOISE_DOMAIN_DP   0x5A4E5044u   /* "DPNZ" */
#define SECURE_NOISE_DOMAIN_POIS 0x504F4953u   /* "POIS" */
#define SECURE_NOISE_PER_BLOCK   6             /* coordinates per ChaCha20 block */
#define SECURE_NOISE_GRID_BITS   28            /* Λ = 2^(⌊log₂ σC⌋ − 28) */
/* The largest |z|: √(−2 ln 2⁻¹²⁹) = √(258 ln 2) */
#define SECURE_NOISE_Z_MAX 13.372807206584035

typedef struct { uint32_t k[8]; } SecureKey;

/* Block j of the (domain, step) stream. */
NOISE_INLINE void secure_noise_block(const SecureKey *key, uint32_t domain, uint64_t step, uint64_t j, uint32_t w[16]) {
    const uint32_t nonce[3] = { (uint32_t)(j >> 32), (uint32_t)step, domain ^ (uint32_t)(step >> 32) };
    chacha20_block(key->k, (uint32_t)j, nonce, w);
}

/* u from 128 bits (w0 most significant), in [2⁻¹²⁹, 1]: two halves each rounded once, then their sum
   (plain sums of exact products by powers of two: the same on every device). */
NOISE_INLINE double secure_noise_uniform128(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) {
    const double hi = (double)w0 * 0x1p-32 + (double)w1 * 0x1p-64;
    const double lo = (double)w2 * 0x1p-96 + ((double)w3 + 0.5) * 0x1p-128;
    return hi + lo;
}

/* Box-Muller of u from the four words w0..w3 and θ from wt: √(−2 ln u) (cos θ, sin θ). */
NOISE_INLINE void secure_noise_box_muller(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, uint32_t wt, double *zc, double *zs) {
    const double rad = sqrt(-2.0 * noise_log_poly(secure_noise_uniform128(w0, w1, w2, w3)));
    double c, s;
    noise_cos_sin_by(wt, &c, &s, 1);
    *zc = rad * c;
    *zs = rad * s;
}

/* The two standard normal values of pair p (0..2) of a block's words. */
NOISE_INLINE void secure_noise_pair(const uint32_t w[16], int p, double *zc, double *zs) {
    const uint32_t *v = w + 5 * p;
    secure_noise_box_muller(v[0], v[1], v[2], v[3], v[4], zc, zs);
}

/* z(key, step, index): the secure stream's standard normal value of one coordinate. THE definition. */
static inline NOISE_HD double secure_noise_z(const SecureKey *key, uint64_t step, uint64_t index) {
    uint32_t w[16];
    secure_noise_block(key, SECURE_NOISE_DOMAIN_DP, step, index / SECURE_NOISE_PER_BLOCK, w);
    const int c = (int)(index % SECURE_NOISE_PER_BLOCK);
    double z[2];
    secure_noise_pair(w, c / 2, &z[0], &z[1]);
    return z[c % 2];
}

/* rint(x), ties to even, without a library call (the same in vector lanes and on the device): |x| < 2⁵²
   is rounded by adding and removing 2⁵², larger |x| are integers already; the sign is put back. */
NOISE_INLINE double secure_noise_rint(double x) {
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    const uint64_t sign = bits & 0x8000000000000000ull;
    uint64_t abits = bits ^ sign;
    double ax;
    memcpy(&ax, &abits, sizeof ax);
    const double r = noise_select(ax < 0x1p52, (ax + 0x1p52) - 0x1p52, ax);
    memcpy(&abits, &r, sizeof abits);
    abits |= sign;
    memcpy(&x, &abits, sizeof x);
    return x;
}

/* The grid of a run: Λ (a power of two) and σC/Λ (in [2²⁸, 2²⁹)). */
typedef struct { double lambda, inv_lambda, cells_per_std; } SecureGrid;

static inline SecureGrid secure_noise_grid(double std) {
    int e;
    frexp(std, &e);                                     /* std = m·2^e, m ∈ [½, 1): ⌊log₂ std⌋ = e − 1 */
    SecureGrid gr;
    gr.lambda = ldexp(1.0, e - 1 - SECURE_NOISE_GRID_BITS);
    gr.inv_lambda = ldexp(1.0, SECURE_NOISE_GRID_BITS + 1 - e);
    gr.cells_per_std = std * gr.inv_lambda;             /* exact: a product by a power of two */
    return gr;
}

/* One coordinate privatized: (float)((rint(g/Λ) + rint(σC/Λ·z))·Λ) · inv. */
NOISE_INLINE float secure_noise_apply(float g, double z, SecureGrid gr, float inv) {
    const double q = secure_noise_rint((double)g * gr.inv_lambda), k = secure_noise_rint(gr.cells_per_std * z);
    return (float)((q + k) * gr.lambda) * inv;
}

/* The noise multiplier the accountant must use for sensitivity S = adjacency_factor · C (1: zero-out and
   add/remove, 2: replace-one) when the d noised coordinates are rounded to the grid of σ·C:
   σ·C / (S + Λ√d). */
static inline double secure_noise_sigma_for_accountant(double sigma, double max_grad_norm, double adjacency_factor, double d) {
    if (!(sigma > 0)) return sigma;
    const SecureGrid gr = secure_noise_grid(sigma * max_grad_norm);
    return sigma * max_grad_norm / (adjacency_factor * max_grad_norm + gr.lambda * sqrt(d));
}

/* Poisson sampling's draw of one row: in the batch with probability q64 / 2⁶⁴ (q64 = ⌊q·2⁶⁴⌋, at most q:
   the accountant's q is never below the rate drawn); rows 8b .. 8b+7 share block b of the "POIS" stream. */
static inline NOISE_HD int secure_noise_poisson_take(const SecureKey *key, uint64_t step, uint64_t row, uint64_t q64) {
    uint32_t w[16];
    secure_noise_block(key, SECURE_NOISE_DOMAIN_POIS, step, row / 8, w);
    const int k = (int)(row % 8);
    return (((uint64_t)w[2 * k] << 32) | w[2 * k + 1]) < q64;
}

/* ⌊q·2⁶⁴⌋ for 0 ≤ q < 1; q ≥ 1: 2⁶⁴ − 1 (a row is then left out with probability 2⁻⁶⁴: the rate drawn
   stays at most q). */
static inline uint64_t secure_noise_q64(double q) {
    if (!(q > 0)) return 0;
    if (q >= 1) return UINT64_MAX;
    return (uint64_t)ldexp(q, 64);   /* q < 1: below 2⁶⁴, truncated */
}

/* The CPU's paths (kernels/cpu/secure_noise.c), the bits of the functions above. */
#define SECURE_NOISE_BATCH 16   /* blocks per batch: 96 coordinates */
/* z[c][i] = secure_noise_z(key, step, 6·(j0 + i) + c) for i < SECURE_NOISE_BATCH, c < 6. */
void secure_noise_batch(const SecureKey *key, uint64_t step, uint64_t j0, double z[SECURE_NOISE_PER_BLOCK][SECURE_NOISE_BATCH]);
/* g[i] = secure_noise_apply(g[i], secure_noise_z(key, step, offset + i), grid(σC), (float)(1/L)) for i < n;
   σ = 0: g[i] · (float)(1/L), as noise_privatize. */
void secure_noise_privatize(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                            const SecureKey *key, uint64_t step, uint64_t offset);
/* 256 bits from getrandom(): 0 and a one-line message on stderr on failure, else 1. */
int  secure_noise_key_random(SecureKey *key);
/* A given 64-bit seed as a key (--noise-seed: reproducible runs): its two words, the rest zero. */
void secure_noise_key_from_seed(SecureKey *key, uint64_t seed);

#endif
