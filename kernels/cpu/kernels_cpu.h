/* kernels_cpu.h — the CPU backend's op implementations (one file per concept in kernels/cpu/), for
   the table in backend_cpu.c. fp32 (bf16 only in gemm_ex.c and convert.c), loops parallel with OpenMP over `b->nthreads` threads, GEMM via
   OpenBLAS. Each is checked against a double-precision reference in tests/test_kernels_cpu.c.
   Not here: allocation policy or scratch sizes (kernels.c, scratch.c). */
#ifndef KERNELS_CPU_H
#define KERNELS_CPU_H
#include "kernels.h"

/* Loops over less work than this run on one thread: a parallel region costs microseconds, and far
   more when the cores are shared (tiny model, loaded 2-core machine: 14 vs 113 steps/s). */
#define KCPU_MIN_PARALLEL_WORK ((size_t)1 << 16)
#define KCPU_PARALLEL(work) ((size_t)(work) >= KCPU_MIN_PARALLEL_WORK)

/* The tiled causal attention: queries per block and keys per block (64: OpenBLAS's small-matrix
   kernels take every product of two such blocks). */
#define KCPU_ATTN_TILE 64

void gemm_cpu(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
              const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
              float beta, float *C, int ldc, long long strideC, int batch);
void fill_cpu(KBackend *b, float *x, float value, size_t n);
void copy_cpu(KBackend *b, float *dst, const float *src, size_t n);
void add_cpu(KBackend *b, float *y, const float *x, size_t n);
void scale_cpu(KBackend *b, float *x, float s, size_t n);
double sum_cpu(KBackend *b, const float *x, size_t n, void *scratch);
double sumsq_cpu(KBackend *b, const float *x, size_t n, void *scratch);
size_t count_nonfinite_cpu(KBackend *b, const float *x, size_t n, void *scratch);
void embedding_forward_cpu(KBackend *b, float *out, const int *tokens, const float *wte, int N, int C);
void embedding_backward_cpu(KBackend *b, float *dwte, const int *tokens, const float *dout, int N, int C, int V,
                            void *scratch);
void rmsnorm_forward_cpu(KBackend *b, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
void rmsnorm_backward_cpu(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int N, int C, void *scratch);
void rope_forward_cpu(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope);
void rope_backward_cpu(KBackend *b, float *dx, int B, int T, int NH, int HS, KRope rope);
void attention_forward_cpu(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                           int B, int T, int NH, int NKV, int HS, void *scratch);
void attention_backward_cpu(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            int B, int T, int NH, int NKV, int HS, void *scratch);
void swiglu_forward_cpu(KBackend *b, float *h, const float *gate, const float *up, size_t n);
void swiglu_backward_cpu(KBackend *b, float *dgate, float *dup, const float *dh, const float *gate,
                         const float *up, size_t n);
void crossentropy_forward_cpu(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V,
                              void *scratch);
void crossentropy_backward_cpu(KBackend *b, float *logits, const int *targets, float scale,
                               const float *sample_weight, int B, int T, int V, void *scratch);
void adamw_cpu(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
               float beta1, float beta2, float eps, float weight_decay, int t);
void sgd_cpu(KBackend *b, float *p, const float *g, size_t n, float lr, float weight_decay);
/* mixed precision (gemm_ex.c, convert.c) */
void gemm_ex_cpu(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                 const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
                 float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c, void *scratch);
size_t kcpu_gemm_ex_scratch_floats(int M, int N, int K, KDtype ab, KDtype c);
void widen_cpu(KBackend *b, float *dst, const void *src, size_t n);
void narrow_cpu(KBackend *b, void *dst, const float *src, size_t n);
void narrow_inplace_cpu(KBackend *b, void *x, size_t n);
void copy_bytes_cpu(KBackend *b, void *dst, const void *src, size_t bytes);
void zero_bytes_cpu(KBackend *b, void *x, size_t bytes);

/* x[i] = (float)(std · z(seed, stream, i)), kernels/noise.h's stream (init.c). */
void init_normal_cpu(KBackend *b, float *x, size_t n, double std, uint64_t seed, uint64_t stream);

/* Host memory, 64-byte aligned, not zeroed; freed blocks kept for reuse under the backend's own
   high-water mark (host_memory.c). kcpu_release gives back what is kept (kbackend_destroy). */
void *kcpu_alloc(KBackend *b, size_t bytes);
void kcpu_free(KBackend *b, void *p);
void kcpu_release(KBackend *b);
/* Bytes kept for reuse, handed out, the most ever handed out at once, and allocated anew in all
   (rounded to 64; tests, profile_step). */
void kcpu_cache_stats(const KBackend *b, size_t *kept, size_t *live, size_t *high_water, size_t *fresh);

/* Byte copies (memmove semantics) and zero fills, large ones split over the backend's threads
   (elementwise.c). */
void kcpu_copy_bytes(KBackend *b, void *dst, const void *src, size_t bytes);
void kcpu_zero_bytes(KBackend *b, void *x, size_t bytes);

/* OpenBLAS on one thread (the backend splits large GEMMs itself); called by kbackend_cpu_init. */
void kcpu_blas_single_thread(void);

/* The calling thread's index inside a parallel region (0 outside; 0 without OpenMP). */
int kcpu_thread_index(void);
#endif
