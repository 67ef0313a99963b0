/* gemm.c — strided batched GEMM on the CPU through OpenBLAS (cblas_sgemm, row-major).
   OpenBLAS threads only for large products: a small GEMM on several OpenBLAS threads, between
   OpenMP regions whose threads still spin, ran 25x slower here (tiny model: 10 vs 259 steps/s).
   OPENBLAS_NUM_THREADS, when set, is respected as is. */
#include "kernels_cpu.h"
#include <cblas.h>
#include <stdlib.h>

/* Multiply-adds below which one thread is faster than several. */
#define KCPU_GEMM_THREAD_MIN (1LL << 24)

static void set_blas_threads(int n) {
    static int current = -1, user_set = -1;
    if (user_set < 0) user_set = getenv("OPENBLAS_NUM_THREADS") != NULL;
    if (user_set || n == current) return;
    openblas_set_num_threads(n);
    current = n;
}

void gemm_cpu(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
              const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
              float beta, float *C, int ldc, long long strideC, int batch) {
    set_blas_threads((long long)M * N * K >= KCPU_GEMM_THREAD_MIN ? b->nthreads : 1);
    for (int i = 0; i < batch; i++)
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                    M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC, ldc);
}
