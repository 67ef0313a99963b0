/* ops_cuda.h — the CUDA backend's op implementations, one .cu file per concept, for the table in
   backend_cuda.cu. Signatures are the KOps entries of kernels.h; pointers are device pointers.
   Not here: allocation, scratch sizes (scratch_cuda.c), the DP kernels (kernels_cuda.h). */
#ifndef KCUDA_OPS_H
#define KCUDA_OPS_H
#include "kernels_cuda.h"

void gemm_cuda(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
               const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
               float beta, float *C, int ldc, long long strideC, int batch);
void fill_cuda(KBackend *b, float *x, float value, size_t n);
void copy_cuda(KBackend *b, float *dst, const float *src, size_t n);
void add_cuda(KBackend *b, float *y, const float *x, size_t n);
void scale_cuda(KBackend *b, float *x, float s, size_t n);
double sum_cuda(KBackend *b, const float *x, size_t n, void *scratch);
double sumsq_cuda(KBackend *b, const float *x, size_t n, void *scratch);
size_t count_nonfinite_cuda(KBackend *b, const float *x, size_t n, void *scratch);
void embedding_forward_cuda(KBackend *b, float *out, const int *tokens, const float *wte, int N, int C);
void embedding_backward_cuda(KBackend *b, float *dwte, const int *tokens, const float *dout, int N, int C, int V,
                             void *scratch);
void rmsnorm_forward_cuda(KBackend *b, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
void rmsnorm_backward_cuda(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                           const float *w, const float *rstd, int N, int C, void *scratch);
void rope_forward_cuda(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope);
void rope_backward_cuda(KBackend *b, float *dx, int B, int T, int NH, int HS, KRope rope);
void attention_forward_cuda(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                            int B, int T, int NH, int NKV, int HS, void *scratch);
void attention_backward_cuda(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                             const float *k, const float *v, const float *out, const float *lse,
                             int B, int T, int NH, int NKV, int HS, void *scratch);
void swiglu_forward_cuda(KBackend *b, float *h, const float *gate, const float *up, size_t n);
void swiglu_backward_cuda(KBackend *b, float *dgate, float *dup, const float *dh, const float *gate,
                          const float *up, size_t n);
void crossentropy_forward_cuda(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V,
                               void *scratch);
void crossentropy_backward_cuda(KBackend *b, float *logits, const int *targets, float scale,
                                const float *sample_weight, int B, int T, int V, void *scratch);
void adamw_cuda(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, int t);
void sgd_cuda(KBackend *b, float *p, const float *g, size_t n, float lr, float weight_decay);

/* mixed precision (convert.cu; gemm_ex_cuda in backend_cuda.cu) */
void gemm_ex_cuda(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                  const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
                  float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c, void *scratch);
void widen_cuda(KBackend *b, float *dst, const void *src, size_t n);
void narrow_cuda(KBackend *b, void *dst, const float *src, size_t n);
void narrow_inplace_cuda(KBackend *b, void *x, size_t n);
void copy_bytes_cuda(KBackend *b, void *dst, const void *src, size_t bytes);
void zero_bytes_cuda(KBackend *b, void *x, size_t bytes);
/* initialisation (init.cu): x[i] = (float)(std · z(seed, stream, i)), kernels/noise.h's stream */
void init_normal_cuda(KBackend *b, float *x, size_t n, double std, uint64_t seed, uint64_t stream);
/* A GEMM with operands of type ab and output of type c, fp32 accumulation (CUBLAS_COMPUTE_32F, no
   reduced-precision shortcuts): the DP kernels' products on bf16 activations. */
void kcuda_gemm_ex_fp32acc(int transA, int transB, int M, int N, int K, float alpha,
                           const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
                           float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c);

/* native bf16 (kernels.h's _bf16 entries): the same kernels on uint16_t storage; attention through
   cuDNN (attention_cudnn.cpp) */
void embedding_forward_bf16_cuda(KBackend *b, void *out, const int *tokens, const float *wte, int N, int C);
void embedding_backward_bf16_cuda(KBackend *b, float *dwte, const int *tokens, const void *dout, int N, int C, int V,
                                  void *scratch);
void rmsnorm_forward_bf16_cuda(KBackend *b, void *out, float *rstd, const void *inp, const float *w, int N, int C, float eps);
void rmsnorm_backward_bf16_cuda(KBackend *b, void *dinp, float *dw, const void *dout, const void *inp,
                                const float *w, const float *rstd, int N, int C, void *scratch);
void rope_forward_bf16_cuda(KBackend *b, void *x, int B, int T, int NH, int HS, KRope rope);
void rope_backward_bf16_cuda(KBackend *b, void *dx, int B, int T, int NH, int HS, KRope rope);
void attention_forward_bf16_cuda(KBackend *b, void *out, float *lse, const void *q, const void *k, const void *v,
                                 int B, int T, int NH, int NKV, int HS, void *scratch);
void attention_backward_bf16_cuda(KBackend *b, void *dq, void *dk, void *dv, const void *dout, const void *q,
                                  const void *k, const void *v, const void *out, const float *lse,
                                  int B, int T, int NH, int NKV, int HS, void *scratch);
void swiglu_forward_bf16_cuda(KBackend *b, void *h, const void *gate, const void *up, size_t n);
void swiglu_backward_bf16_cuda(KBackend *b, void *dgate, void *dup, const void *dh, const void *gate,
                               const void *up, size_t n);

/* Full-fp32 GEMM whatever the precision setting: the DP kernels use it (see dp_norms.cu). */
void kcuda_gemm_fp32(int transA, int transB, int M, int N, int K, float alpha,
                     const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
                     float beta, float *C, int ldc, long long strideC, int batch);

/* Embedding scatter-add into a table of V rows with an optional per-sample weight w[n / T] (book-keeping
   uses it). A token outside [0, V) is skipped and counted on the device. */
void kcuda_embedding_scatter(float *dwte, const int *tokens, const float *dout, const float *w,
                             int N, int T, int C, int V);
void kcuda_embedding_scatter_dt(float *dwte, const int *tokens, const void *dout, const float *w,
                                int N, int T, int C, int V, KDtype dt);
#endif
