/* dp_norms_embedding.c — per-sample gradient norms of the token embedding without a V-sized
   buffer: row v of sample b's gradient is Σ_{t: tok_t = v} g_t, so
       ‖g_b‖² = Σ_{t,s} [tok_t = tok_s] (g_t·g_s)
   visited as s < t (twice) plus s = t (once). Cost T² token comparisons and one C-long dot per
   matching pair. Not here: the materialized version (dp_norms_direct.c). */
#include "dp_kernels.h"
#include "cpu/vmath.h"

/* Samples in parallel; each matching pair's dot in vector lanes. */
KCPU_CLONES
void dp_embedding_norms(float *norm2, const int *tokens, const float *g, int B, int T, int C, DpIO *io) {
    KCPU_PRAGMA(omp parallel for schedule(dynamic, 1) if (B > 1 && (size_t)T * T >= 65536))
    for (int b = 0; b < B; b++) {
        const int *tok = tokens + (size_t)b * T;
        const float *gb = g + (size_t)b * T * C;
        double s = 0;
        for (int t = 0; t < T; t++) {
            const float *gt = gb + (size_t)t * C;
            for (int u = 0; u <= t; u++) {
                if (tok[u] != tok[t]) continue;
                s += (u == t ? 1.0 : 2.0) * kdot_f64(gt, gb + (size_t)u * C, (size_t)C);
            }
        }
        norm2[b] += (float)s;
    }
    if (io) { io->read += (uint64_t)B * T * (C + 1) * 4; io->written += (uint64_t)B * 4; }
}
