/* dp_norms_flash.c — the ghost norm of a linear layer computed tile by tile ("flash" ghost norms),
   and the mixed rule that picks between the Gram path and direct per-sample gradients.

   Time is cut into blocks of R steps. For blocks i ≥ j the tile pair (a_i a_jᵀ, g_i g_jᵀ), R×R each,
   is formed, multiplied elementwise and summed; diagonal tiles count once, off-diagonal ones twice
   (the Gram matrices are symmetric). Only one tile pair ever exists: memory 2R² floats whatever T.
   The IO figure assumes the GPU schedule this mirrors: for each row i, block i of a and g is read
   once and kept on chip, each block j ≤ i is streamed in; tiles never leave the chip; only the B
   norms are written. Not here: a fused GPU kernel (kernels/cuda). */
#include "dp_kernels.h"

#include <cblas.h>

int dp_mixed_uses_gram(int T, int IC, int OC) { return 2.0 * T * T <= (double)IC * OC; }

size_t dp_linear_flash_floats(int T, int R) {
    size_t r = (size_t)(R < T ? R : T);
    return 2 * r * r;
}

void dp_linear_norms_flash(float *norm2, float *tile, const float *a, const float *g,
                           int B, int T, int IC, int OC, int R, DpIO *io) {
    if (R > T) R = T;
    if (R < 1) R = 1;
    float *ta = tile, *tg = tile + (size_t)R * R;
    uint64_t rd = 0;
    for (int b = 0; b < B; b++) {
        const float *ab = a + (size_t)b * T * IC, *gb = g + (size_t)b * T * OC;
        double s = 0;
        for (int i0 = 0; i0 < T; i0 += R) {
            int ri = T - i0 < R ? T - i0 : R;
            rd += (uint64_t)ri * (IC + OC) * 4;
            for (int j0 = 0; j0 <= i0; j0 += R) {
                int rj = T - j0 < R ? T - j0 : R;
                if (j0 != i0) rd += (uint64_t)rj * (IC + OC) * 4;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri, rj, IC, 1.0f,
                            ab + (size_t)i0 * IC, IC, ab + (size_t)j0 * IC, IC, 0.0f, ta, rj);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri, rj, OC, 1.0f,
                            gb + (size_t)i0 * OC, OC, gb + (size_t)j0 * OC, OC, 0.0f, tg, rj);
                double st = 0;
                for (int k = 0; k < ri * rj; k++) st += (double)ta[k] * tg[k];
                s += (i0 == j0 ? 1.0 : 2.0) * st;
            }
        }
        norm2[b] += (float)s;
    }
    if (io) { io->read += rd; io->written += (uint64_t)B * 4; }
}
