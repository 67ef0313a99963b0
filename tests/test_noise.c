/* test_noise.c — DP-SGD's Gaussian noise (kernels/cpu/noise.c).

   Checks: Philox4x32-10 gives Random123's known-answer vectors; the first values of both streams (the
   DP noise, the initial weights') equal the documented Box-Muller mappings worked out here by hand;
   the DP noise reaches |z| = NOISE_DP_Z_MAX = √(130 ln 2) on its extreme words and never more (no cut
   at 6.66); noise.h's own ln, sin and cos are within
   an ulp of libm's (correctly rounded nearly always); the vector path (noise_normal_batch: Philox in
   lanes, and noise_dp_batch) gives noise_normal4's (noise_dp_normal2's) values bit for bit, across the 2³² carry of the block index; the
   fused privatize (add, then divide, in one pass) equals the two passes bit for bit; over 2²⁰ coordinates of a privatized
   zero gradient the mean is 0 and the std is σC/B within 5 standard errors, and the mass within one
   std is 68.27 %, beyond 3 std 0.27 %; neighbours are uncorrelated; the same seed gives bit-identical noise, another seed,
   another step, or another offset gives different noise; noise added tensor by tensor with offsets
   equals noise added to the flat vector; two secure seeds differ. */
#include "noise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

int main(void) {
    /* Random123 kat_vectors: philox4x32 10 rounds. */
    philox4x32_ctr_t c0 = {{ 0, 0, 0, 0 }};
    philox4x32_key_t k0 = {{ 0, 0 }};
    philox4x32_ctr_t r = philox4x32(c0, k0);
    CHECK(r.v[0] == 0x6627e8d5u && r.v[1] == 0xe169c58du && r.v[2] == 0xbc57ac4cu && r.v[3] == 0x9b00dbd8u,
          "philox4x32-10 zero vector: %08x %08x %08x %08x", r.v[0], r.v[1], r.v[2], r.v[3]);
    philox4x32_ctr_t c1 = {{ 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u }};
    philox4x32_key_t k1 = {{ 0xa4093822u, 0x299f31d0u }};
    r = philox4x32(c1, k1);
    CHECK(r.v[0] == 0xd16cfe09u && r.v[1] == 0x94fdccebu && r.v[2] == 0x5001e420u && r.v[3] == 0x24126ea1u,
          "philox4x32-10 pi vector: %08x %08x %08x %08x", r.v[0], r.v[1], r.v[2], r.v[3]);

    /* The DP noise's documented mapping, by hand, for seed 0, step 0, coordinates 0 and 1 (the zero
       vector above): u from words 0 and 1 (64 bits), θ from word 2, word 3 unused. */
    {
        double u = ((double)0x6627e8d5u * 4294967296.0 + (double)0xe169c58du + 0.5) / 18446744073709551616.0;
        double rad = sqrt(-2 * log(u)), th = 2 * M_PI * (0xbc57ac4cu / 4294967296.0);
        double want2[2] = { rad * cos(th), rad * sin(th) };
        for (int i = 0; i < 2; i++)
            CHECK(fabs(noise_dp_z(0, 0, (uint64_t)i) - want2[i]) < 1e-12, "DP coordinate %d: %.15g, want %.15g",
                  i, noise_dp_z(0, 0, (uint64_t)i), want2[i]);
    }
    /* The DP noise's tails are not cut at 6.66 (issue 37): u reaches 2⁻⁶⁵, so |z| reaches
       √(130 ln 2) = NOISE_DP_Z_MAX = 9.4926, and nothing the transform can be given goes beyond it.
       Extreme words: u = 2⁻⁶⁵ (both words 0), ≈ 2⁻³² (word 0 zero, word 1 all ones: the old cut),
       2⁻⁴⁴, and every θ octant's end; |z| at the smallest u for θ = 0 is the bound itself. The
       initial weights' 32-bit stream stops at √(64 ln 2) = 6.6604 (as documented). */
    {
        double zc, zs, worst = 0;
        noise_dp_box_muller(0, 0, 0, &zc, &zs);
        CHECK(fabs(zc - NOISE_DP_Z_MAX) < 1e-12 && zs == 0, "u = 2^-65, theta = 0: z = (%.17g, %g), want (%.17g, 0)",
              zc, zs, NOISE_DP_Z_MAX);
        CHECK(fabs(NOISE_DP_Z_MAX - sqrt(130 * log(2.0))) < 1e-14, "NOISE_DP_Z_MAX %.17g, want sqrt(130 ln 2) %.17g",
              NOISE_DP_Z_MAX, sqrt(130 * log(2.0)));
        noise_dp_box_muller(0, 0xFFFFFFFFu, 0, &zc, &zs);
        CHECK(fabs(zc - sqrt(64 * log(2.0))) < 1e-9, "u ~ 2^-32: z = %.12g, want sqrt(64 ln 2) = %.12g", zc, sqrt(64 * log(2.0)));
        noise_dp_box_muller(0, 1u << 20, 0x40000000u, &zc, &zs);   /* u ≈ 2⁻⁴⁴, θ = π/2 */
        const double z44 = sqrt(-2 * log((1048576.0 + 0.5) / 18446744073709551616.0));
        CHECK(fabs(zs - z44) < 1e-12 && zs > 7.8, "u ~ 2^-44, theta pi/2: z = %.15g, want %.15g", zs, z44);
        const uint32_t his[] = { 0, 0, 0, 1, 0xFFFFFFFFu }, los[] = { 0, 1, 0xFFFFFFFFu, 0, 0xFFFFFFFFu };
        for (int a = 0; a < 5; a++)
            for (uint32_t k = 0; k < 8; k++)
                for (int e = -1; e <= 1; e++) {
                    noise_dp_box_muller(his[a], los[a], (k << 29) + (uint32_t)e, &zc, &zs);
                    worst = fmax(worst, fmax(fabs(zc), fabs(zs)));
                }
        CHECK(worst <= NOISE_DP_Z_MAX && worst > NOISE_DP_Z_MAX - 1e-9, "largest |z| over the extreme words %.17g, bound %.17g",
              worst, NOISE_DP_Z_MAX);
        noise_box_muller(0, 0, &zc, &zs);
        CHECK(fabs(zc - sqrt(64 * log(2.0))) < 1e-12, "the initial weights' stream stops at %.12g", zc);
    }

    /* The initial weights' documented mapping, by hand, for seed 0, step 0, coordinates 0..3 (the zero vector above). */
    double rad0 = sqrt(-2 * log((0x6627e8d5u + 1.0) / 4294967296.0));
    double th0 = 2 * M_PI * (0xe169c58du / 4294967296.0);
    double rad1 = sqrt(-2 * log((0xbc57ac4cu + 1.0) / 4294967296.0));
    double th1 = 2 * M_PI * (0x9b00dbd8u / 4294967296.0);
    double want[4] = { rad0 * cos(th0), rad0 * sin(th0), rad1 * cos(th1), rad1 * sin(th1) };
    for (int i = 0; i < 4; i++)
        CHECK(fabs(noise_normal(0, 0, (uint64_t)i) - want[i]) < 1e-12, "coordinate %d: %.15g, want %.15g",
              i, noise_normal(0, 0, (uint64_t)i), want[i]);

    /* cos and sin by octant equal cos and sin of 2π·r/2³² to 1e-15: the reference's own angle is
       rounded by up to half an ulp of 2π (4.4e-16), each libm result by another ~1e-16; a wrong sign
       or a missed swap is off by O(1). Every octant's start, end and middle, and 10⁶ random angles. */
    double worst = 0;
    for (uint64_t i = 0; i < 1000000 + 8 * 5; i++) {
        uint32_t rr = i < 40 ? (uint32_t)((i / 5) << 29) + (uint32_t[]){ 0, 1, 0x10000000u, 0x1FFFFFFFu, 0x0ABCDEFu }[i % 5]
                             : (uint32_t)(i * 2654435761u);
        double cc, ss, th = 2 * M_PI * (rr / 4294967296.0);
        noise_cos_sin(rr, &cc, &ss);
        worst = fmax(worst, fmax(fabs(cc - cos(th)), fabs(ss - sin(th))));
    }
    CHECK(worst <= 1e-15, "noise_cos_sin off cos/sin by %.3g", worst);

    /* noise_add_gaussian adds exactly (float)(std · noise_dp_z(index)) */
    {
        float x[13] = { 0 };
        noise_add_gaussian(x, 13, 0.75, 99, 5, 1001);
        int same = 1;
        for (int i = 0; i < 13; i++) same &= x[i] == (float)(0.75 * noise_dp_z(99, 5, 1001 + (uint64_t)i));
        CHECK(same, "noise_add_gaussian must add (float)(std * noise_dp_z(index))");
        /* whole batches of 256 (their own vector loop) and partial ones, from an aligned and an
           unaligned offset, with the privatize's scale */
        for (int t = 0; t < 2; t++) {
            enum { N = 3 * 256 + 7 };
            static float y[N];
            const uint64_t off = t ? 1001 : 0;
            for (int i = 0; i < N; i++) y[i] = 0.25f * (float)i;
            noise_privatize(y, N, 0.5, 1.5, 4.0, 99, 5, off);
            same = 1;
            for (int i = 0; i < N; i++)
                same &= y[i] == (0.25f * (float)i + (float)(0.75 * noise_dp_z(99, 5, off + (uint64_t)i))) * 0.25f;
            CHECK(same, "noise_privatize at offset %d must give (g + (float)(σC · noise_dp_z(index))) / L", (int)off);
        }
        /* and the sin/cos of the mapping are noise.h's sin and cos of the octant's angle, rotated by
           the octant (the table written out: θ = kπ/4 + x or (k+1)π/4 − x) */
        double z[4];
        noise_normal4(7, 3, 12345, z);
        philox4x32_ctr_t c = {{ 12345, 0, 3, 0 }};
        philox4x32_key_t k = {{ 7, 0 }};
        philox4x32_ctr_t rr = philox4x32(c, k);
        double rad = sqrt(-2.0 * noise_log(((double)rr.v[0] + 1.0) / 4294967296.0));
        uint32_t oct = rr.v[1] >> 29, f = rr.v[1] & 0x1FFFFFFFu;
        double ang = (6.283185307179586476925286766559 / 4294967296.0) * (double)(oct & 1 ? 0x20000000u - f : f);
        double cx, sx;
        noise_sincos_pi4(ang, &sx, &cx);
        const double table[8][2] = { { cx, sx }, { sx, cx }, { -sx, cx }, { -cx, sx },
                                     { -cx, -sx }, { -sx, -cx }, { sx, -cx }, { cx, -sx } };
        CHECK(z[0] == rad * table[oct][0] && z[1] == rad * table[oct][1], "lanes 0, 1 must be exactly rad·cos, rad·sin (octant %u)", oct);
    }

    /* noise.h's ln, sin and cos against libm's: within one ulp, on Box-Muller's whole input range
       (u = (r+1)/2^32 for r at both ends, at powers of two, and 10^6 others; x in [0, π/4]). A
       wrong coefficient or a misplaced normalization is off by far more. */
    {
        long off_ln = 0, off_sc = 0, n_ln = 0, n_sc = 0;
        uint64_t st = 0x9E3779B97F4A7C15ull;
        for (long it = 0; it < 1000000 + 80; it++) {
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            uint32_t rr = it < 64 ? (uint32_t)((1ull << (it % 33)) - (it < 33 ? 1 : 0)) : it < 80 ? 0xFFFFFFFFu - (uint32_t)(it - 64) : (uint32_t)st;
            double u = ((double)rr + 1.0) / 4294967296.0, a = noise_log(u), b = log(u);
            int64_t ia, ib;
            memcpy(&ia, &a, 8); memcpy(&ib, &b, 8);
            n_ln++;
            if (ia != ib) { off_ln++; CHECK(llabs(ia - ib) <= 1, "noise_log(%.17g) = %.17g, libm %.17g", u, a, b); }
            /* the DP noise's u reaches down to 2^-65: (0, r) and (r >> 20, r) as its two words */
            for (int w = 0; w < 2; w++) {
                u = noise_uniform64(w ? rr >> 20 : 0, rr); a = noise_log(u); b = log(u);
                memcpy(&ia, &a, 8); memcpy(&ib, &b, 8);
                n_ln++;
                if (ia != ib) { off_ln++; CHECK(llabs(ia - ib) <= 1, "noise_log(%.17g) = %.17g, libm %.17g", u, a, b); }
            }
            double x = (6.283185307179586476925286766559 / 4294967296.0) * (double)(rr & 0x1FFFFFFFu), sx, cx;
            if (it < 2) x = it ? 0.78539816339744828 : 0.0;   /* both ends */
            noise_sincos_pi4(x, &sx, &cx);
            double s2 = sin(x), c2 = cos(x);
            int64_t is, is2, ic, ic2;
            memcpy(&is, &sx, 8); memcpy(&is2, &s2, 8); memcpy(&ic, &cx, 8); memcpy(&ic2, &c2, 8);
            n_sc += 2;
            off_sc += (is != is2) + (ic != ic2);
            CHECK(llabs(is - is2) <= 1 && llabs(ic - ic2) <= 1, "noise_sincos_pi4(%.17g) = %.17g, %.17g; libm %.17g, %.17g", x, sx, cx, s2, c2);
        }
        printf("noise.h ln: %ld of %ld one ulp from libm; sin, cos: %ld of %ld\n", off_ln, n_ln, off_sc, n_sc);
    }
    /* The vector path equals noise_normal4 bit for bit (batches across the carry into the high word
       of the block index, another seed and step). */
    {
        double zb[4][NOISE_BATCH], z4[4];
        const uint64_t starts[] = { 0, 1000003, 0xFFFFFFFFull - 20, 0x123456789ull };
        long differ = 0;
        for (int t = 0; t < 4; t++) {
            noise_normal_batch(0xDEADBEEFCAFEull, 3 + (uint64_t)t, starts[t], zb);
            for (int i = 0; i < NOISE_BATCH; i++) {
                noise_normal4(0xDEADBEEFCAFEull, 3 + (uint64_t)t, starts[t] + (uint64_t)i, z4);
                for (int l = 0; l < 4; l++) differ += memcmp(&z4[l], &zb[l][i], sizeof(double)) != 0;
            }
        }
        CHECK(differ == 0, "noise_normal_batch differs from noise_normal4 in %ld values", differ);
        double zd[2][NOISE_BATCH], z2[2];
        differ = 0;
        for (int t = 0; t < 4; t++) {
            noise_dp_batch(0xDEADBEEFCAFEull, 3 + (uint64_t)t, starts[t], zd);
            for (int i = 0; i < NOISE_BATCH; i++) {
                noise_dp_normal2(0xDEADBEEFCAFEull, 3 + (uint64_t)t, starts[t] + (uint64_t)i, z2);
                for (int l = 0; l < 2; l++) differ += memcmp(&z2[l], &zd[l][i], sizeof(double)) != 0;
            }
        }
        CHECK(differ == 0, "noise_dp_batch differs from noise_dp_normal2 in %ld values", differ);
    }

    /* Statistics of a privatized zero gradient: (0 + σC z) / B. */
    const size_t n = (size_t)1 << 20;
    const double sigma = 1.3, C = 0.7, B = 8, sd = sigma * C / B;
    float *g = calloc(n, sizeof *g), *h = calloc(n, sizeof *h);
    if (!g || !h) { printf("FAIL: out of memory\n"); return 1; }
    noise_privatize(g, n, sigma, C, B, 42, 7, 0);
    double sum = 0, sum2 = 0, within = 0, lag = 0;
    for (size_t i = 0; i < n; i++) {
        sum += g[i]; sum2 += (double)g[i] * g[i];
        within += fabs(g[i]) <= sd;
        if (i + 1 < n) lag += (double)g[i] * g[i + 1];
    }
    double mean = sum / n, var = sum2 / n - mean * mean, std = sqrt(var);
    CHECK(fabs(mean) < 5 * sd / sqrt((double)n), "mean %.3g, want 0 +- %.3g", mean, 5 * sd / sqrt((double)n));
    CHECK(fabs(std - sd) < 5 * sd / sqrt(2.0 * n), "std %.6g, want %.6g +- %.3g", std, sd, 5 * sd / sqrt(2.0 * n));
    double p = 0.682689492137, frac = within / n;
    CHECK(fabs(frac - p) < 5 * sqrt(p * (1 - p) / n), "P(|z|<=1) = %.5f, want %.5f", frac, p);
    {   /* the tail beyond 3 std */
        double beyond = 0, p3 = 0.00269979606326;
        for (size_t i = 0; i < n; i++) beyond += fabs(g[i]) > 3 * sd;
        CHECK(fabs(beyond / n - p3) < 5 * sqrt(p3 * (1 - p3) / n), "P(|z|>3) = %.6f, want %.6f", beyond / n, p3);
    }
    double corr = lag / (n - 1) / var;
    CHECK(fabs(corr) < 5 / sqrt((double)n), "lag-1 correlation %.3g", corr);

    /* Reproducible, and sensitive to seed, step and offset. */
    noise_privatize(h, n, sigma, C, B, 42, 7, 0);
    CHECK(memcmp(g, h, n * sizeof *g) == 0, "the same seed must give the same noise");
    const struct { uint64_t seed, step, offset; const char *what; } other[] = {
        { 43, 7, 0, "seed" }, { 42, 8, 0, "step" }, { 42, 7, 1, "offset" }, { 42ull << 32, 7, 0, "seed high bits" },
    };
    for (int t = 0; t < 4; t++) {
        memset(h, 0, n * sizeof *h);
        noise_privatize(h, n, sigma, C, B, other[t].seed, other[t].step, other[t].offset);
        size_t same = 0;
        for (size_t i = 0; i < n; i++) same += g[i] == h[i];
        CHECK(same < n / 1000, "another %s gives %zu equal values of %zu", other[t].what, same, n);
    }
    /* Tensor by tensor (odd sizes, blocks split across tensors) equals the flat vector. */
    memset(h, 0, n * sizeof *h);
    const size_t cuts[] = { 0, 3, 10, 11, 1001, 4099, n };
    for (int t = 0; t + 1 < 7; t++)
        noise_privatize(h + cuts[t], cuts[t + 1] - cuts[t], sigma, C, B, 42, 7, cuts[t]);
    CHECK(memcmp(g, h, n * sizeof *g) == 0, "noise split into tensors must equal the flat noise");
    /* The one-pass privatize equals noise added, then a division by the batch (two passes). */
    {
        float *a = malloc(4099 * sizeof *a), *b = malloc(4099 * sizeof *b);
        if (!a || !b) { printf("FAIL: out of memory\n"); return 1; }
        for (int i = 0; i < 4099; i++) a[i] = b[i] = (float)(i % 17) * 0.37f - 2.0f;
        noise_privatize(a, 4099, sigma, C, 3.0, 5, 6, 77);
        noise_add_gaussian(b, 4099, sigma * C, 5, 6, 77);
        const float inv = (float)(1.0 / 3.0);
        for (int i = 0; i < 4099; i++) b[i] *= inv;
        CHECK(memcmp(a, b, 4099 * sizeof *a) == 0, "privatize must equal add_gaussian then *= 1/B");
        free(a); free(b);
    }
    /* σ = 0: only the division by the batch. */
    float one[3] = { 8, -16, 4 };
    noise_privatize(one, 3, 0.0, 1.0, 8, 1, 1, 0);
    CHECK(one[0] == 1 && one[1] == -2 && one[2] == 0.5f, "sigma 0 must only divide: %g %g %g", one[0], one[1], one[2]);

    int ok1 = 0, ok2 = 0;
    uint64_t s1 = noise_secure_seed(&ok1), s2 = noise_secure_seed(&ok2);
    CHECK(ok1 && ok2 && s1 != s2, "two secure seeds must differ: %llx %llx",
          (unsigned long long)s1, (unsigned long long)s2);
    free(g); free(h);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("noise: all checks passed (mean %.2g, std %.6g for %.6g, P1 %.4f)\n", mean, std, sd, frac);
    return 0;
}
