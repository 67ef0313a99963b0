/* crossentropy.c — softmax cross-entropy over the vocabulary, per position. The forward writes each
   position's loss; the backward recomputes the softmax and turns the logits into dlogits IN PLACE
   (no second B×T×V buffer), scaled by `scale` and the row's sample weight. Sums in double. */
#include "kernels_cpu.h"
#include <math.h>

/* Row max and Σ exp(x - max): expf per element (each term <= 1, so fp32 is exact enough), summed in
   double. If e is given, the exponentials are stored there (the backward's softmax numerators). */
static void row_stats(const float *x, int V, float *mx, double *sum, float *e) {
    float m = -INFINITY;
    for (int i = 0; i < V; i++) if (x[i] > m) m = x[i];
    double s = 0.0;
    for (int i = 0; i < V; i++) {
        float t = expf(x[i] - m);
        if (e) e[i] = t;
        s += t;
    }
    *mx = m; *sum = s;
}

void crossentropy_forward_cpu(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V,
                              void *scratch) {
    (void)scratch;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)N * V))
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        float m; double s;
        row_stats(x, V, &m, &s, NULL);
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
        row_stats(x, V, &m, &s, x);   /* x now holds exp(x - m) */
        float w = scale * (sample_weight ? sample_weight[n / T] : 1.0f);
        float f = (float)(w / s);
        for (int i = 0; i < V; i++) x[i] *= f;
        x[targets[n]] -= w;
    }
}
