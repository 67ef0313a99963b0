/* dp_norms_direct.c — per-sample gradient norms by materializing each sample's gradient (Opacus's
   "hooks" mode): linear layers (one GEMM per sample), the embedding (rows scattered into a [V, C]
   slice per sample) and RMSNorm weights (a [C] vector per sample). The materialized gradients stay
   in the caller's buffer so that the clipped sum can be formed from them (dp_clipped_sum).
   Not here: the Gram-matrix methods (dp_norms_ghost.c, dp_norms_flash.c). */
#include "dp_kernels.h"
#include "cpu/vmath.h"

#include <cblas.h>
#include <stdlib.h>
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

/* Which positions of a sequence hold the first occurrence of their token: an array of T flags
   (malloc'd; NULL when out of host memory, and then is_first scans back instead). */
static unsigned char *first_occurrences(const int *tokens, int T, int V) {
    uint64_t *seen = calloc(((size_t)V + 63) / 64, sizeof *seen);
    unsigned char *first = malloc((size_t)T);
    if (!seen || !first) { free(seen); free(first); return NULL; }
    for (int t = 0; t < T; t++) {
        const int v = tokens[t];
        const uint64_t bit = (uint64_t)1 << (v & 63);
        first[t] = !(seen[v >> 6] & bit);
        seen[v >> 6] |= bit;
    }
    free(seen);
    return first;
}

static int is_first(const unsigned char *first, const int *tokens, int t) {
    if (first) return first[t];
    for (int s = 0; s < t; s++) if (tokens[s] == tokens[t]) return 0;
    return 1;
}

/* Samples in parallel, each in its own slice: its tokens' rows zeroed, summed into, then squared
   once each. A slice is V·C floats of which at most T rows are the gradient's nonzero ones; the
   rest is neither written nor read (the dense form zeroed and read 4·V·C bytes per sample: most of
   direct's embedding time, and page faults on fresh memory). */
KCPU_CLONES
void dp_embedding_norms_direct(float *norm2, float *psg, const int *tokens, const float *g,
                               int B, int T, int C, int V) {
    const size_t per = (size_t)V * C;
    KCPU_PRAGMA(omp parallel for schedule(static) if (B > 1))
    for (int b = 0; b < B; b++) {
        float *p = psg + b * per;
        const int *tok = tokens + (size_t)b * T;
        unsigned char *first = first_occurrences(tok, T, V);
        for (int t = 0; t < T; t++) if (is_first(first, tok, t)) memset(p + (size_t)tok[t] * C, 0, (size_t)C * sizeof *p);
        for (int t = 0; t < T; t++) {
            float *row = p + (size_t)tok[t] * C;
            const float *gt = g + ((size_t)b * T + t) * C;
            KCPU_PRAGMA(omp simd)
            for (int i = 0; i < C; i++) row[i] += gt[i];
        }
        double n2 = 0;
        for (int t = 0; t < T; t++) if (is_first(first, tok, t)) n2 += sumsq(p + (size_t)tok[t] * C, (size_t)C);
        norm2[b] += (float)n2;
        free(first);
    }
}

KCPU_CLONES
void dp_embedding_clipped_sum_direct(float *grad, const float *psg, const int *tokens, const float *c,
                                     int B, int T, int C, int V) {
    const size_t per = (size_t)V * C;
    for (int b = 0; b < B; b++) {
        if (c[b] == 0) continue;                 /* dropped: its rows may hold NaN */
        const int *tok = tokens + (size_t)b * T;
        unsigned char *first = first_occurrences(tok, T, V);
        const float cb = c[b];
        /* rows in parallel: distinct within a sample, so no two threads write one row */
        KCPU_PRAGMA(omp parallel for schedule(static) if ((size_t)T * C >= 65536))
        for (int t = 0; t < T; t++) {
            if (!is_first(first, tok, t)) continue;
            float *dst = grad + (size_t)tok[t] * C;
            const float *src = psg + b * per + (size_t)tok[t] * C;
            KCPU_PRAGMA(omp simd)
            for (int i = 0; i < C; i++) dst[i] += cb * src[i];
        }
        free(first);
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
