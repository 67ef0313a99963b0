/* gemm.c — strided batched GEMM on the CPU through OpenBLAS (cblas_sgemm, row-major).
   Threads: OpenBLAS runs single-threaded and large products are split by rows of C among this
   backend's OpenMP threads. Two thread pools (OpenBLAS's pthreads and OpenMP's) on the same cores
   made the tiny model 3-25x slower here, most of all when other processes share the machine.
   Not here: any blocking of our own — OpenBLAS's kernels do that. */
#include "kernels_cpu.h"
#include <cblas.h>

/* Multiply-adds below which one thread does the whole product. */
#define KCPU_GEMM_THREAD_MIN (1LL << 22)

void kcpu_blas_single_thread(void) {
    static int done = 0;
    if (!done) { openblas_set_num_threads(1); done = 1; }
}

void gemm_cpu(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
              const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
              float beta, float *C, int ldc, long long strideC, int batch) {
    int nt = b->nthreads > 1 && (long long)M * N * K >= KCPU_GEMM_THREAD_MIN ? b->nthreads : 1;
    if (nt > M) nt = M;
    for (int i = 0; i < batch; i++) {
        const float *Ai = A + i * strideA, *Bi = B + i * strideB;
        float *Ci = C + i * strideC;
        #pragma omp parallel for num_threads(nt) schedule(static, 1) if(nt > 1)
        for (int t = 0; t < nt; t++) {
            int r0 = (int)((long long)M * t / nt), r1 = (int)((long long)M * (t + 1) / nt);
            /* rows r0..r1 of op(A): A's rows when not transposed, its columns when transposed */
            const float *Ar = transA ? Ai + r0 : Ai + (long long)r0 * lda;
            cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                        r1 - r0, N, K, alpha, Ar, lda, Bi, ldb, beta, Ci + (long long)r0 * ldc, ldc);
        }
    }
}
