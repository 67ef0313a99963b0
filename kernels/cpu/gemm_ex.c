/* gemm_ex.c — GEMMs with bf16 operands on the CPU (kernels.h's gemm_ex): fp32 accumulation, fp32 or
   bf16 output.
   Where the installed OpenBLAS exports cblas_sbgemm (bf16 A and B, fp32 C; built with
   BUILD_BFLOAT16), the product goes to it, split by rows of C over the backend's threads as gemm.c
   does. Debian's libopenblas 0.3.21 declares it in cblas.h but does not export it (nm -D shows no
   sbgemm; this machine's EPYC has avx512_bf16, the library was built without it), so the symbol is
   looked up at run time (dlsym). Without it the operands are widened to fp32 block by block into the
   op's scratch and each block product is an ordinary sgemm (gemm_cpu). A bf16 output is formed in
   fp32 and rounded once. The scratch size follows the same choice (kcpu_scratch_bytes), so a CPU
   plan made on this machine allocates what a run here does.
   Not here: the fp32 GEMM (gemm.c), conversions (convert.c). */
#include "kernels_cpu.h"
#include <cblas.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef void (*SbgemmFn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const bfloat16 *, blasint, const bfloat16 *, blasint, float, float *, blasint);

static SbgemmFn sbgemm_fn(void) {
    static int done = 0;
    static SbgemmFn fn = NULL;
    if (!done) {
        const char *e = getenv("DPMEM_CPU_SBGEMM");
        if (!(e && !strcmp(e, "0"))) {
            void *p = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
            memcpy(&fn, &p, sizeof fn);
        }
        done = 1;
    }
    return fn;
}

int kcpu_have_sbgemm(void) { return sbgemm_fn() != NULL; }

/* The widening path works on blocks of at most KCPU_BF16_BLOCK rows, columns and inner terms:
   its scratch is three such blocks whatever the shapes (lm_head's N×V dlogits are never widened
   whole), and each operand is widened a few times over (M/512 or N/512), a small cost against the
   M·N·K multiply-adds. The K blocks are summed in order: deterministic. */
#define KCPU_BF16_BLOCK 512

static int blk(int n) { return n < KCPU_BF16_BLOCK ? n : KCPU_BF16_BLOCK; }

size_t kcpu_gemm_ex_scratch_floats(int M, int N, int K, KDtype ab, KDtype c) {
    if (ab == KDT_BF16 && !kcpu_have_sbgemm())
        return (size_t)blk(M) * blk(K) + (size_t)blk(K) * blk(N) + (c == KDT_BF16 ? (size_t)blk(M) * blk(N) : 0);
    return c == KDT_BF16 ? (size_t)M * N : 0;
}

/* dst [rows, cols] packed = op(src)[r0 .., c0 ..] widened, op(src) = srcᵀ when trans; src has leading
   dimension ld and elements of type t. */
static void widen_block(KBackend *b, float *dst, const void *src, KDtype t, int trans, int ld, int r0, int c0,
                        int rows, int cols) {
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)rows * cols))
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t at = trans ? (size_t)(c0 + c) * ld + (r0 + r) : (size_t)(r0 + r) * ld + (c0 + c);
            dst[(size_t)r * cols + c] = t == KDT_BF16 ? kbf16_to_f32(((const uint16_t *)src)[at]) : ((const float *)src)[at];
        }
}

static void narrow_rows(KBackend *b, uint16_t *dst, int ld, const float *src, int rows, int cols) {
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)rows * cols))
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(size_t)r * ld + c] = kbf16_from_f32(src[(size_t)r * cols + c]);
}

/* C = alpha op(A) op(B) + beta C, A and B bf16, C fp32, through sbgemm; rows of C split over threads
   as gemm_cpu does (OpenBLAS itself runs on one thread). */
static void sbgemm_rows(KBackend *b, SbgemmFn sb, int ta, int tb, int M, int N, int K, float alpha,
                        const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc) {
    int nt = b->nthreads > 1 && (long long)M * N * K >= (1LL << 22) ? b->nthreads : 1;
    if (nt > M) nt = M;
    #pragma omp parallel for num_threads(nt) schedule(static, 1) if(nt > 1)
    for (int t = 0; t < nt; t++) {
        int r0 = (int)((long long)M * t / nt), r1 = (int)((long long)M * (t + 1) / nt);
        const uint16_t *Ar = ta ? A + r0 : A + (long long)r0 * lda;
        sb(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, r1 - r0, N, K, alpha,
           Ar, lda, B, ldb, beta, C + (long long)r0 * ldc, ldc);
    }
}

/* One product by blocks: C[m0.., n0..] = alpha Σ_k-blocks op(A) op(B) + beta C, in fp32 blocks. */
static void widened_product(KBackend *b, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda,
                            const void *B, int ldb, float beta, void *C, int ldc, KDtype ab, KDtype c, float *w) {
    const int mb = blk(M), nb = blk(N), kb = blk(K);
    float *Ap = w, *Bp = Ap + (size_t)mb * kb, *Cp = Bp + (size_t)kb * nb;
    for (int m0 = 0; m0 < M; m0 += mb)
        for (int n0 = 0; n0 < N; n0 += nb) {
            const int mr = M - m0 < mb ? M - m0 : mb, nr = N - n0 < nb ? N - n0 : nb;
            float *Cb; int ldcb;
            if (c == KDT_BF16) {
                Cb = Cp; ldcb = nr;
                if (beta != 0.0f) widen_block(b, Cp, C, KDT_BF16, 0, ldc, m0, n0, mr, nr);
            } else { Cb = (float *)C + (size_t)m0 * ldc + n0; ldcb = ldc; }
            if (K == 0 && beta != 1.0f) {   /* no product: C = beta C */
                for (int r = 0; r < mr; r++) for (int q = 0; q < nr; q++) Cb[(size_t)r * ldcb + q] *= beta;
            }
            for (int k0 = 0; k0 < K; k0 += kb) {
                const int kr = K - k0 < kb ? K - k0 : kb;
                widen_block(b, Ap, A, ab, ta, lda, m0, k0, mr, kr);
                widen_block(b, Bp, B, ab, tb, ldb, k0, n0, kr, nr);
                gemm_cpu(b, 0, 0, mr, nr, kr, alpha, Ap, kr, 0, Bp, nr, 0, k0 == 0 ? beta : 1.0f, Cb, ldcb, 0, 1);
            }
            if (c == KDT_BF16) narrow_rows(b, (uint16_t *)C + (size_t)m0 * ldc + n0, ldc, Cp, mr, nr);
        }
}

void gemm_ex_cpu(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                 const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
                 float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c, void *scratch) {
    SbgemmFn sb = ab == KDT_BF16 ? sbgemm_fn() : NULL;
    const size_t eab = KDT_SIZE(ab), ec = KDT_SIZE(c);
    for (int i = 0; i < batch; i++) {
        const char *Ai = (const char *)A + (size_t)((long long)i * strideA) * eab;
        const char *Bi = (const char *)B + (size_t)((long long)i * strideB) * eab;
        char *Ci = (char *)C + (size_t)((long long)i * strideC) * ec;
        if (sb || ab == KDT_F32) {
            /* the product in fp32 (sbgemm, or sgemm on fp32 operands), into C or an fp32 twin of it */
            float *Cf = c == KDT_BF16 ? scratch : (float *)Ci;
            const int ldcf = c == KDT_BF16 ? N : ldc;
            if (c == KDT_BF16 && beta != 0.0f) widen_block(b, Cf, Ci, KDT_BF16, 0, ldc, 0, 0, M, N);
            if (sb) sbgemm_rows(b, sb, transA, transB, M, N, K, alpha, (const uint16_t *)Ai, lda, (const uint16_t *)Bi, ldb, beta, Cf, ldcf);
            else gemm_cpu(b, transA, transB, M, N, K, alpha, (const float *)Ai, lda, 0, (const float *)Bi, ldb, 0, beta, Cf, ldcf, 0, 1);
            if (c == KDT_BF16) narrow_rows(b, (uint16_t *)Ci, ldc, Cf, M, N);
        } else {
            widened_product(b, transA, transB, M, N, K, alpha, Ai, lda, Bi, ldb, beta, Ci, ldc, ab, c, scratch);
        }
    }
}
