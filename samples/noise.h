/* noise.h — the Gaussian noise of DP-SGD, reproducible on CPU and GPU from a seed.

   Each noise value is a pure function of (seed, step, coordinate index), so a given seed gives the
   same noise whatever the order of work, the number of threads, or the device:
     block j = index / 4, lane k = index % 4
     (r0, r1, r2, r3) = Philox4x32-10(counter = {j mod 2³², j / 2³², step mod 2³², step / 2³²},
                                      key = {seed mod 2³², seed / 2³²})        (Random123's philox.h)
     Box-Muller, in double:  u = (r + 1) · 2⁻³² ∈ (0, 1],  θ = 2π · r' · 2⁻³²  (cos θ and sin θ
                             from the octant of r' and an angle in [0, π/4]: noise_cos_sin)
       lane 0 = √(−2 ln u(r0)) cos θ(r1),   lane 1 = √(−2 ln u(r0)) sin θ(r1),
       lane 2 = √(−2 ln u(r2)) cos θ(r3),   lane 3 = √(−2 ln u(r2)) sin θ(r3)
   and the float added is (float)(std · z). The index of a coordinate is its position in the flat
   vector of all trainable parameters (the caller passes each tensor's offset), the step is the
   logical optimizer step. NOISE_HD marks the inline functions __host__ __device__ under nvcc, so the
   CUDA port calls these very functions. Double-precision log/sqrt/cos may differ by an ulp between
   libm and CUDA's math library; after rounding to float the values agree (checked by the CUDA tests,
   not here).

   Not here: the clipping, the sum over samples, or a cryptographically secure generator; Philox is
   a statistical generator. --secure-seed takes the seed from getrandom() (noise_secure_seed). */
#ifndef NOISE_H
#define NOISE_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <Random123/philox.h>

#ifdef __CUDACC__
#define NOISE_HD __host__ __device__
#else
#define NOISE_HD
#endif

/* cos and sin of θ = 2π·r/2³². The octant k = r / 2²⁹ is taken on the integer (exact), so the libm
   call always gets an angle in [0, π/4] — its fastest path: on random angles a plain sincos cost
   2.3× as much here. Odd octants measure from the octant's end: ψ = 2π·(2²⁹ − f)/2³² = π/4 − φ. */
static inline NOISE_HD void noise_cos_sin(uint32_t r, double *c, double *s) {
    const uint32_t k = r >> 29, f = r & 0x1FFFFFFFu;
    const double x = (6.283185307179586476925286766559 / 4294967296.0) * (double)((k & 1) ? 0x20000000u - f : f);
    double sx, cx;
#if !defined(__CUDA_ARCH__) && defined(__GLIBC__) && defined(_GNU_SOURCE)
    sincos(x, &sx, &cx);   /* glibc's sincos returns exactly sin and cos, in one call */
#else
    sx = sin(x); cx = cos(x);
#endif
    /* θ = kπ/4 + x (k even) or (k+1)π/4 − x (k odd): rotate (cx, sx) by the octant */
    const int swap = ((k + 1) & 2) != 0;
    double cv = swap ? sx : cx, sv = swap ? cx : sx;
    *c = ((k + 2) & 4) ? -cv : cv;
    *s = (k & 4) ? -sv : sv;
}

/* The four standard normal values of block j (coordinates 4j … 4j+3). */
static inline NOISE_HD void noise_normal4(uint64_t seed, uint64_t step, uint64_t j, double z[4]) {
    philox4x32_ctr_t c = {{ (uint32_t)j, (uint32_t)(j >> 32), (uint32_t)step, (uint32_t)(step >> 32) }};
    philox4x32_key_t k = {{ (uint32_t)seed, (uint32_t)(seed >> 32) }};
    philox4x32_ctr_t r = philox4x32(c, k);
    const double two32 = 4294967296.0;
    double rad0 = sqrt(-2.0 * log(((double)r.v[0] + 1.0) / two32));
    double rad1 = sqrt(-2.0 * log(((double)r.v[2] + 1.0) / two32));
    double s0, c0, s1, c1;
    noise_cos_sin(r.v[1], &c0, &s0);
    noise_cos_sin(r.v[3], &c1, &s1);
    z[0] = rad0 * c0; z[1] = rad0 * s0;
    z[2] = rad1 * c1; z[3] = rad1 * s1;
}

/* The standard normal value of one coordinate. */
static inline NOISE_HD double noise_normal(uint64_t seed, uint64_t step, uint64_t index) {
    double z[4];
    noise_normal4(seed, step, index / 4, z);
    return z[index % 4];
}

/* x[i] += (float)(std · z(seed, step, offset + i)) for i < n. */
void noise_add_gaussian(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset);

/* The DP-SGD update of a summed clipped gradient, in place:
   g[i] = (g[i] + σ·C·z(offset + i)) / logical_batch. */
void noise_privatize(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                     uint64_t seed, uint64_t step, uint64_t offset);

/* 64 random bits from getrandom(); 0 and a one-line message on stderr on failure. */
uint64_t noise_secure_seed(int *ok);

#endif
