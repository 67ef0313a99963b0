/* dp_clip.c — from per-sample norms to the clipped summed gradient Σ_b c_b g_b:
   the clip factors, the sum of materialized per-sample gradients (direct), and book-keeping
   (Bu et al. 2023): Σ_b c_b g_bᵀ a_b formed straight from the layer's inputs and output gradients
   kept from the one backward, so no second backward is needed. Not here: noise (kernels/cpu/noise.c),
   two-pass clipping (a second backward with per-sample loss weights c_b, done by the trainer). */
#include "dp_kernels.h"
#include "cpu/vmath.h"

#include <cblas.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void dp_clip_factors(float *c, const float *norm2, int B, float max_norm) {
    for (int b = 0; b < B; b++) {
        /* A sample whose norm is not finite is dropped (c = 0): passing it unclipped would void
           the guarantee, and NaN would poison the whole sum. */
        if (!isfinite(norm2[b])) { c[b] = 0; continue; }
        double f = (double)max_norm / (sqrt(fmax((double)norm2[b], 0.0)) + 1e-6);
        c[b] = (float)(f < 1.0 ? f : 1.0);
    }
}

void dp_clip_factors_safe(float *c, const float *norm2, int B, float max_norm, double rel) {
    for (int b = 0; b < B; b++) {
        if (!isfinite(norm2[b])) { c[b] = 0; continue; }
        double f = (double)max_norm / (sqrt(fmax((double)norm2[b], 0.0)) * (1.0 + rel) + 1e-6);
        if (f >= 1.0) { c[b] = 1.0f; continue; }
        float cf = (float)f;
        c[b] = (double)cf > f ? nextafterf(cf, 0.0f) : cf;   /* rounded down */
    }
}

KCPU_CLONES
void dp_clipped_sum(float *grad, const float *psg, const float *c, int B, size_t P) {
    /* Elements in parallel and in vector lanes; each element still sums its samples in order b = 0, 1, ... */
    KCPU_PRAGMA(omp parallel for simd schedule(static) if (P >= 65536))
    for (size_t k = 0; k < P; k++) {
        float s = grad[k];
        for (int b = 0; b < B; b++)
            if (c[b] != 0) s += c[b] * psg[(size_t)b * P + k];
        grad[k] = s;
    }
}

KCPU_CLONES
void dp_clipped_sum_first(float *grad, const float *rest, const float *c, int B, size_t P) {
    KCPU_PRAGMA(omp parallel for simd schedule(static) if (P >= 65536))
    for (size_t k = 0; k < P; k++) {
        float s = c[0] != 0 ? c[0] * grad[k] : 0.0f;   /* c_0 = 0: sample 0 dropped, even if not finite */
        for (int b = 1; b < B; b++)
            if (c[b] != 0) s += c[b] * rest[(size_t)(b - 1) * P + k];
        grad[k] = s;
    }
}

void dp_linear_clipped_grad_bk(float *dw, const float *a, const float *g, const float *c,
                               int B, int T, int IC, int OC) {
    /* Blocks of output rows in parallel: each block accumulates every sample itself, so no two
       threads write the same row and no reduction buffer is needed. Four blocks per thread, of at
       least 64 rows: each GEMM call packs its sample's A anew, so small blocks on a wide layer
       (lm_head: 500 blocks of 64) cost 20 % more than these. */
    int nt = 1;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    int rows = (OC + 4 * nt - 1) / (4 * nt);
    if (rows < 64) rows = 64;
    const int nblk = (OC + rows - 1) / rows;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nblk > 1)
#endif
    for (int blk = 0; blk < nblk; blk++) {
        int o0 = blk * rows, n = OC - o0 < rows ? OC - o0 : rows;
        for (int b = 0; b < B; b++) {
            if (c[b] == 0) continue;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, IC, T, c[b],
                        g + (size_t)b * T * OC + o0, OC, a + (size_t)b * T * IC, IC, 1.0f, dw + (size_t)o0 * IC, IC);
        }
    }
}

KCPU_CLONES
void dp_embedding_clipped_grad_bk(float *dwte, const int *tokens, const float *g, const float *c,
                                  int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        float cb = c[b];
        if (cb == 0) continue;                   /* a dropped sample: 0 · NaN would still poison the sum */
        for (int t = 0; t < T; t++) {
            float *row = dwte + (size_t)tokens[b * T + t] * C;
            const float *gt = g + ((size_t)b * T + t) * C;
            KCPU_PRAGMA(omp simd)
            for (int i = 0; i < C; i++) row[i] += cb * gt[i];
        }
    }
}
