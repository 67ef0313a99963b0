/* rmsnorm.c — RMSNorm as LlamaRMSNorm: out = w * x / sqrt(mean(x²) + eps), with 1/sqrt(...) saved
   per row (rstd) for the backward. The weight gradient splits columns among threads (no scratch,
   deterministic). Not here: mean-subtracting LayerNorm. */
#include "kernels_cpu.h"
#include "vmath.h"
#include <math.h>

KCPU_CLONES
void rmsnorm_forward_cpu(KBackend *b, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)N * C))
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        double ss = 0.0;
        #pragma omp simd reduction(+:ss)
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        rstd[n] = r;
        #pragma omp simd
        for (int c = 0; c < C; c++) o[c] = x[c] * r * w[c];
    }
}

KCPU_CLONES
void rmsnorm_backward_cpu(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int N, int C, void *scratch) {
    (void)scratch;
    /* dx = r * (w*dy - xhat * mean(w*dy*xhat)), xhat = x*r */
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(dinp && KCPU_PARALLEL((size_t)N * C))
    for (int n = 0; n < (dinp ? N : 0); n++) {   /* dinp NULL: the weight's gradient alone */
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float r = rstd[n];
        double dot = 0.0;
        #pragma omp simd reduction(+:dot)
        for (int c = 0; c < C; c++) dot += (double)w[c] * dy[c] * x[c] * r;
        float m = (float)(dot / C);
        #pragma omp simd
        for (int c = 0; c < C; c++) dx[c] += r * (w[c] * dy[c] - x[c] * r * m);
    }
    if (!dw) return;
    int nt = b->nthreads > 0 ? b->nthreads : 1;
    #pragma omp parallel for num_threads(nt) schedule(static, 1) if(KCPU_PARALLEL((size_t)N * C))
    for (int t = 0; t < nt; t++) {
        int c0 = (int)((long long)C * t / nt), c1 = (int)((long long)C * (t + 1) / nt);
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            float r = rstd[n];
            #pragma omp simd
            for (int c = c0; c < c1; c++) dw[c] += dy[c] * x[c] * r;
        }
    }
}
