/* test_dp_update.c — the DP step's fused update (kernels/cpu/dp_update.c: noise and AdamW in one pass)
   against the separate path the trainer runs (noise_privatize, then adamw_update on the CPU backend):
   p, m, v bit for bit, and g either the noised gradient (keep_noised, bit for bit) or untouched; over
   tensor sizes that split noise.c's batches and the fused blocks anywhere (1 … 70001 coordinates),
   offsets inside a Philox block, σ = 0 and σ > 0, weight decay on and off, several steps t, and 1 or 3
   threads. Also that the noise is really there (σ > 0 moves p away from the σ = 0 update). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp_kernels.h"
#include "kernels.h"
#include "noise.h"
#include "check.h"

#include <stdint.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uniform(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static size_t differ(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(a + i, b + i, sizeof *a) != 0;
    return d;
}

int main(void) {
    const size_t sizes[] = { 1, 3, 4, 4097, 12345, 70001 };
    const uint64_t offsets[] = { 0, 1, 3, 1000003 };
    const double sigmas[] = { 0.0, 1.1 };
    size_t cases = 0;
    for (int th = 1; th <= 3; th += 2) {
        KBackend cpu;
        kbackend_cpu_init(&cpu, th);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++)
                for (int sg = 0; sg < 2; sg++)
                    for (int keep = 0; keep < 2; keep++) {
                        const size_t n = sizes[s];
                        const DpNoise nz = { sigmas[sg], 0.75, 6.0, 0xC0FFEEull + o, 41 + (uint64_t)s };
                        const DpAdamW opt = { 3e-3f, 0.9f, 0.95f, 1e-8f, keep ? 0.1f : 0.0f, 1 + (int)(s % 4) * 3 };
                        float *buf = malloc(13 * n * sizeof *buf);
                        float *p = buf, *g = p + n, *m = g + n, *v = m + n;     /* the fused call's */
                        float *pr = v + n, *gr = pr + n, *mr = gr + n, *vr = mr + n;   /* the separate path's */
                        float *p0 = vr + n, *g0 = p0 + n, *m0 = g0 + n, *v0 = m0 + n;  /* the start */
                        float *pq = v0 + n;
                        for (size_t i = 0; i < n; i++) {
                            p[i] = uniform(); g[i] = uniform() * 4.0f; m[i] = uniform() * 0.1f; v[i] = uniform() * uniform() * 0.01f;
                        }
                        if (n > 2) g[2] = -0.0f;   /* a signed zero through the noise and the scale */
                        memcpy(pr, p, 4 * n * sizeof *p);
                        memcpy(p0, p, 4 * n * sizeof *p);
                        /* the separate path: privatize in place, then AdamW */
                        noise_privatize(gr, n, nz.sigma, nz.max_grad_norm, nz.logical_batch, nz.seed, nz.step, offsets[o]);
                        CHECK(adamw_update(&cpu, pr, gr, mr, vr, n, opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.t) == 0);
                        dp_noisy_adamw(p, g, m, v, n, offsets[o], &nz, &opt, keep, th);
                        CHECK_EQ_U(differ(p, pr, n), 0);
                        CHECK_EQ_U(differ(m, mr, n), 0);
                        CHECK_EQ_U(differ(v, vr, n), 0);
                        CHECK_EQ_U(differ(g, keep ? gr : g0, n), 0);
                        if (sigmas[sg] > 0) {   /* the noise is in the update: σ = 0 from the same start moves p elsewhere */
                            const DpNoise quiet = { 0.0, nz.max_grad_norm, nz.logical_batch, nz.seed, nz.step };
                            memcpy(pq, p0, n * sizeof *p0);
                            dp_noisy_adamw(pq, g0, m0, v0, n, offsets[o], &quiet, &opt, 0, th);
                            CHECK(differ(pq, p, n) >= n / 2);   /* ~89 %: the rest round to the same float */
                        }
                        cases++;
                        free(buf);
                    }
        kbackend_destroy(&cpu);
    }
    printf("dp_noisy_adamw: %zu cases (sizes 1..70001, offsets 0..1000003, sigma 0 and 1.1, 1 and 3 threads)\n", cases);
    return check_exit("test_dp_update");
}
