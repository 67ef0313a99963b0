/* attention.c — causal multi-head attention with grouped-query heads, tiled as flash attention:
   the forward walks the keys of each query row in tiles of KCPU_ATTN_TILE with an online softmax
   (running max and denominator) and saves only lse = log-sum-exp per row; the backward recomputes
   each probability from q, k and lse. Nothing of size T×T is ever allocated, so long sequences run
   (and plan) in O(T) memory per head.
   Layout: q, out [B,T,NH,HS]; k, v [B,T,NKV,HS]; lse [B,NH,T]; scores scaled by 1/sqrt(HS).
   Not here: masks other than causal, dropout, KV cache. The naive T×T version lives in the tests. */
#include "kernels_cpu.h"
#include <math.h>
#include <string.h>

static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void attention_forward_cpu(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                           int B, int T, int NH, int NKV, int HS, void *scratch) {
    const int group = NH / NKV;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t qs = (size_t)NH * HS, ks = (size_t)NKV * HS;  /* row strides */
    float *ws = scratch;
    #pragma omp parallel for num_threads(b->nthreads) collapse(3) schedule(dynamic, 4) if(KCPU_PARALLEL((size_t)B * NH * T * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                float *acc = ws + (size_t)kcpu_thread_index() * (HS + KCPU_ATTN_TILE), *s = acc + HS;
                const float *qi = q + ((size_t)bb * T + i) * qs + (size_t)h * HS;
                const float *kb = k + (size_t)bb * T * ks + (size_t)(h / group) * HS;
                const float *vb = v + (size_t)bb * T * ks + (size_t)(h / group) * HS;
                float m = -INFINITY, l = 0.0f;
                for (int d = 0; d < HS; d++) acc[d] = 0.0f;
                for (int j0 = 0; j0 <= i; j0 += KCPU_ATTN_TILE) {
                    int j1 = j0 + KCPU_ATTN_TILE < i + 1 ? j0 + KCPU_ATTN_TILE : i + 1;
                    float tmax = -INFINITY;
                    for (int j = j0; j < j1; j++) {
                        s[j - j0] = dot(qi, kb + (size_t)j * ks, HS) * scale;
                        if (s[j - j0] > tmax) tmax = s[j - j0];
                    }
                    float mnew = tmax > m ? tmax : m;
                    float corr = expf(m - mnew);   /* 0 on the first tile (m = -inf) */
                    l *= corr;
                    for (int d = 0; d < HS; d++) acc[d] *= corr;
                    for (int j = j0; j < j1; j++) {
                        float p = expf(s[j - j0] - mnew);
                        const float *vj = vb + (size_t)j * ks;
                        l += p;
                        for (int d = 0; d < HS; d++) acc[d] += p * vj[d];
                    }
                    m = mnew;
                }
                float *oi = out + ((size_t)bb * T + i) * qs + (size_t)h * HS;
                for (int d = 0; d < HS; d++) oi[d] = acc[d] / l;
                lse[((size_t)bb * NH + h) * T + i] = m + logf(l);
            }
}

void attention_backward_cpu(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            int B, int T, int NH, int NKV, int HS, void *scratch) {
    const int group = NH / NKV;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t qs = (size_t)NH * HS, ks = (size_t)NKV * HS;
    float *delta = scratch;  /* [B,NH,T]: rowsum(dout * out) = sum_j p_ij dp_ij */
    #pragma omp parallel for num_threads(b->nthreads) collapse(2) schedule(static) if(KCPU_PARALLEL((size_t)B * NH * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                size_t r = ((size_t)bb * T + i) * qs + (size_t)h * HS;
                delta[((size_t)bb * NH + h) * T + i] = dot(dout + r, out + r, HS);
            }
    memset(dq, 0, (size_t)B * T * qs * sizeof *dq);
    memset(dk, 0, (size_t)B * T * ks * sizeof *dk);
    memset(dv, 0, (size_t)B * T * ks * sizeof *dv);
    /* One task per (sequence, kv head) owns that head's dk, dv and its group's dq: no races. */
    #pragma omp parallel for num_threads(b->nthreads) collapse(2) schedule(dynamic, 1) if(KCPU_PARALLEL((size_t)B * NH * T * T * HS))
    for (int bb = 0; bb < B; bb++)
        for (int kh = 0; kh < NKV; kh++) {
            const float *kb = k + (size_t)bb * T * ks + (size_t)kh * HS;
            const float *vb = v + (size_t)bb * T * ks + (size_t)kh * HS;
            float *dkb = dk + (size_t)bb * T * ks + (size_t)kh * HS;
            float *dvb = dv + (size_t)bb * T * ks + (size_t)kh * HS;
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int i = 0; i < T; i++) {
                    size_t r = ((size_t)bb * T + i) * qs + (size_t)h * HS;
                    const float *qi = q + r, *doi = dout + r;
                    float *dqi = dq + r;
                    float L = lse[((size_t)bb * NH + h) * T + i], D = delta[((size_t)bb * NH + h) * T + i];
                    for (int j = 0; j <= i; j++) {
                        const float *kj = kb + (size_t)j * ks, *vj = vb + (size_t)j * ks;
                        float p = expf(dot(qi, kj, HS) * scale - L);
                        float ds = p * (dot(doi, vj, HS) - D) * scale;
                        float *dkj = dkb + (size_t)j * ks, *dvj = dvb + (size_t)j * ks;
                        for (int d = 0; d < HS; d++) {
                            dqi[d] += ds * kj[d];
                            dkj[d] += ds * qi[d];
                            dvj[d] += p * doi[d];
                        }
                    }
                }
        }
}
