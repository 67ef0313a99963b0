/* crossentropy.c — softmax cross-entropy over the vocabulary, per position. The forward writes each
   position's loss; the backward recomputes the softmax and turns the logits into dlogits IN PLACE
   (no second B×T×V buffer), scaled by `scale` and the row's sample weight. Sums in double.
   Vectorized: kexpf (vmath.h) instead of a libm call per element, the row's passes in SIMD lanes
   (a row of 32000 logits stays in L2 between its passes). */
#include "kernels_cpu.h"
#include "vmath.h"

KCPU_INLINE float row_max(const float *x, int V) {
    float m = -INFINITY;
    #pragma omp simd reduction(max:m)
    for (int i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* Σ exp(x - m), each term in fp32 (<= 1), summed in double; e (may be x itself): the terms. */
KCPU_INLINE double row_expsum(const float *x, int V, float m, float *e) {
    double s = 0.0;
    if (e) {
        #pragma omp simd reduction(+:s)
        for (int i = 0; i < V; i++) { float t = kexpf(x[i] - m); e[i] = t; s += t; }
    } else {
        #pragma omp simd reduction(+:s)
        for (int i = 0; i < V; i++) s += kexpf(x[i] - m);
    }
    return s;
}

KCPU_CLONES
void crossentropy_forward_cpu(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V,
                              void *scratch) {
    (void)scratch;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)N * V))
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float m = row_max(x, V);
        double s = row_expsum(x, V, m, NULL);
        losses[n] = (float)(log(s) + m - x[targets[n]]);
    }
}

KCPU_CLONES
void crossentropy_backward_cpu(KBackend *b, float *logits, const int *targets, float scale,
                               const float *sample_weight, int B, int T, int V, void *scratch) {
    (void)scratch;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)B * T * V))
    for (int n = 0; n < B * T; n++) {
        float *x = logits + (size_t)n * V;
        float m = row_max(x, V);
        double s = row_expsum(x, V, m, x);   /* x now holds exp(x - m) */
        float w = scale * (sample_weight ? sample_weight[n / T] : 1.0f);
        float f = (float)(w / s);
        #pragma omp simd
        for (int i = 0; i < V; i++) x[i] *= f;
        x[targets[n]] -= w;
    }
}
