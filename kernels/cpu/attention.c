/* attention.c — causal multi-head attention with grouped-query heads, tiled as flash attention:
   queries in blocks of KCPU_ATTN_TILE rows, keys in chunks of up to KCPU_ATTN_KEYS; for each query
   block and each chunk of the keys up to its diagonal the scores S = Q_i K_jᵀ are one GEMM, an
   online softmax (running max m and denominator l per row) folds them into the output block, and
   only lse = m + log l per row is saved. The backward recomputes P = exp(S - lse) chunk by chunk
   from q, k and lse, block by block of KCPU_ATTN_TILE keys, with four GEMMs per block pair
   (dP = dO Vᵀ, dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K). The largest buffer is a block of
   KCPU_ATTN_TILE × KCPU_ATTN_KEYS scores per thread in the forward, two KCPU_ATTN_TILE² tiles in the
   backward: nothing of size T×T is ever allocated, so long sequences run (and plan) in O(T) memory
   per head. Chunks of many keys make the forward's GEMMs larger (13 % less time at T=1024 than one
   64-key tile per GEMM).
   Layout: q, out [B,T,NH,HS]; k, v [B,T,NKV,HS]; lse [B,NH,T]; scores scaled by 1/sqrt(HS).
   Not here: masks other than causal, dropout, KV cache. The naive T×T version lives in the tests. */
#include "kernels_cpu.h"
#include "vmath.h"
#include <cblas.h>
#include <math.h>
#include <string.h>

#define BQ KCPU_ATTN_TILE   /* query rows per block */
#define KC KCPU_ATTN_KEYS   /* keys per chunk in the forward (a multiple of BQ): chunk 0 holds key 0, unmasked
                               for every query, so no row is ever empty. The backward takes BQ keys at a
                               time: its two blocks per thread stay BQ² (larger ones gained nothing there
                               and would have raised the bf16 book-keeping peaks, where they are live). */

/* S[nr, nc] (leading dimension lds) = scale * A[nr, HS] B[nc, HS]ᵀ, then the causal mask (key j0+c >
   query i0+r) as -inf. */
KCPU_INLINE void scores(float *S, int lds, const float *A, int lda, const float *Bm, int ldb, int nr, int nc, int HS,
                        float scale, int i0, int j0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, HS, scale, A, lda, Bm, ldb, 0.0f, S, lds);
    if (j0 + nc - 1 <= i0) return;   /* chunk entirely below the diagonal */
    for (int r = 0; r < nr; r++) {
        const int c0 = i0 + r + 1 - j0;   /* first masked column of row r */
        for (int c = c0 < 0 ? 0 : c0; c < nc; c++) S[(size_t)r * lds + c] = -INFINITY;
    }
}

KCPU_CLONES
void attention_forward_cpu(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                           int B, int T, int NH, int NKV, int HS, void *scratch) {
    const int group = NH / NKV, nblk = (T + BQ - 1) / BQ;
    const float scale = 1.0f / sqrtf((float)HS);
    const int qs = NH * HS, ks = NKV * HS;   /* row strides */
    float *ws = scratch;
    const size_t per_thread = (size_t)BQ * HS + (size_t)BQ * KC + 2 * BQ;
    #pragma omp parallel for num_threads(b->nthreads) collapse(3) schedule(dynamic, 1) if(KCPU_PARALLEL((size_t)B * NH * T * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < NH; h++)
            for (int ib = 0; ib < nblk; ib++) {
                float *O = ws + (size_t)kcpu_thread_index() * per_thread, *S = O + (size_t)BQ * HS, *m = S + (size_t)BQ * KC, *l = m + BQ;
                const int i0 = (nblk - 1 - ib) * BQ, nr = T - i0 < BQ ? T - i0 : BQ, kh = h / group;   /* longest rows first */
                const float *Q = q + ((size_t)bb * T + i0) * qs + (size_t)h * HS;
                memset(O, 0, sizeof(float) * (size_t)nr * HS);
                for (int r = 0; r < nr; r++) { m[r] = -INFINITY; l[r] = 0.0f; }
                for (int j0 = 0; j0 < i0 + nr; j0 += KC) {
                    const int nc = i0 + nr - j0 < KC ? i0 + nr - j0 : KC;
                    const float *K = k + ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                    const float *V = v + ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                    scores(S, KC, Q, qs, K, ks, nr, nc, HS, scale, i0, j0);
                    for (int r = 0; r < nr; r++) {   /* online softmax: rescale what came before */
                        float *sr = S + (size_t)r * KC, mx = m[r], sum = 0.0f;
                        #pragma omp simd reduction(max:mx)
                        for (int c = 0; c < nc; c++) mx = sr[c] > mx ? sr[c] : mx;
                        float corr = expf(m[r] - mx);   /* corr = 0 on the first chunk */
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
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, HS, nc, 1.0f, S, KC, V, ks, 1.0f, O, HS);
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
            float *P = tiles + (size_t)kcpu_thread_index() * 2 * BQ * BQ, *dS = P + (size_t)BQ * BQ;
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int ib = 0; ib < nblk; ib++) {
                    const int i0 = ib * BQ, nr = T - i0 < BQ ? T - i0 : BQ;
                    const size_t qoff = ((size_t)bb * T + i0) * qs + (size_t)h * HS;
                    const float *L = lse + ((size_t)bb * NH + h) * T + i0, *D = delta + ((size_t)bb * NH + h) * T + i0;
                    for (int j0 = 0; j0 < i0 + nr; j0 += BQ) {
                        const int nc = i0 + nr - j0 < BQ ? i0 + nr - j0 : BQ;
                        const size_t koff = ((size_t)bb * T + j0) * ks + (size_t)kh * HS;
                        scores(P, BQ, q + qoff, qs, k + koff, ks, nr, nc, HS, scale, i0, j0);
                        for (int r = 0; r < nr; r++) {
                            float *pr = P + (size_t)r * BQ;
                            const float lr = L[r];
                            #pragma omp simd
                            for (int c = 0; c < nc; c++) pr[c] = kexpf(pr[c] - lr);   /* masked: exp(-inf) = 0 */
                        }
                        /* dP = dO Vᵀ, then dS = P (dP - D) * scale */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, HS, 1.0f, dout + qoff, qs,
                                    v + koff, ks, 0.0f, dS, BQ);
                        for (int r = 0; r < nr; r++) {
                            float *dr = dS + (size_t)r * BQ;
                            const float *pr = P + (size_t)r * BQ, dd = D[r];
                            #pragma omp simd
                            for (int c = 0; c < nc; c++) dr[c] = pr[c] * (dr[c] - dd) * scale;
                        }
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, HS, nr, 1.0f, P, BQ, dout + qoff, qs,
                                    1.0f, dv + koff, ks);
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, HS, nr, 1.0f, dS, BQ, q + qoff, qs,
                                    1.0f, dk + koff, ks);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, HS, nc, 1.0f, dS, BQ, k + koff, ks,
                                    1.0f, dq + qoff, qs);
                    }
                }
        }
}
