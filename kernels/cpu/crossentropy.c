/* crossentropy.c — softmax cross-entropy over the vocabulary, per position. The forward writes each
   position's loss; the backward recomputes the softmax and turns the logits into dlogits IN PLACE
   (no second B×T×V buffer), scaled by `scale` and the row's sample weight. Sums in double. */
#include "kernels_cpu.h"
#include <math.h>

static void row_stats(const float *x, int V, float *mx, double *sum) {
    float m = -INFINITY;
    for (int i = 0; i < V; i++) if (x[i] > m) m = x[i];
    double s = 0.0;
    for (int i = 0; i < V; i++) s += exp((double)(x[i] - m));
    *mx = m; *sum = s;
}

void crossentropy_forward_cpu(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V,
                              void *scratch) {
    (void)scratch;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)N * V))
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float m; double s;
        row_stats(x, V, &m, &s);
        losses[n] = (float)(log(s) + m - x[targets[n]]);
    }
}

void crossentropy_backward_cpu(KBackend *b, float *logits, const int *targets, float scale,
                               const float *sample_weight, int B, int T, int V, void *scratch) {
    (void)scratch;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)B * T * V))
    for (int n = 0; n < B * T; n++) {
        float *x = logits + (size_t)n * V;
        float m; double s;
        row_stats(x, V, &m, &s);
        float w = scale * (sample_weight ? sample_weight[n / T] : 1.0f);
        float inv = (float)(1.0 / s);
        for (int i = 0; i < V; i++) x[i] = expf(x[i] - m) * inv * w;
        x[targets[n]] -= w;
    }
}
