/* noise.h — the Gaussian noise of DP-SGD, reproducible on CPU and GPU from a seed.

   Each noise value z(seed, step, index) is a pure function (noise_dp_z; the CPU's vector path and the
   GPU kernel compute exactly it), so a given seed gives the same noise whatever the order of work,
   the number of threads, or the device:
     block j = index / 2, lane k = index % 2
     (r0, r1, r2, r3) = Philox4x32-10(counter = {j mod 2³², j / 2³², step mod 2³², step / 2³²},
                                      key = {seed mod 2³², seed / 2³²})        (Random123's philox.h)
     Box-Muller, in double:  u = (r0 · 2³² + r1 + ½) · 2⁻⁶⁴ ∈ [2⁻⁶⁵, 1]  (64 random bits; the sum rounded
                             once to a double), θ = 2π · r2 · 2⁻³² (cos θ and sin θ from the octant of r2
                             and an angle in [0, π/4]: noise_cos_sin); r3 is not used
       lane 0 = √(−2 ln u) cos θ,   lane 1 = √(−2 ln u) sin θ
   and the float added is (float)(std · z). The largest |z| is √(−2 ln 2⁻⁶⁵) = √(130 ln 2) = 9.4926
   (NOISE_DP_Z_MAX; a standard normal exceeds it with probability 2.3e-21), where 32-bit uniforms
   stopped at √(64 ln 2) = 6.6604 (probability 2.7e-11 beyond, a δ-sized hole in the mechanism
   for large models: issue 37). The index of a coordinate is its position in the flat vector of
   all trainable parameters (the caller passes each tensor's offset), the step is the logical
   optimizer step. NOISE_HD marks the inline functions __host__ __device__ under nvcc, so the CUDA
   port calls these very functions.
   ln, sin and cos on the CPU are this file's own (noise_log, noise_sincos_pi4: fdlibm's formulas,
   within an ulp of the correctly rounded value, written without branches so that noise.c runs
   them in vector lanes; the CPU's stream no longer depends on the libm it links); on the GPU they
   are CUDA's. The doubles may differ by an ulp between the two; after rounding to float the values
   agree but for rare ties (checked by the CUDA tests, not here).

   The model's initial weights draw from a second stream of the same parts (kernels.h: init_normal,
   with "INIT" in the step's high word and one stream per tensor: samples/llama/llama.c's
   llama_init_stream): noise_normal4, four values per Philox block from 32-bit uniforms
   (|z| ≤ 6.66, harmless for an initialisation), left as it was so that a seed's initial weights,
   and every figure quoted from them, stay the same.
   Not here: the clipping, the sum over samples, or a cryptographically secure generator; Philox is
   a statistical generator, whose output is unpredictable only while its seed is secret: the DP
   samples draw the seed from getrandom() (noise_secure_seed) unless --noise-seed gives one. The
   cryptographic alternative (--secure-noise: ChaCha20, the gradient and the noise on a grid) is
   kernels/secure_noise.h, which uses this file's polynomial ln, sin and cos on both devices. */
#ifndef NOISE_H
#define NOISE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <Random123/philox.h>

#ifdef __CUDACC__
#define NOISE_HD __host__ __device__
#define NOISE_INLINE static inline __host__ __device__
#elif defined(__GNUC__)
#define NOISE_HD
#define NOISE_INLINE static inline __attribute__((always_inline))   /* into noise.c's vector versions */
#else
#define NOISE_HD
#define NOISE_INLINE static inline
#endif

/* cond ? a : b, chosen on the bits: a loop over it stays one straight line (vector code). */
NOISE_INLINE double noise_select(uint32_t cond, double a, double b) {
    uint64_t ua, ub, m = 0u - (uint64_t)(cond != 0);
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & m) | (ub & ~m);
    memcpy(&a, &ua, sizeof a);
    return a;
}

/* ln x for a positive normal x (Box-Muller's u: in [2^-65, 1]; the secure stream's: [2^-129, 1]):
   fdlibm's e_log.c without its special cases, both of its final formulas computed and one chosen;
   within an ulp. Plain double arithmetic: the same bits wherever products and sums are rounded one
   by one (the host's ISO C; on the device, code built with -fmad=false: kernels/cuda/secure_noise.cu). */
NOISE_INLINE double noise_log_poly(double x) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10,
                 Lg1 = 6.666666666666735130e-01, Lg2 = 3.999999999940941908e-01, Lg3 = 2.857142874366239149e-01,
                 Lg4 = 2.222219843214978396e-01, Lg5 = 1.818357216161805012e-01, Lg6 = 1.531383769920937332e-01,
                 Lg7 = 1.479819860511658591e-01;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t hx = (int32_t)(bits >> 32);                  /* 32-bit lanes: no 64-bit shifts or conversions */
    int32_t k = (hx >> 20) - 1023;
    hx &= 0x000fffff;
    const int32_t i = (hx + 0x95f64) & 0x100000;
    const uint64_t nb = ((uint64_t)(uint32_t)(hx | (i ^ 0x3ff00000)) << 32) | (bits & 0xffffffffu);   /* into [√2/2, √2) */
    double m;
    memcpy(&m, &nb, sizeof m);
    k += i >> 20;
    const double f = m - 1.0, s = f / (2.0 + f), dk = (double)k, z = s * s, w = z * z;
    const double t1 = w * (Lg2 + w * (Lg4 + w * Lg6)), t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7))), R = t2 + t1;
    const double hfsq = 0.5 * f * f;
    const double a = dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f);
    const double b = dk * ln2_hi - ((s * (f - R) - dk * ln2_lo) - f);
    return noise_select(((hx - 0x6147a) | (0x6b851 - hx)) > 0, a, b);
}

/* ln x as the Philox streams take it: noise_log_poly on the CPU, CUDA's log on the device. */
NOISE_INLINE double noise_log(double x) {
#ifdef __CUDA_ARCH__
    return log(x);
#else
    return noise_log_poly(x);
#endif
}

/* sin x and cos x for 0 <= x <= π/4: fdlibm's k_sin.c and k_cos.c (no tail); within an ulp. */
NOISE_INLINE void noise_sincos_pi4_poly(double x, double *s, double *c) {
    const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03, S3 = -1.98412698298579493134e-04,
                 S4 = 2.75573137070700676789e-06, S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
    const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03, C3 = 2.48015872894767294178e-05,
                 C4 = -2.75573143513906633035e-07, C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
    const double z = x * x, w = z * z;
    const double rs = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6);
    *s = x + z * x * (S1 + z * rs);
    const double rc = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    const double hz = 0.5 * z, one_hz = 1.0 - hz;
    *c = one_hz + (((1.0 - one_hz) - hz) + z * rc);
}

/* sin x and cos x on [0, π/4] as the Philox streams take them: the polynomials on the CPU, CUDA's on the device. */
NOISE_INLINE void noise_sincos_pi4(double x, double *s, double *c) {
#ifdef __CUDA_ARCH__
    *s = sin(x); *c = cos(x);
#else
    noise_sincos_pi4_poly(x, s, c);
#endif
}

/* cos and sin of θ = 2π·r/2³². The octant k = r / 2²⁹ is taken on the integer (exact), so that
   sin and cos are only ever needed on [0, π/4] (where their polynomials hold; on random angles a
   plain libm sincos cost 2.3× as much here). Odd octants measure from the octant's end:
   ψ = 2π·(2²⁹ − f)/2³² = π/4 − φ. poly: the polynomials on the device too (a constant: the branch
   folds away). */
NOISE_INLINE void noise_cos_sin_by(uint32_t r, double *c, double *s, int poly) {
    const uint32_t k = r >> 29, f = r & 0x1FFFFFFFu;
    const uint32_t odd = 0u - (k & 1), g = (f & ~odd) | ((0x20000000u - f) & odd);   /* odd k: 2^29 - f */
    const double x = (6.283185307179586476925286766559 / 4294967296.0) * (double)g;
    double sx, cx;
    if (poly) noise_sincos_pi4_poly(x, &sx, &cx);
    else noise_sincos_pi4(x, &sx, &cx);
    /* θ = kπ/4 + x (k even) or (k+1)π/4 − x (k odd): rotate (cx, sx) by the octant, the signs by
       flipping the sign bit */
    const uint32_t swap = (k + 1) & 2;
    const double cv = noise_select(swap, sx, cx), sv = noise_select(swap, cx, sx);
    uint64_t cb, sb;
    memcpy(&cb, &cv, sizeof cb);
    memcpy(&sb, &sv, sizeof sb);
    cb ^= (uint64_t)(((k + 2) >> 2) & 1) << 63;
    sb ^= (uint64_t)((k >> 2) & 1) << 63;
    memcpy(c, &cb, sizeof cb);
    memcpy(s, &sb, sizeof sb);
}

NOISE_INLINE void noise_cos_sin(uint32_t r, double *c, double *s) { noise_cos_sin_by(r, c, s, 0); }

/* Box-Muller of one pair of Philox words, u from 32 bits (the initial weights' stream):
   √(−2 ln u(ru)) (cos θ(rt), sin θ(rt)). */
NOISE_INLINE void noise_box_muller(uint32_t ru, uint32_t rt, double *zc, double *zs) {
    const double rad = sqrt(-2.0 * noise_log(((double)ru + 1.0) / 4294967296.0));
    double c, s;
    noise_cos_sin(rt, &c, &s);
    *zc = rad * c;
    *zs = rad * s;
}

/* ---- the DP noise: z(seed, step, index) ---------------------------------------------------------- */

/* u = (hi · 2³² + lo + ½) · 2⁻⁶⁴, rounded once to a double: both products are by powers of two
   (exact), so the one rounding is the sum's, the same on CPU and GPU with or without a fused
   multiply-add. In [2⁻⁶⁵, 1]: u = 1 (ln u = 0) only where the sum rounds up to it. */
NOISE_INLINE double noise_uniform64(uint32_t hi, uint32_t lo) {
    return (double)hi * 2.3283064365386962890625e-10 + ((double)lo + 0.5) * 5.42101086242752217003726400434970855712890625e-20;
}

/* The largest |z| the DP noise can produce: √(−2 ln 2⁻⁶⁵) (u's smallest value, θ = 0). */
#define NOISE_DP_Z_MAX 9.492583076949755

/* Box-Muller of u from 64 bits (hi, lo) and θ from rt: √(−2 ln u) (cos θ, sin θ). */
NOISE_INLINE void noise_dp_box_muller(uint32_t hi, uint32_t lo, uint32_t rt, double *zc, double *zs) {
    const double rad = sqrt(-2.0 * noise_log(noise_uniform64(hi, lo)));
    double c, s;
    noise_cos_sin(rt, &c, &s);
    *zc = rad * c;
    *zs = rad * s;
}

/* The DP noise's two standard normal values of block j (coordinates 2j, 2j + 1). */
NOISE_INLINE void noise_dp_normal2(uint64_t seed, uint64_t step, uint64_t j, double z[2]) {
    philox4x32_ctr_t c = {{ (uint32_t)j, (uint32_t)(j >> 32), (uint32_t)step, (uint32_t)(step >> 32) }};
    philox4x32_key_t k = {{ (uint32_t)seed, (uint32_t)(seed >> 32) }};
    philox4x32_ctr_t r = philox4x32(c, k);
    noise_dp_box_muller(r.v[0], r.v[1], r.v[2], &z[0], &z[1]);
}

/* z(seed, step, index): the DP noise of one coordinate of the flat trainable vector at one logical
   step. THE definition: the CPU's batches, the GPU kernel (and anything that fuses the noise into
   another kernel) must give exactly these values. */
static inline NOISE_HD double noise_dp_z(uint64_t seed, uint64_t step, uint64_t index) {
    double z[2];
    noise_dp_normal2(seed, step, index / 2, z);
    return z[index % 2];
}

/* ---- the initial weights' stream (see the top) ------------------------------------------------- */

/* The four standard normal values of block j (coordinates 4j … 4j+3). */
NOISE_INLINE void noise_normal4(uint64_t seed, uint64_t step, uint64_t j, double z[4]) {
    philox4x32_ctr_t c = {{ (uint32_t)j, (uint32_t)(j >> 32), (uint32_t)step, (uint32_t)(step >> 32) }};
    philox4x32_key_t k = {{ (uint32_t)seed, (uint32_t)(seed >> 32) }};
    philox4x32_ctr_t r = philox4x32(c, k);
    noise_box_muller(r.v[0], r.v[1], &z[0], &z[1]);
    noise_box_muller(r.v[2], r.v[3], &z[2], &z[3]);
}

/* The standard normal value of one coordinate of the initial weights' stream. */
static inline NOISE_HD double noise_normal(uint64_t seed, uint64_t step, uint64_t index) {
    double z[4];
    noise_normal4(seed, step, index / 4, z);
    return z[index % 4];
}

/* The CPU's vector paths (noise.c), the same bits as the functions they batch:
   z[lane][i] = noise_normal4(seed, step, j0 + i)[lane]    (the initial weights) and
   z[lane][i] = noise_dp_normal2(seed, step, j0 + i)[lane] (the DP noise), for i < NOISE_BATCH. */
#define NOISE_BATCH 64
void noise_normal_batch(uint64_t seed, uint64_t step, uint64_t j0, double z[4][NOISE_BATCH]);
void noise_dp_batch(uint64_t seed, uint64_t step, uint64_t j0, double z[2][NOISE_BATCH]);

/* x[i] += (float)(std · noise_dp_z(seed, step, offset + i)) for i < n. */
void noise_add_gaussian(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset);

/* The DP-SGD update of a summed clipped gradient, in place:
   g[i] = (g[i] + (float)(σ·C·noise_dp_z(seed, step, offset + i))) / logical_batch. */
void noise_privatize(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                     uint64_t seed, uint64_t step, uint64_t offset);

/* 64 random bits from getrandom(); 0 and a one-line message on stderr on failure. */
uint64_t noise_secure_seed(int *ok);

#endif
