/* test_dp_norms.c — the per-sample norm and clipping kernels (kernels/cpu/dp_*.c) against
   per-sample references computed in double precision, on odd shapes and several seeds.

   Tolerance (why it is not arbitrary): every method computes sums of products of the float inputs.
   With u = 2⁻²⁴ and K the longest such sum, the standard forward error bound of a float dot product
   is K·u·Σ|terms|. For a linear layer the absolute-value version of the quantity,
       M = Σ_{o,i} (Σ_t |g_to||a_ti|)² = Σ_{t,s} (|a_t|·|a_s|)(|g_t|·|g_s|),
   bounds both the direct route (the psg entries, then their squares) and the Gram route (the Gram
   entries, then their products), so |computed − exact| ≤ 2(T + IC + OC + 4)·u·M for all of them.
   The same argument with the embedding's and RMSNorm's sums gives their bounds. The data have a
   non-zero mean so that the off-diagonal Gram terms carry real weight: counting an off-diagonal
   tile once instead of twice, or skipping one, misses by orders of magnitude more than the bound.

   Also checked: the psg of direct equal the reference per-sample gradients (the embedding's: the
   rows of its tokens, the others left as they were, and its sum over those rows equal to the dense
   sum bit for bit); ghost's Gram buffers
   hold a_b a_bᵀ and g_b g_bᵀ; the IO counts follow their documented formulas; the mixed rule's
   boundary; clip factors; Σ_b c_b g_b by book-keeping and from psg against the reference; with a
   huge C it is the ordinary gradient; a NaN norm drops its sample; a tied matrix's cross term
   2⟨e_b, h_b⟩ and both routes to ‖e_b + h_b‖² against e_b and h_b formed in double. */
#include "dp_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

static uint64_t rng_state;
static float frand(void) {               /* xorshift64*, uniform in [-1, 1) */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return (float)((rng_state * 0x2545F4914F6CDD1Dull >> 40) / 8388608.0 - 1.0);
}
static void fill(float *x, size_t n, float mean) { for (size_t i = 0; i < n; i++) x[i] = mean + frand(); }
static void *xcalloc(size_t n, size_t s) {
    void *p = calloc(n ? n : 1, s);
    if (!p) { printf("FAIL: out of memory\n"); exit(1); }
    return p;
}
static const double U = 1.0 / 16777216.0;

/* Double-precision per-sample gradients of a linear layer, ref [B, OC, IC], their squared norms, and
   the error scale M of each sample. */
static void linear_reference(double *ref, double *norm2, double *M, const float *a, const float *g,
                             int B, int T, int IC, int OC) {
    for (int b = 0; b < B; b++) {
        norm2[b] = 0; M[b] = 0;
        for (int o = 0; o < OC; o++)
            for (int i = 0; i < IC; i++) {
                double s = 0, sa = 0;
                for (int t = 0; t < T; t++) {
                    double x = (double)g[((size_t)b * T + t) * OC + o] * a[((size_t)b * T + t) * IC + i];
                    s += x; sa += fabs(x);
                }
                ref[((size_t)b * OC + o) * IC + i] = s;
                norm2[b] += s * s; M[b] += sa * sa;
            }
    }
}

static void test_linear(int B, int T, int IC, int OC, uint64_t seed, float mean) {
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    float *a = xcalloc((size_t)B * T * IC, 4), *g = xcalloc((size_t)B * T * OC, 4);
    fill(a, (size_t)B * T * IC, mean); fill(g, (size_t)B * T * OC, -0.5f * mean);
    double *ref = xcalloc((size_t)B * OC * IC, 8), *rn = xcalloc(B, 8), *M = xcalloc(B, 8);
    linear_reference(ref, rn, M, a, g, B, T, IC, OC);
    float *norm2 = xcalloc(B, 4);
    char what[96];

    /* direct */
    float *psg = xcalloc(dp_linear_direct_floats(B, IC, OC), 4);
    for (int b = 0; b < B; b++) norm2[b] = 1.0f;          /* the kernels add: start from 1 */
    DpIO io = { 0, 0 };
    dp_linear_norms_direct(norm2, psg, a, g, B, T, IC, OC, &io);
    for (int b = 0; b < B; b++) {
        double tol = 2.0 * (T + IC + OC + 4) * U * M[b] + 1.0 * U;
        CHECK(fabs(norm2[b] - 1.0 - rn[b]) <= tol + 2 * U * (1 + rn[b]),
              "direct B%d T%d IC%d OC%d seed %llu b%d: %.9g vs %.9g (tol %.3g)", B, T, IC, OC,
              (unsigned long long)seed, b, norm2[b] - 1.0, rn[b], tol);
        double worst = 0;
        for (size_t k = 0; k < (size_t)OC * IC; k++) {
            double e = fabs(psg[b * (size_t)OC * IC + k] - ref[b * (size_t)OC * IC + k]);
            if (e > worst) worst = e;
        }
        CHECK(worst <= (T + 2) * U * T * (1 + fabs(mean)) * (1 + 0.5 * fabs(mean)) * 2,
              "direct psg of sample %d off by %.3g", b, worst);
    }
    CHECK(io.read == (uint64_t)B * T * (IC + OC) * 4 + (uint64_t)B * OC * IC * 4 &&
          io.written == (uint64_t)B * OC * IC * 4 + (uint64_t)B * 4, "direct IO %llu/%llu",
          (unsigned long long)io.read, (unsigned long long)io.written);

    /* ghost */
    float *gram = xcalloc(dp_linear_ghost_floats(B, T), 4);
    memset(norm2, 0, (size_t)B * 4);
    io = (DpIO){ 0, 0 };
    dp_linear_norms_ghost(norm2, gram, a, g, B, T, IC, OC, &io);
    for (int b = 0; b < B; b++) {
        double tol = 2.0 * (T + IC + OC + 4) * U * M[b];
        snprintf(what, sizeof what, "ghost B%d T%d IC%d OC%d seed %llu b%d", B, T, IC, OC, (unsigned long long)seed, b);
        CHECK(fabs(norm2[b] - rn[b]) <= tol, "%s: %.9g vs %.9g (tol %.3g)", what, norm2[b], rn[b], tol);
        /* the Gram buffers hold a_b a_bᵀ and g_b g_bᵀ: spot-check entry (T-1, 0) */
        double aa = 0, gg = 0;
        for (int i = 0; i < IC; i++) aa += (double)a[((size_t)b * T + T - 1) * IC + i] * a[(size_t)b * T * IC + i];
        for (int o = 0; o < OC; o++) gg += (double)g[((size_t)b * T + T - 1) * OC + o] * g[(size_t)b * T * OC + o];
        float *aat = gram + (size_t)b * T * T, *ggt = gram + ((size_t)B + b) * T * T;
        CHECK(fabs(aat[(size_t)(T - 1) * T] - aa) <= 2 * IC * U * IC * 4 && fabs(ggt[(size_t)(T - 1) * T] - gg) <= 2 * OC * U * OC * 4,
              "%s: Gram entries %g %g, want %g %g", what, aat[(size_t)(T - 1) * T], ggt[(size_t)(T - 1) * T], aa, gg);
    }
    CHECK(io.read == (uint64_t)B * T * (IC + OC) * 4 + 2ull * B * T * T * 4 && io.written == 2ull * B * T * T * 4 + (uint64_t)B * 4,
          "ghost IO %llu/%llu", (unsigned long long)io.read, (unsigned long long)io.written);

    /* flash, for several tile sizes (1, uneven, exact divisor, ≥ T), on 1 and 3 threads: the rows
       are summed per sample in a fixed order, so the thread count must not change a bit */
    const int tiles[] = { 1, 4, 5, 16, T, T + 9 };
    for (int k = 0; k < 6; k++) {
        int R = tiles[k];
        float *n1 = xcalloc(B, 4);
        for (int nt = 1; nt <= 3; nt += 2) {
            float *tile = xcalloc(dp_linear_flash_floats(B, T, R, nt), 4);
            memset(norm2, 0, (size_t)B * 4);
            io = (DpIO){ 0, 0 };
            dp_linear_norms_flash(norm2, tile, a, g, B, T, IC, OC, R, nt, &io);
            for (int b = 0; b < B; b++) {
                double tol = 2.0 * (T + IC + OC + 4) * U * M[b];
                CHECK(fabs(norm2[b] - rn[b]) <= tol, "flash R%d nt%d B%d T%d IC%d OC%d seed %llu b%d: %.9g vs %.9g (tol %.3g)",
                      R, nt, B, T, IC, OC, (unsigned long long)seed, b, norm2[b], rn[b], tol);
            }
            if (nt == 1) memcpy(n1, norm2, (size_t)B * 4);
            else CHECK(!memcmp(n1, norm2, (size_t)B * 4), "flash R%d: 3 threads changed the norms (%.9g vs %.9g)", R, norm2[0], n1[0]);
            /* documented IO: row i reads block i and every block j < i */
            uint64_t want = 0;
            int r = R < T ? R : T;
            for (int i0 = 0; i0 < T; i0 += r) want += (uint64_t)(i0 + (T - i0 < r ? T - i0 : r)) * (IC + OC) * 4;
            CHECK(io.read == (uint64_t)B * want && io.written == (uint64_t)B * 4, "flash R%d IO %llu, want %llu",
                  R, (unsigned long long)io.read, (unsigned long long)(B * want));
            free(tile);
        }
        free(n1);
    }

    /* clipping: C at the median-ish norm so that some samples clip and some do not */
    double Csq = 0;
    for (int b = 0; b < B; b++) Csq += rn[b] / B;
    float C = (float)sqrt(Csq);
    for (int pass = 0; pass < 2; pass++) {
        float Cuse = pass ? 1e30f : C;
        float *c = xcalloc(B, 4);
        for (int b = 0; b < B; b++) norm2[b] = (float)rn[b];
        dp_clip_factors(c, norm2, B, Cuse);
        for (int b = 0; b < B; b++) {
            double want = fmin(1.0, Cuse / (sqrt((double)norm2[b]) + 1e-6));
            CHECK(fabs(c[b] - want) <= 1e-6 * want, "clip factor %d: %g vs %g", b, c[b], want);
        }
        if (!pass) {
            int clipped = 0;
            for (int b = 0; b < B; b++) clipped += c[b] < 1;
            if (B > 1) CHECK(clipped > 0 && clipped < B, "C=%g should clip some samples, not all (%d of %d)", C, clipped, B);
        }
        float *dw = xcalloc((size_t)OC * IC, 4), *dw2 = xcalloc((size_t)OC * IC, 4);
        dp_linear_clipped_grad_bk(dw, a, g, c, B, T, IC, OC);
        dp_clipped_sum(dw2, psg, c, B, (size_t)OC * IC);
        /* book-keeping's split: sample 0's gradient written into the (zero) dW, the rest apart; the
           norms, the slices and the clipped sum must be bit for bit those of the contiguous route */
        {
            size_t per = (size_t)OC * IC;
            float *dw3 = xcalloc(per, 4), *rest = xcalloc(per * (B > 1 ? B - 1 : 1), 4), *n3 = xcalloc(B, 4), *n4 = xcalloc(B, 4);
            dp_linear_norms_direct(n4, psg, a, g, B, T, IC, OC, NULL);
            dp_linear_norms_direct_split(n3, dw3, rest, a, g, B, T, IC, OC, NULL);
            CHECK(!memcmp(n3, n4, (size_t)B * 4) && !memcmp(dw3, psg, per * 4) &&
                  (B == 1 || !memcmp(rest, psg + per, per * (B - 1) * 4)), "direct split: norms or slices differ");
            dp_clipped_sum_first(dw3, rest, c, B, per);
            CHECK(!memcmp(dw3, dw2, per * 4), "clipped sum with sample 0 in dW differs from the plain one (%g vs %g)", dw3[0], dw2[0]);
            free(dw3); free(rest); free(n3); free(n4);
        }
        double worst = 0, worst2 = 0, scale = 0;
        for (size_t k = 0; k < (size_t)OC * IC; k++) {
            double want = 0;
            for (int b = 0; b < B; b++) want += c[b] * ref[b * (size_t)OC * IC + k];
            worst = fmax(worst, fabs(dw[k] - want)); worst2 = fmax(worst2, fabs(dw2[k] - want));
            scale = fmax(scale, fabs(want));
        }
        double tol = 4.0 * (B * T + 4) * U * T * (1 + fabs(mean)) * (1 + fabs(mean));
        CHECK(worst <= tol && worst2 <= tol, "clipped sum (C=%g): bk off by %.3g, from psg off by %.3g (tol %.3g, scale %.3g)",
              Cuse, worst, worst2, tol, scale);
        free(c); free(dw); free(dw2);
    }
    free(a); free(g); free(ref); free(rn); free(M); free(norm2); free(psg); free(gram);
}

static void test_embedding(int B, int T, int C, int V, uint64_t seed) {
    rng_state = seed * 0x9E3779B97F4A7C15ull + 7;
    int *tok = xcalloc((size_t)B * T, sizeof(int));
    for (int k = 0; k < B * T; k++) tok[k] = (int)((frand() + 1) * 0.5f * V) % V;
    float *g = xcalloc((size_t)B * T * C, 4);
    fill(g, (size_t)B * T * C, 0.3f);
    float *n1 = xcalloc(B, 4), *n2 = xcalloc(B, 4), *psg = xcalloc((size_t)B * V * C, 4), *c = xcalloc(B, 4);
    for (size_t k = 0; k < (size_t)B * V * C; k++) psg[k] = NAN;   /* rows no token touches must stay so */
    DpIO io = { 0, 0 };
    dp_embedding_norms(n1, tok, g, B, T, C, &io);
    dp_embedding_norms_direct(n2, psg, tok, g, B, T, C, V);
    /* the same slices with the untouched rows zero: the dense gradient, for the dense sum */
    float *dense = xcalloc((size_t)B * V * C, 4);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t row = ((size_t)b * V + tok[b * T + t]) * C;
            memcpy(dense + row, psg + row, (size_t)C * 4);
        }
    double *ref = xcalloc((size_t)V * C, 8);
    for (int b = 0; b < B; b++) {
        double *abs_ = xcalloc((size_t)V * C, 8);
        memset(ref, 0, (size_t)V * C * 8);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++) {
                ref[(size_t)tok[b * T + t] * C + i] += g[((size_t)b * T + t) * C + i];
                abs_[(size_t)tok[b * T + t] * C + i] += fabs(g[((size_t)b * T + t) * C + i]);
            }
        double rn = 0, M = 0, worst = 0;
        int untouched_written = 0;
        for (size_t k = 0; k < (size_t)V * C; k++) {
            rn += ref[k] * ref[k]; M += abs_[k] * abs_[k];
            int touched = 0;
            for (int t = 0; t < T && !touched; t++) touched = (size_t)tok[b * T + t] == k / C;
            if (touched) worst = fmax(worst, fabs(psg[(size_t)b * V * C + k] - ref[k]));
            else untouched_written += !isnan(psg[(size_t)b * V * C + k]);
        }
        CHECK(untouched_written == 0, "embedding direct wrote %d values of sample %d's rows that no token touches", untouched_written, b);
        double tol = 2.0 * (T + C + 4) * U * M;
        CHECK(fabs(n1[b] - rn) <= tol && fabs(n2[b] - rn) <= tol, "embedding B%d T%d C%d V%d b%d: %.9g, direct %.9g, want %.9g (tol %.3g)",
              B, T, C, V, b, n1[b], n2[b], rn, tol);
        CHECK(worst <= T * U * T * 2, "embedding psg of sample %d off by %.3g", b, worst);
        free(abs_);
    }
    /* book-keeping scatter with factors vs the psg sum */
    for (int b = 0; b < B; b++) c[b] = (b + 1.0f) / (B + 1.0f);
    float *d1 = xcalloc((size_t)V * C, 4), *d2 = xcalloc((size_t)V * C, 4);
    float *d3 = xcalloc((size_t)V * C, 4);
    dp_embedding_clipped_grad_bk(d1, tok, g, c, B, T, C);
    dp_embedding_clipped_sum_direct(d2, psg, tok, c, B, T, C, V);
    dp_clipped_sum(d3, dense, c, B, (size_t)V * C);
    double worst = 0;
    int same = 1;
    for (size_t k = 0; k < (size_t)V * C; k++) { worst = fmax(worst, fabs(d1[k] - d2[k])); same &= d2[k] == d3[k]; }
    CHECK(worst <= 4 * B * T * U * T * 2, "embedding bk vs psg sum off by %.3g", worst);
    CHECK(same, "embedding psg sum over the touched rows differs from the dense sum");
    /* a dropped sample (c = 0) with a NaN gradient leaves no trace: the sum of the others */
    if (B > 1) {
        memset(d1, 0, (size_t)V * C * 4); memset(d2, 0, (size_t)V * C * 4);
        c[0] = 0;
        for (size_t k = 0; k < (size_t)V * C; k++) psg[k] = NAN;   /* sample 0's slice (the first): all NaN */
        dp_embedding_clipped_sum_direct(d2, psg, tok, c, B, T, C, V);
        for (size_t k = 0; k < (size_t)T * C; k++) g[k] = NAN;   /* sample 0's rows */
        dp_embedding_clipped_grad_bk(d1, tok, g, c, B, T, C);
        int finite = 1;
        worst = 0;
        for (size_t k = 0; k < (size_t)V * C; k++) { finite &= isfinite(d1[k]) != 0; worst = fmax(worst, fabs(d1[k] - d2[k])); }
        CHECK(finite && worst <= 4 * B * T * U * T * 2, "embedding bk with a dropped NaN sample: finite %d, off by %.3g", finite, worst);
    }
    free(tok); free(g); free(n1); free(n2); free(psg); free(c); free(ref); free(d1); free(d2); free(d3); free(dense);
}

static void test_rmsnorm(int B, int T, int C, uint64_t seed) {
    rng_state = seed * 0x9E3779B97F4A7C15ull + 11;
    float *dout = xcalloc((size_t)B * T * C, 4), *inp = xcalloc((size_t)B * T * C, 4), *rstd = xcalloc((size_t)B * T, 4);
    fill(dout, (size_t)B * T * C, 0.2f); fill(inp, (size_t)B * T * C, -0.4f); fill(rstd, (size_t)B * T, 2.0f);
    float *n = xcalloc(B, 4), *psg = xcalloc((size_t)B * C, 4);
    dp_rmsnorm_norms_direct(n, psg, dout, inp, rstd, B, T, C);
    for (int b = 0; b < B; b++) {
        double rn = 0, M = 0;
        for (int i = 0; i < C; i++) {
            double s = 0, sa = 0;
            for (int t = 0; t < T; t++) {
                size_t k = ((size_t)b * T + t) * C + i;
                double x = (double)dout[k] * inp[k] * rstd[b * T + t];
                s += x; sa += fabs(x);
            }
            rn += s * s; M += sa * sa;
            CHECK(fabs(psg[(size_t)b * C + i] - s) <= (T + 4) * U * sa, "rmsnorm psg b%d i%d: %g vs %g", b, i, psg[(size_t)b * C + i], s);
        }
        CHECK(fabs(n[b] - rn) <= 2.0 * (T + C + 4) * U * M, "rmsnorm norm b%d: %.9g vs %.9g", b, n[b], rn);
    }
    free(dout); free(inp); free(rstd); free(n); free(psg);
}

/* Tied embeddings: e_b (tokens, gE) and h_b = dlogits_bᵀ a_b [V, C] formed in double; the kernels'
   cross term 2⟨e_b, h_b⟩ (u = D·A at tile sizes R = T (whole), 5 and 1, on 1 and 2 threads: the same
   bits), ‖e_b + h_b‖² from the norms of both parts plus it, and the direct route's ‖psg‖². */
static void test_tied(int B, int T, int C, int V, uint64_t seed) {
    rng_state = seed * 0x9E3779B97F4A7C15ull + 13;
    int *tok = xcalloc((size_t)B * T, sizeof(int));
    for (int k = 0; k < B * T; k++) tok[k] = (int)((frand() + 1) * 0.5f * V) % V;
    float *gE = xcalloc((size_t)B * T * C, 4), *lg = xcalloc((size_t)B * T * V, 4), *a = xcalloc((size_t)B * T * C, 4);
    fill(gE, (size_t)B * T * C, 0.2f); fill(lg, (size_t)B * T * V, -0.1f); fill(a, (size_t)B * T * C, 0.4f);
    float *u = xcalloc((size_t)B * T * C, 4), *u2 = xcalloc((size_t)B * T * C, 4);
    float *scratch = xcalloc(dp_tied_cross_floats(T, T, 2), 4);
    const int tiles[3] = { T, 5, 1 };
    dp_tied_cross_u(u, scratch, tok, lg, a, B, T, C, V, T, 1, NULL);
    for (int k = 0; k < 3; k++)
        for (int nt = 1; nt <= 2; nt++) {
            dp_tied_cross_u(u2, scratch, tok, lg, a, B, T, C, V, tiles[k], nt, NULL);
            CHECK(memcmp(u, u2, (size_t)B * T * C * 4) == 0 || tiles[k] != T,
                  "tied u with R = T on %d threads differs from one thread", nt);
            double worst = 0;
            for (size_t i = 0; i < (size_t)B * T * C; i++) worst = fmax(worst, fabs(u[i] - u2[i]));
            CHECK(worst <= 4 * T * U * T * 2, "tied u with R = %d, %d threads: off by %.3g from R = T", tiles[k], nt, worst);
        }
    double *e = xcalloc((size_t)V * C, 8), *h = xcalloc((size_t)V * C, 8);
    float *n_cross = xcalloc(B, 4), *n_sum = xcalloc(B, 4), *n_psg = xcalloc(B, 4), *psg = xcalloc((size_t)B * V * C, 4);
    dp_tied_cross_dot(n_cross, gE, u, B, T, C, NULL);
    dp_embedding_norms(n_sum, tok, gE, B, T, C, NULL);
    dp_linear_norms_direct(n_sum, psg, a, lg, B, T, C, V, NULL);        /* psg := h_b, n_sum += ‖h_b‖² */
    for (int b = 0; b < B; b++)                                         /* psg += e_b: the direct route */
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++) psg[(size_t)b * V * C + (size_t)tok[b * T + t] * C + i] += gE[((size_t)b * T + t) * C + i];
    dp_psg_norms(n_psg, psg, B, (size_t)V * C);
    for (int b = 0; b < B; b++) {
        memset(e, 0, (size_t)V * C * 8); memset(h, 0, (size_t)V * C * 8);
        double M = 0;
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            for (int i = 0; i < C; i++) e[(size_t)tok[r] * C + i] += gE[r * C + i];
            for (int v = 0; v < V; v++)
                for (int i = 0; i < C; i++) h[(size_t)v * C + i] += (double)lg[r * V + v] * a[r * C + i];
        }
        double cross = 0, full = 0;
        for (size_t k = 0; k < (size_t)V * C; k++) {
            cross += e[k] * h[k]; full += (e[k] + h[k]) * (e[k] + h[k]); M += (fabs(e[k]) + fabs(h[k])) * (fabs(e[k]) + fabs(h[k]));
        }
        const double tol = 2.0 * (2 * T + C + V + 4) * U * M;
        CHECK(fabs(n_cross[b] - 2 * cross) <= tol, "tied B%d T%d C%d V%d b%d: cross term %.9g, want %.9g (tol %.3g)",
              B, T, C, V, b, n_cross[b], 2 * cross, tol);
        CHECK(fabs(n_sum[b] + n_cross[b] - full) <= 2 * tol, "tied b%d: ‖e‖²+‖h‖²+2<e,h> = %.9g, want ‖e+h‖² = %.9g",
              b, n_sum[b] + n_cross[b], full);
        CHECK(fabs(n_psg[b] - full) <= tol, "tied b%d: direct ‖psg‖² %.9g, want %.9g", b, n_psg[b], full);
        CHECK(fabs(2 * cross) > 100 * tol, "tied b%d: the cross term %.3g is too small for this check to see it", b, 2 * cross);
    }
    free(tok); free(gE); free(lg); free(a); free(u); free(u2); free(scratch); free(e); free(h);
    free(n_cross); free(n_sum); free(n_psg); free(psg);
}

int main(void) {
    const struct { int B, T, IC, OC; float mean; } shapes[] = {
        { 3, 17, 7, 13, 0.5f }, { 4, 33, 24, 5, 0.3f }, { 3, 33, 16, 16, 0.0f }, { 5, 1, 3, 3, 0.5f },
        { 3, 17, 64, 48, 0.25f }, { 1, 33, 9, 11, 0.5f },
    };
    for (uint64_t seed = 1; seed <= 3; seed++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            test_linear(shapes[s].B, shapes[s].T, shapes[s].IC, shapes[s].OC, seed, shapes[s].mean);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        test_embedding(3, 17, 8, 5, seed);     /* tiny vocabulary: many repeated tokens */
        test_embedding(4, 33, 13, 97, seed);
        test_rmsnorm(3, 17, 12, seed);
        test_rmsnorm(3, 33, 5, seed);
        test_tied(3, 17, 8, 5, seed);          /* tiny vocabulary: many tokens repeat */
        test_tied(2, 33, 12, 23, seed);
    }
    CHECK(dp_tied_cross_floats(1024, 128, 2) == 2 * 128 * 128 && dp_tied_cross_floats(17, 1024, 1) == 17 * 17, "tied scratch sizes");
    /* mixed's choice from the cost at the run's shapes (dp_mixed.c): the cost terms by hand ... */
    DpCost ck = dp_linear_cost(DP_WAY_DIRECT_KEPT, 2, 7, 3, 5, 2), cd = dp_linear_cost(DP_WAY_DIRECT, 2, 7, 3, 5, 2);
    DpCost cg = dp_linear_cost(DP_WAY_GRAM, 2, 7, 3, 5, 2), cgc = dp_linear_cost(DP_WAY_GRAM_COPY_G, 2, 7, 3, 5, 2);
    CHECK(ck.flops == 60 && ck.bytes == 360 && cd.flops == 2 * 2 * 7 * 15 + 60 && cd.bytes == 2 * 7 * 8 * 2 + 2 * 2 * 15 * 4 &&
          cg.flops == 2 * 49 * 8 + 4 * 49 && cg.bytes == 2 * 7 * 8 * 2 + 4 * 49 * 4 && cgc.flops == cg.flops &&
          cgc.bytes == cg.bytes + 2 * 2 * 7 * 5 * 2 && dp_cost_flop_equivalent(ck) == 60 + 270.0 * 360, "mixed's cost terms");
    /* ... and the choice: 1b at T = 4096, physical batch 1, book-keeping, bf16: direct everywhere, lm_head
       (32000x2048) and down (2048x5632) included (the rule 2T² <= IC·OC took flash for lm_head) */
    CHECK(dp_mixed_uses_gram(1, 4096, 2048, 32000, 1, 2) == 0 && dp_mixed_uses_gram(1, 4096, 5632, 2048, 1, 2) == 0,
          "mixed, 1b T=4096 physical batch 1 bk: direct for lm_head and down");
    /* not kept (physical batch 8 at T = 1024, q 2048x2048): the Gram path, T below the width ... */
    CHECK(dp_mixed_uses_gram(8, 1024, 2048, 2048, 0, 2) == 1 && dp_mixed_uses_gram(8, 1024, 2048, 32000, 0, 2) == 1,
          "mixed, 1b T=1024 physical batch 8: flash for q and lm_head");
    /* ... direct where T is well above the width (k: 256x2048 at T = 4096), and a tie goes to direct */
    CHECK(dp_mixed_uses_gram(2, 4096, 2048, 256, 0, 2) == 0 && dp_mixed_uses_gram(4, 64, 64, 64, 0, 4) == 0 &&
          dp_mixed_uses_gram(4, 64, 64, 256, 0, 4) == 1, "mixed, T against the width");
    /* kept at physical batch 1: T tiny against a wide layer (the tiny model's lm_head, 1000x64, at T = 16):
       reading its 64000-float gradient three times costs more than two 16x16 Grams and a copy of G; at
       T = 64 the copy of G tips it back to direct */
    CHECK(dp_mixed_uses_gram(1, 16, 64, 1000, 1, 4) == 1 && dp_mixed_uses_gram(1, 64, 64, 1000, 1, 4) == 0,
          "mixed, tiny T against lm_head's width");
    CHECK(dp_linear_flash_floats(4, 1024, 64, 1) == 2 * 4 * 16 + 2 * 64 * 64 && dp_linear_flash_floats(3, 17, 64, 2) == 2 * 3 + 2 * 2 * 17 * 17 &&
          dp_linear_ghost_floats(4, 1024) == 2ull * 4 * 1024 * 1024 && dp_linear_direct_floats(3, 5, 7) == 105, "scratch sizes");
    /* a non-finite norm drops its sample */
    float nn[3] = { 4.0f, NAN, INFINITY }, cc[3];
    dp_clip_factors(cc, nn, 3, 1.0f);
    CHECK(fabs(cc[0] - 1.0 / (2 + 1e-6)) < 1e-7 && cc[1] == 0 && cc[2] == 0, "non-finite norms: %g %g %g", cc[0], cc[1], cc[2]);
    /* ... also when it is sample 0 and its NaN gradient sits in dW (the split route) */
    float gsplit[2] = { NAN, INFINITY }, rsplit[4] = { 1, 2, 3, 4 }, csplit[3] = { 0, 0.5f, 2 };
    dp_clipped_sum_first(gsplit, rsplit, csplit, 3, 2);
    CHECK(gsplit[0] == 0.5f * 1 + 2 * 3 && gsplit[1] == 0.5f * 2 + 2 * 4, "dropped sample 0 in dW: %g %g", gsplit[0], gsplit[1]);
    if (failures) { printf("%d of %d checks failed\n", failures, checks); return 1; }
    printf("dp norms: %d checks passed\n", checks);
    return 0;
}
