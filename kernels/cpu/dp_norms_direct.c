/* dp_norms_direct.c — per-sample gradient norms by materializing each sample's gradient (Opacus's
   "hooks" mode): linear layers (one GEMM per sample), the embedding (rows scattered into a [V, C]
   slice per sample) and RMSNorm weights (a [C] vector per sample). The materialized gradients stay
   in the caller's buffer so that the clipped sum can be formed from them (dp_clipped_sum).
   Not here: the Gram-matrix methods (dp_norms_ghost.c, dp_norms_flash.c). */
#include "dp_kernels.h"
#include "cpu/vmath.h"

#include <cblas.h>
#include <string.h>

/* Σ x² in double (the norms feed a sqrt and a clip: float accumulation over millions of terms
   would lose digits that the tests check). */
KCPU_CLONES
static double sumsq(const float *x, size_t n) { return kdot_f64(x, x, n); }

size_t dp_linear_direct_floats(int B, int IC, int OC) { return (size_t)B * OC * IC; }

void dp_linear_norms_direct_split(float *norm2, float *first, float *rest, const float *a, const float *g,
                                  int B, int T, int IC, int OC, DpIO *io) {
    size_t per = (size_t)OC * IC;
    /* Samples in parallel: each writes its own slice and its own norm. (The trainer runs OpenBLAS on
       one thread and parallelizes around it; without this loop the DP work used one core of two.) */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (B > 1)
#endif
    for (int b = 0; b < B; b++) {
        float *p = b == 0 ? first : rest + (size_t)(b - 1) * per;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, T, 1.0f,
                    g + (size_t)b * T * OC, OC, a + (size_t)b * T * IC, IC, 0.0f, p, IC);
        norm2[b] += (float)sumsq(p, per);
    }
    if (io) {
        io->read += (uint64_t)B * T * (IC + OC) * 4 + (uint64_t)B * per * 4;   /* operands, then psg for the sum of squares */
        io->written += (uint64_t)B * per * 4 + (uint64_t)B * 4;
    }
}

void dp_linear_norms_direct(float *norm2, float *psg, const float *a, const float *g,
                            int B, int T, int IC, int OC, DpIO *io) {
    dp_linear_norms_direct_split(norm2, psg, psg + (size_t)OC * IC, a, g, B, T, IC, OC, io);
}

void dp_embedding_norms_direct(float *norm2, float *psg, const int *tokens, const float *g,
                               int B, int T, int C, int V) {
    size_t per = (size_t)V * C;
    for (int b = 0; b < B; b++) {
        float *p = psg + b * per;
        memset(p, 0, per * sizeof *p);
        for (int t = 0; t < T; t++) {
            float *row = p + (size_t)tokens[b * T + t] * C;
            const float *gt = g + ((size_t)b * T + t) * C;
            for (int i = 0; i < C; i++) row[i] += gt[i];
        }
        norm2[b] += (float)sumsq(p, per);
    }
}

/* Samples in parallel (each its own slice and norm), each row in vector lanes. */
KCPU_CLONES
void dp_rmsnorm_norms_direct(float *norm2, float *psg, const float *dout, const float *inp,
                             const float *rstd, int B, int T, int C) {
    KCPU_PRAGMA(omp parallel for schedule(static) if (B > 1 && (size_t)T * C >= 65536))
    for (int b = 0; b < B; b++) {
        float *p = psg + (size_t)b * C;
        memset(p, 0, (size_t)C * sizeof *p);
        for (int t = 0; t < T; t++) {
            const float *dy = dout + ((size_t)b * T + t) * C, *x = inp + ((size_t)b * T + t) * C;
            const float r = rstd[b * T + t];
            KCPU_PRAGMA(omp simd)
            for (int i = 0; i < C; i++) p[i] += dy[i] * x[i] * r;
        }
        norm2[b] += (float)sumsq(p, (size_t)C);
    }
}
