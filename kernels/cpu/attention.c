/* attention.c — causal multi-head attention with grouped-query heads, tiled as flash attention:
   queries and keys in blocks of KCPU_ATTN_TILE rows; for each pair of blocks on or below the diagonal
   the scores S = Q_i K_jᵀ are one small GEMM, an online softmax (running max m and denominator l per
   row) folds them into the output block, and only lse = m + log l per row is saved. The backward
   recomputes P = exp(S - lse) block by block from q, k and lse, with four small GEMMs per block pair
   (dP = dO Vᵀ, dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K). The largest buffer is a tile of
   KCPU_ATTN_TILE² scores per thread: nothing of size T×T is ever allocated, so long sequences run
   (and plan) in O(T) memory per head.
   Layout: q, out [B,T,NH,HS]; k, v [B,T,NKV,HS]; lse [B,NH,T]; scores scaled by 1/sqrt(HS).
   Not here: masks other than causal, dropout, KV cache. The naive T×T version lives in the tests. */
#include "kernels_cpu.h"
#include "vmath.h"
#include <cblas.h>
#include <math.h>
#include <string.h>

#define BT KCPU_ATTN_TILE   /* query rows per block = keys per block: a diagonal block's row r
                               always has key 0 of the block unmasked, so no row is ever empty */

/* S[nr, nc] = scale * A[nr, HS] B[nc, HS]ᵀ, then the causal mask (key j0+c > query i0+r) as -inf. */
KCPU_INLINE void scores(float *S, const float *A, int lda, const float *Bm, int ldb, int nr, int nc, int HS,
                   float scale, int i0, int j0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, HS, scale, A, lda, Bm, ldb, 0.0f, S, BT);
    if (j0 + nc - 1 <= i0) return;   /* block entirely below the diagonal */
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            if (j0 + c > i0 + r) S[r * BT + c] = -INFINITY;
}

KCPU_CLONES
void attention_forward_cpu(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                           int B, int T, int NH, int NKV, int HS, void *scratch) {
    const int group = NH / NKV, nblk = (T + BT - 1) / BT;
    const float scale = 1.0f / sqrtf((float)HS);
    const int qs = NH * HS, ks = NKV * HS;   /* row strides */
    float *ws = scratch;
    const size_t per_thread = (size_t)BT * HS + (size_t)BT * BT + 2 * BT;
    #pragma omp parallel for num_threads(b->nthreads) collapse(3) schedule(dynamic, 1) if(KCPU_PARALLEL((size_t)B * NH * T * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < NH; h++)
            for (int ib = 0; ib < nblk; ib++) {
                float *O = ws + (size_t)kcpu_thread_index() * per_thread, *S = O + (size_t)BT * HS, *m = S + BT * BT, *l = m + BT;
                const int i0 = ib * BT, nr = T - i0 < BT ? T - i0 : BT, kh = h / group;
                const float *Q = q + ((size_t)bb * T + i0) * qs + (size_t)h * HS;
                memset(O, 0, sizeof(float) * (size_t)nr * HS);
                for (int r = 0; r < nr; r++) { m[r] = -INFINITY; l[r] = 0.0f; }
                for (int j0 = 0; j0 <= i0; j0 += BT) {
                    const int nc = i0 + nr - j0 < BT ? i0 + nr - j0 : BT;
                    const float *K = k + ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                    const float *V = v + ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                    scores(S, Q, qs, K, ks, nr, nc, HS, scale, i0, j0);
                    for (int r = 0; r < nr; r++) {   /* online softmax: rescale what came before */
                        float *sr = S + r * BT, mx = m[r], sum = 0.0f;
                        #pragma omp simd reduction(max:mx)
                        for (int c = 0; c < nc; c++) mx = sr[c] > mx ? sr[c] : mx;
                        float corr = expf(m[r] - mx);   /* corr = 0 on the first block */
                        #pragma omp simd reduction(+:sum)
                        for (int c = 0; c < nc; c++) { sr[c] = kexpf(sr[c] - mx); sum += sr[c]; }
                        l[r] = l[r] * corr + sum;
                        m[r] = mx;
                        if (corr != 1.0f) {
                            float *o = O + (size_t)r * HS;
                            #pragma omp simd
                            for (int d = 0; d < HS; d++) o[d] *= corr;
                        }
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, HS, nc, 1.0f, S, BT, V, ks, 1.0f, O, HS);
                }
                for (int r = 0; r < nr; r++) {
                    float *o = out + ((size_t)bb * T + i0 + r) * qs + (size_t)h * HS, inv = 1.0f / l[r];
                    for (int d = 0; d < HS; d++) o[d] = O[(size_t)r * HS + d] * inv;
                    lse[((size_t)bb * NH + h) * T + i0 + r] = m[r] + logf(l[r]);
                }
            }
}

KCPU_CLONES
void attention_backward_cpu(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            int B, int T, int NH, int NKV, int HS, void *scratch) {
    const int group = NH / NKV, nblk = (T + BT - 1) / BT;
    const float scale = 1.0f / sqrtf((float)HS);
    const int qs = NH * HS, ks = NKV * HS;
    float *delta = scratch;  /* [B,NH,T]: D_i = rowsum(dout_i * out_i) = sum_j P_ij dP_ij */
    float *tiles = delta + (size_t)B * NH * T;
    #pragma omp parallel for num_threads(b->nthreads) collapse(2) schedule(static) if(KCPU_PARALLEL((size_t)B * NH * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                size_t r = ((size_t)bb * T + i) * qs + (size_t)h * HS;
                float s = 0.0f;
                #pragma omp simd reduction(+:s)
                for (int d = 0; d < HS; d++) s += dout[r + d] * out[r + d];
                delta[((size_t)bb * NH + h) * T + i] = s;
            }
    memset(dq, 0, (size_t)B * T * qs * sizeof *dq);
    memset(dk, 0, (size_t)B * T * ks * sizeof *dk);
    memset(dv, 0, (size_t)B * T * ks * sizeof *dv);
    /* One task per (sequence, kv head) owns that head's dk, dv and its group's dq: no races. */
    #pragma omp parallel for num_threads(b->nthreads) collapse(2) schedule(dynamic, 1) if(KCPU_PARALLEL((size_t)B * NH * T * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int kh = 0; kh < NKV; kh++) {
            float *P = tiles + (size_t)kcpu_thread_index() * 2 * BT * BT, *dS = P + BT * BT;
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int ib = 0; ib < nblk; ib++) {
                    const int i0 = ib * BT, nr = T - i0 < BT ? T - i0 : BT;
                    const size_t qoff = ((size_t)bb * T + i0) * qs + (size_t)h * HS;
                    const float *L = lse + ((size_t)bb * NH + h) * T + i0, *D = delta + ((size_t)bb * NH + h) * T + i0;
                    for (int j0 = 0; j0 <= i0; j0 += BT) {
                        const int nc = i0 + nr - j0 < BT ? i0 + nr - j0 : BT;
                        const size_t koff = ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                        scores(P, q + qoff, qs, k + koff, ks, nr, nc, HS, scale, i0, j0);
                        for (int r = 0; r < nr; r++) {
                            float *pr = P + r * BT;
                            const float lr = L[r];
                            #pragma omp simd
                            for (int c = 0; c < nc; c++) pr[c] = kexpf(pr[c] - lr);   /* masked: exp(-inf) = 0 */
                        }
                        /* dP = dO Vᵀ, then dS = P (dP - D) * scale */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, HS, 1.0f, dout + qoff, qs,
                                    v + koff, ks, 0.0f, dS, BT);
                        for (int r = 0; r < nr; r++) {
                            float *dr = dS + r * BT;
                            const float *pr = P + r * BT, dd = D[r];
                            #pragma omp simd
                            for (int c = 0; c < nc; c++) dr[c] = pr[c] * (dr[c] - dd) * scale;
                        }
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, HS, nr, 1.0f, P, BT, dout + qoff, qs,
                                    1.0f, dv + koff, ks);
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, HS, nr, 1.0f, dS, BT, q + qoff, qs,
                                    1.0f, dk + koff, ks);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, HS, nc, 1.0f, dS, BT, k + koff, ks,
                                    1.0f, dq + qoff, qs);
                    }
                }
        }
}
