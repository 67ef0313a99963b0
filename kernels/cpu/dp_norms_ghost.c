/* dp_norms_ghost.c — ghost clipping's per-sample norms of a linear layer with both T×T Gram
   matrices materialized for every sample, as Opacus does (`aaT`, `ggT`):
       ‖g_bᵀ a_b‖²_F = Σ_{t,s} (a_t·a_s)(g_t·g_s) = ⟨a_b a_bᵀ, g_b g_bᵀ⟩.
   The point of keeping it in this form is to measure what it costs: 2·B·T² floats of `ghost/...`
   memory per layer, written and read back (the IO figure, as on the GPU). On the CPU each matrix's
   lower triangle is formed (ssyrk: half a product's flops) and the inner product taken from it;
   the buffers stay whole. Not here: the tiled version that avoids the T×T buffers
   (dp_norms_flash.c). */
#include "dp_kernels.h"
#include "cpu/vmath.h"

#include <cblas.h>

size_t dp_linear_ghost_floats(int B, int T) { return 2 * (size_t)B * T * T; }

/* Σ x_k y_k of two Gram rows, in double, in vector lanes. */
KCPU_CLONES
static double gram_dot(const float *x, const float *y, size_t n) { return kdot_f64(x, y, n); }

void dp_linear_norms_ghost(float *norm2, float *gram, const float *a, const float *g,
                           int B, int T, int IC, int OC, DpIO *io) {
    size_t tt = (size_t)T * T;
    float *aat = gram, *ggt = gram + (size_t)B * tt;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (B > 1)
#endif
    for (int b = 0; b < B; b++) {
        const float *ab = a + (size_t)b * T * IC, *gb = g + (size_t)b * T * OC;
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, T, IC, 1.0f, ab, IC, 0.0f, aat + b * tt, T);
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, T, OC, 1.0f, gb, OC, 0.0f, ggt + b * tt, T);
    }
    /* ⟨A, G⟩ of two symmetric matrices from their lower triangles: below the diagonal twice, the
       diagonal once */
    KCPU_PRAGMA(omp parallel for schedule(static) if (B > 1))
    for (int b = 0; b < B; b++) {
        const float *x = aat + b * tt, *y = ggt + b * tt;
        double s = 0;
        for (int t = 0; t < T; t++)
            s += 2.0 * gram_dot(x + (size_t)t * T, y + (size_t)t * T, (size_t)t) + (double)x[(size_t)t * T + t] * y[(size_t)t * T + t];
        norm2[b] += (float)s;
    }
    if (io) {
        io->read += (uint64_t)B * T * (IC + OC) * 4 + 2 * (uint64_t)B * tt * 4;
        io->written += 2 * (uint64_t)B * tt * 4 + (uint64_t)B * 4;
    }
}
