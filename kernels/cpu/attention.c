/* attention.c — causal multi-head attention with grouped-query heads, tiled as flash attention in
   blocks of KCPU_ATTN_TILE queries by KCPU_ATTN_TILE keys. Scores are kept keys by queries (Sᵀ = K Qᵀ,
   with the query block transposed once and reused for every key block): every product is then one
   that OpenBLAS runs in its small-matrix kernels at the core's peak (Q Kᵀ on rows of stride NH·HS
   took its packing path at 60-65 % of it), and the online softmax runs down columns, 16 queries per
   vector register. The forward folds each key block into the output block (running max m and
   denominator l per query) and saves only lse = m + log l per row. The backward recomputes
   Pᵀ = exp(Sᵀ - lse) block by block, with the query block and its output gradient transposed once
   per block and D = rowsum(dO ∘ O) computed there, and runs five GEMMs per block pair (Sᵀ, dPᵀ =
   V dOᵀ, dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K). Scratch is a few blocks per thread: nothing of size
   T×T, nor of size T per head, is ever allocated. At medium T=1024 this is 24 % less forward and
   17 % less backward time than the query-major version with 256-key chunks it replaced.
   Layout: q, out [B,T,NH,HS]; k, v [B,T,NKV,HS]; lse [B,NH,T]; scores scaled by 1/sqrt(HS).
   Not here: masks other than causal, dropout, KV cache. The naive T×T version lives in the tests. */
#include "kernels_cpu.h"
#include "vmath.h"
#include <cblas.h>
#include <math.h>
#include <string.h>

#define BQ KCPU_ATTN_TILE   /* queries per block, and keys per block */

/* Xt[d, r] (leading dimension BQ) = X[r, d] for nr rows of stride ld. */
KCPU_INLINE void transpose_block(float *Xt, const float *X, int ld, int nr, int HS) {
    cblas_somatcopy(CblasRowMajor, CblasTrans, nr, HS, 1.0f, X, ld, Xt, BQ);
}

/* St[nc, nr] (leading dimension BQ) = scale * K[nc, HS] Qt[HS, nr], keys by queries; key j0+c > query
   i0+r masked as -inf. */
KCPU_INLINE void scores_t(float *St, const float *K, int ldk, const float *Qt, int nr, int nc, int HS, float scale,
                          int i0, int j0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nc, nr, HS, scale, K, ldk, Qt, BQ, 0.0f, St, BQ);
    for (int c = 0; c < nc; c++) {
        const int r1 = j0 + c - i0;   /* queries r < r1 do not see key c */
        float *s = St + (size_t)c * BQ;
        for (int r = 0; r < (r1 < nr ? r1 : nr); r++) s[r] = -INFINITY;
    }
}

/* Online softmax of w query columns of a block of scores St[nc, ·] (keys by queries, leading dimension
   BQ): each column's running max m and sum l take the block's keys, St becomes exp(St - m), corr =
   exp(old m - new m) rescales what came before. Returns whether any corr differs from 1. Called with
   w = 16 (a constant: the running values stay in registers) or the tail. */
KCPU_INLINE int softmax_columns(float *St, float *m, float *l, float *corr, int nc, int w) {
    float mx[16], sum[16];
    for (int r = 0; r < w; r++) { mx[r] = m[r]; sum[r] = 0.0f; }
    for (int c = 0; c < nc; c++) {
        const float *s = St + (size_t)c * BQ;
        #pragma omp simd
        for (int r = 0; r < w; r++) mx[r] = s[r] > mx[r] ? s[r] : mx[r];
    }
    for (int c = 0; c < nc; c++) {
        float *s = St + (size_t)c * BQ;
        #pragma omp simd
        for (int r = 0; r < w; r++) { s[r] = kexpf(s[r] - mx[r]); sum[r] += s[r]; }
    }
    int any = 0;
    for (int r = 0; r < w; r++) {
        corr[r] = expf(m[r] - mx[r]);   /* 0 on the first block: m = -inf */
        l[r] = l[r] * corr[r] + sum[r];
        m[r] = mx[r];
        any |= corr[r] != 1.0f;
    }
    return any;
}

KCPU_CLONES
void attention_forward_cpu(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                           int B, int T, int NH, int NKV, int HS, void *scratch) {
    const int group = NH / NKV, nblk = (T + BQ - 1) / BQ;
    const float scale = 1.0f / sqrtf((float)HS);
    const int qs = NH * HS, ks = NKV * HS;
    float *ws = scratch;   /* per thread: O, Qᵀ, Sᵀ, m, l, corr (kcpu_scratch_bytes) */
    const size_t per_thread = 2 * (size_t)BQ * HS + (size_t)BQ * BQ + 3 * BQ;
    #pragma omp parallel for num_threads(b->nthreads) collapse(3) schedule(dynamic, 1) if(KCPU_PARALLEL((size_t)B * NH * T * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < NH; h++)
            for (int ib = 0; ib < nblk; ib++) {
                float *O = ws + (size_t)kcpu_thread_index() * per_thread, *Qt = O + (size_t)BQ * HS,
                      *St = Qt + (size_t)BQ * HS, *m = St + (size_t)BQ * BQ, *l = m + BQ, *corr = l + BQ;
                const int i0 = (nblk - 1 - ib) * BQ, nr = T - i0 < BQ ? T - i0 : BQ, kh = h / group;   /* longest rows first */
                transpose_block(Qt, q + ((size_t)bb * T + i0) * qs + (size_t)h * HS, qs, nr, HS);
                memset(O, 0, sizeof(float) * (size_t)nr * HS);
                for (int r = 0; r < nr; r++) { m[r] = -INFINITY; l[r] = 0.0f; }
                for (int j0 = 0; j0 < i0 + nr; j0 += BQ) {
                    const int nc = i0 + nr - j0 < BQ ? i0 + nr - j0 : BQ;
                    const float *K = k + ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                    const float *V = v + ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                    scores_t(St, K, ks, Qt, nr, nc, HS, scale, i0, j0);
                    int rescale = 0;
                    for (int r0 = 0; r0 < nr; r0 += 16) {   /* 16 query columns at a time, in registers */
                        const int w = nr - r0 < 16 ? nr - r0 : 16;
                        rescale |= w == 16 ? softmax_columns(St + r0, m + r0, l + r0, corr + r0, nc, 16)
                                           : softmax_columns(St + r0, m + r0, l + r0, corr + r0, nc, w);
                    }
                    if (rescale)
                        for (int r = 0; r < nr; r++) {
                            float *o = O + (size_t)r * HS, cr = corr[r];
                            #pragma omp simd
                            for (int d = 0; d < HS; d++) o[d] *= cr;
                        }
                    /* O += P V, P = (Pᵀ)ᵀ */
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nr, HS, nc, 1.0f, St, BQ, V, ks, 1.0f, O, HS);
                }
                for (int r = 0; r < nr; r++) {
                    float *o = out + ((size_t)bb * T + i0 + r) * qs + (size_t)h * HS, inv = 1.0f / l[r];
                    const float *orow = O + (size_t)r * HS;
                    #pragma omp simd
                    for (int d = 0; d < HS; d++) o[d] = orow[d] * inv;
                    lse[((size_t)bb * NH + h) * T + i0 + r] = m[r] + logf(l[r]);
                }
            }
}

KCPU_CLONES
void attention_backward_cpu(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            int B, int T, int NH, int NKV, int HS, void *scratch) {
    const int group = NH / NKV, nblk = (T + BQ - 1) / BQ;
    const float scale = 1.0f / sqrtf((float)HS);
    const int qs = NH * HS, ks = NKV * HS;
    const size_t per_thread = 2 * (size_t)BQ * BQ + 2 * (size_t)BQ * HS;   /* Pᵀ, dSᵀ, Qᵀ, dOᵀ */
    memset(dq, 0, (size_t)B * T * qs * sizeof *dq);
    memset(dk, 0, (size_t)B * T * ks * sizeof *dk);
    memset(dv, 0, (size_t)B * T * ks * sizeof *dv);
    #pragma omp parallel for num_threads(b->nthreads) collapse(2) schedule(dynamic, 1) if(KCPU_PARALLEL((size_t)B * NH * T * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int kh = 0; kh < NKV; kh++) {
            float *Pt = (float *)scratch + (size_t)kcpu_thread_index() * per_thread, *dSt = Pt + (size_t)BQ * BQ,
                  *Qt = dSt + (size_t)BQ * BQ, *dOt = Qt + (size_t)BQ * HS;
            float D[BQ];   /* a block's row sums: on the stack, as the softmax's running values */
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int ib = 0; ib < nblk; ib++) {
                    const int i0 = ib * BQ, nr = T - i0 < BQ ? T - i0 : BQ;
                    const size_t qoff = ((size_t)bb * T + i0) * qs + (size_t)h * HS;
                    const float *L = lse + ((size_t)bb * NH + h) * T + i0;
                    transpose_block(Qt, q + qoff, qs, nr, HS);
                    transpose_block(dOt, dout + qoff, qs, nr, HS);
                    for (int r = 0; r < nr; r++) {   /* D_r = rowsum(dout_r * out_r) = sum_c P_rc dP_rc */
                        const float *o = out + qoff + (size_t)r * qs, *g = dout + qoff + (size_t)r * qs;
                        float s = 0.0f;
                        #pragma omp simd reduction(+:s)
                        for (int d = 0; d < HS; d++) s += g[d] * o[d];
                        D[r] = s;
                    }
                    for (int j0 = 0; j0 < i0 + nr; j0 += BQ) {
                        const int nc = i0 + nr - j0 < BQ ? i0 + nr - j0 : BQ;
                        const size_t koff = ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                        scores_t(Pt, k + koff, ks, Qt, nr, nc, HS, scale, i0, j0);
                        /* dPᵀ = V dOᵀ */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nc, nr, HS, 1.0f, v + koff, ks, dOt, BQ,
                                    0.0f, dSt, BQ);
                        for (int c = 0; c < nc; c++) {
                            float *p = Pt + (size_t)c * BQ, *ds = dSt + (size_t)c * BQ;
                            #pragma omp simd
                            for (int r = 0; r < nr; r++) {   /* masked: exp(-inf) = 0 */
                                const float pr = kexpf(p[r] - L[r]);
                                p[r] = pr;
                                ds[r] = pr * (ds[r] - D[r]) * scale;
                            }
                        }
                        /* dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nc, HS, nr, 1.0f, Pt, BQ, dout + qoff, qs,
                                    1.0f, dv + koff, ks);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nc, HS, nr, 1.0f, dSt, BQ, q + qoff, qs,
                                    1.0f, dk + koff, ks);
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nr, HS, nc, 1.0f, dSt, BQ, k + koff, ks,
                                    1.0f, dq + qoff, qs);
                    }
                }
        }
}
