/* dp_norms_flash.c — the ghost norm of a linear layer computed tile by tile ("flash" ghost norms).

   Time is cut into blocks of R steps. For blocks i ≥ j the tile pair (a_i a_jᵀ, g_i g_jᵀ), R×R each,
   is formed, multiplied elementwise and summed; off-diagonal tiles count twice (the Gram matrices
   are symmetric), and of a diagonal tile only the lower triangle is formed (ssyrk), its entries
   below the diagonal counted twice. No T×T buffer ever exists: each of the nt threads owns one tile
   pair (2R² floats), whatever T.
   Threads: the rows (sample b, block i) are the units of work, biggest first (row i has i+1 tiles);
   each row's sum goes to its own slot and a sample's rows are added in order afterwards, so the norms
   do not depend on the number of threads or on which thread ran which row.
   The IO figure assumes a fused GPU schedule: for each row i, block i of a and g is read once and
   kept on chip, each block j ≤ i is streamed in; tiles never leave the chip; only the B norms are
   written. Not here: the CUDA flash (kernels/cuda/dp_norms.cu: Gram block rows by cuBLAS through
   bounded scratch, which counts its own traffic). */
#include "dp_kernels.h"
#include "cpu/vmath.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int clamp_tile(int T, int R) { return R > T ? T : R < 1 ? 1 : R; }

size_t dp_linear_flash_floats(int B, int T, int R, int nt) {
    size_t r = (size_t)clamp_tile(T, R), blocks = ((size_t)T + r - 1) / r;
    if (nt < 1) nt = 1;
    return 2 * (size_t)B * blocks + (size_t)nt * 2 * r * r;   /* row sums (double), then the tile pairs */
}

/* Σ x_k y_k in double, in vector lanes. */
KCPU_CLONES
static double tile_dot(const float *x, const float *y, int n) { return kdot_f64(x, y, (size_t)n); }

void dp_linear_norms_flash(float *norm2, float *scratch, const float *a, const float *g,
                           int B, int T, int IC, int OC, int R, int nt, DpIO *io) {
    R = clamp_tile(T, R);
    if (nt < 1) nt = 1;
    const int nblk = (T + R - 1) / R;
    const long long rows = (long long)B * nblk;
    double *rowsum = (double *)scratch;                 /* [B, nblk]; kbuf memory is 64-byte aligned */
    float *tiles = scratch + 2 * (size_t)rows;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1 && rows > 1)
#endif
    for (long long q = 0; q < rows; q++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *ta = tiles + (size_t)tid * 2 * R * R, *tg = ta + (size_t)R * R;
        const int b = (int)(q % B), i0 = (nblk - 1 - (int)(q / B)) * R, ri = T - i0 < R ? T - i0 : R;
        const float *ab = a + (size_t)b * T * IC, *gb = g + (size_t)b * T * OC;
        double s = 0;
        for (int j0 = 0; j0 < i0; j0 += R) {   /* below the diagonal: whole tiles, counted twice */
            int rj = T - j0 < R ? T - j0 : R;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri, rj, IC, 1.0f,
                        ab + (size_t)i0 * IC, IC, ab + (size_t)j0 * IC, IC, 0.0f, ta, rj);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri, rj, OC, 1.0f,
                        gb + (size_t)i0 * OC, OC, gb + (size_t)j0 * OC, OC, 0.0f, tg, rj);
            s += 2.0 * tile_dot(ta, tg, ri * rj);
        }
        /* the diagonal tile: its lower triangle only (ssyrk: half the flops of a product), the
           entries below the diagonal twice and the diagonal once */
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, ri, IC, 1.0f, ab + (size_t)i0 * IC, IC, 0.0f, ta, ri);
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, ri, OC, 1.0f, gb + (size_t)i0 * OC, OC, 0.0f, tg, ri);
        for (int t = 0; t < ri; t++)
            s += 2.0 * tile_dot(ta + (size_t)t * ri, tg + (size_t)t * ri, t) + (double)ta[(size_t)t * ri + t] * tg[(size_t)t * ri + t];
        rowsum[(size_t)b * nblk + i0 / R] = s;
    }
    uint64_t rd = 0;
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int i = 0; i < nblk; i++) s += rowsum[(size_t)b * nblk + i];
        norm2[b] += (float)s;
    }
    for (int i0 = 0; i0 < T; i0 += R) rd += (uint64_t)(i0 + (T - i0 < R ? T - i0 : R)) * (IC + OC) * 4;
    if (io) { io->read += (uint64_t)B * rd; io->written += (uint64_t)B * 4; }
}
