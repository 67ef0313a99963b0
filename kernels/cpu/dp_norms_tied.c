/* dp_norms_tied.c — the cross term of a tied embedding's per-sample norm, without a V×C buffer.

   With tied embeddings (Llama-3.2: lm_head.weight is embed_tokens.weight) one matrix W [V, C] gets
   two per-sample contributions: the embedding's e_b (row v = Σ_{t: tok_t = v} gE_t) and lm_head's
   h_b = dlogits_bᵀ a_b (a = the final norm's output, dlogits = the gradient of the logits). Its
   per-sample gradient is their sum, so
       ‖e_b + h_b‖² = ‖e_b‖² + ‖h_b‖² + 2⟨e_b, h_b⟩,
       ⟨e_b, h_b⟩ = Σ_t gE_t · h_b[tok_t] = Σ_t Σ_s dlogits_s[tok_t] (gE_t · a_s) = Σ_t gE_t · u_t,
   where u_t = Σ_s D[t,s] a_s with D[t,s] = dlogits_s[tok_t]: U = D A, a T×T gather times a T×C
   matrix per sample. lm_head's hook has dlogits and a (it runs first in the backward); the
   embedding's hook, last, has gE. So the first computes U [B, T, C] and keeps it (the size of one
   activation), the second dots it with gE: nothing V-sized per sample. ‖e_b‖² and ‖h_b‖² come from
   the embedding's and the linear layer's own methods.
   D is gathered in R×R tiles (one per thread, as the flash norms); R ≥ T gathers it whole, as the
   ghost method materializes its T×T matrices. Rows of U (sample, time block) are the units of work,
   each written by one thread in a fixed order of column blocks: the result does not depend on nt.
   Not here: the direct route (the two per-sample gradients summed before the norm: samples/dp/dp_norms.c
   with embedding_backward_ex and dp_psg_norms), the GPU twins (kernels/cuda/dp_norms.cu). */
#include "dp_kernels.h"
#include "cpu/vmath.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int clamp_tile(int T, int R) { return R > T ? T : R < 1 ? 1 : R; }

size_t dp_tied_cross_floats(int T, int R, int nt) {
    size_t r = (size_t)clamp_tile(T, R);
    return (size_t)(nt < 1 ? 1 : nt) * r * r;
}

void dp_tied_cross_u(float *u, float *scratch, const int *tokens, const float *dlogits, const float *a,
                     int B, int T, int C, int V, int R, int nt, DpIO *io) {
    R = clamp_tile(T, R);
    if (nt < 1) nt = 1;
    const int nblk = (T + R - 1) / R;
    const long long rows = (long long)B * nblk;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1 && rows > 1)
#endif
    for (long long q = 0; q < rows; q++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *d = scratch + (size_t)tid * R * R;
        const int b = (int)(q % B), i0 = (int)(q / B) * R, ri = T - i0 < R ? T - i0 : R;
        const int *tok = tokens + (size_t)b * T;
        const float *lg = dlogits + (size_t)b * T * V, *ab = a + (size_t)b * T * C;
        float *ub = u + ((size_t)b * T + i0) * C;
        for (int j0 = 0; j0 < T; j0 += R) {
            const int rj = T - j0 < R ? T - j0 : R;
            for (int t = 0; t < ri; t++)                 /* D[t, s] = dlogits_s[tok_t] */
                for (int s = 0; s < rj; s++) d[(size_t)t * rj + s] = lg[(size_t)(j0 + s) * V + tok[i0 + t]];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri, C, rj, 1.0f, d, rj,
                        ab + (size_t)j0 * C, C, j0 ? 1.0f : 0.0f, ub, C);
        }
    }
    /* as on a GPU: every dlogits entry gathered once per time block of t, a read once per block, U written */
    if (io) {
        io->read += (uint64_t)B * nblk * T * 4 + (uint64_t)B * T * (T + 1) * 4 + (uint64_t)B * nblk * T * C * 4;
        io->written += (uint64_t)B * T * C * 4;
    }
}

/* Σ x_k y_k in double, in vector lanes. */
KCPU_CLONES
static double dot_double(const float *x, const float *y, size_t n) { return kdot_f64(x, y, n); }

void dp_tied_cross_dot(float *norm2, const float *g, const float *u, int B, int T, int C, DpIO *io) {
    const size_t n = (size_t)T * C;
    KCPU_PRAGMA(omp parallel for schedule(static) if (B > 1 && n >= 65536))
    for (int b = 0; b < B; b++) norm2[b] += (float)(2.0 * dot_double(g + (size_t)b * n, u + (size_t)b * n, n));
    if (io) { io->read += 2 * (uint64_t)B * n * 4; io->written += (uint64_t)B * 4; }
}

void dp_psg_norms(float *norm2, const float *psg, int B, size_t P) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (B > 1)
#endif
    for (int b = 0; b < B; b++) norm2[b] += (float)dot_double(psg + (size_t)b * P, psg + (size_t)b * P, P);
}
