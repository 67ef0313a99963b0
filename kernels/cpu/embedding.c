/* embedding.c — token embedding lookup and its backward (a scatter-add into the table's rows).
   The backward splits the columns among threads, each walking all rows: no atomics, no scratch,
   and the same result for any thread count. */
#include "kernels_cpu.h"
#include <string.h>

void embedding_forward_cpu(KBackend *b, float *out, const int *tokens, const float *wte, int N, int C) {
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)N * C))
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, (size_t)C * sizeof *out);
}

/* a token outside [0, V) is skipped (the CUDA twin skips and counts it; the trainer's loader rejects it) */
void embedding_backward_cpu(KBackend *b, float *dwte, const int *tokens, const float *dout, int N, int C, int V,
                            void *scratch) {
    (void)scratch;
    int nt = b->nthreads > 0 ? b->nthreads : 1;
    #pragma omp parallel for num_threads(nt) schedule(static, 1) if(KCPU_PARALLEL((size_t)N * C))
    for (int t = 0; t < nt; t++) {
        int c0 = (int)((long long)C * t / nt), c1 = (int)((long long)C * (t + 1) / nt);
        for (int n = 0; n < N; n++) {
            if (tokens[n] < 0 || tokens[n] >= V) continue;
            float *row = dwte + (size_t)tokens[n] * C;
            const float *d = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) row[c] += d[c];
        }
    }
}
