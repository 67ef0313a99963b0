/* kernels_cuda.h — the CUDA backend of kernels.h and the GPU twins of dp_kernels.h and noise.h.

   Usable from C and C++ (no CUDA type appears here), so that the trainer can pick the backend at run
   time: kbackend_cuda_init() makes a KBackend whose ops run on the current GPU (kops_cuda), and
   kbackend_cuda_plan_init() makes a plan backend that predicts that run's tagged allocations exactly
   (same tags, sizes and order; the plan part lives in scratch_cuda.c, plain C, so `--plan-for cuda`
   works in a build that has no GPU and even no CUDA toolkit).

   Structure (kernels/cuda/README.md has the table):
     kernels_cuda.h    this interface                    cuda_common.cuh  cudaCheck, cublasCheck, the context
     scratch_cuda.c    scratch sizes, plan target (C)    backend_cuda.cu  memory, table, init, cuBLAS GEMM
     elementwise.cu    fill/copy/add/scale/reductions/SwiGLU
     embedding.cu  rmsnorm.cu  rope.cu  attention.cu  crossentropy.cu  optimizer.cu
     dp_norms.cu       per-sample norms (direct, ghost, flash), clipping, book-keeping
     noise.cu          Philox noise, the same stream as kernels/cpu/noise.c
     secure_noise.cu   ChaCha20 noise on the grid (--secure-noise), kernels/cpu/secure_noise.c's bits
   Every op is checked against its kernels/cpu twin by tests/test_cuda_kernels.cu.

   One CUDA backend at a time (the cuBLAS handle is process state, created by the init and destroyed
   when kbackend_destroy frees the backend's workspace).
   All pointers passed to ops and dp_*_cuda functions are device pointers; every function here is
   asynchronous on the default stream except reductions (they return a value on the host) and
   noise/init calls that say otherwise.

   bf16 (--precision bf16): every op of the model runs on bf16 storage (KOps.bf16_native), attention
   through cuDNN's fused flash attention (attention_cudnn.cpp); fp32 attention keeps attention.cu.
   Not here: multi-GPU, streams other than the default. */
#ifndef KERNELS_CUDA_H
#define KERNELS_CUDA_H

#ifdef __cplusplus
/* kernels.h and dp_kernels.h are C headers without linkage guards: their system headers first (so
   that they are not declared with C linkage), then the headers themselves as C. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
extern "C" {
#endif
#include "kernels.h"
#include "dp_kernels.h"

/* Sizes the plan must know: fixed, never asked of the device. */
#define KCUDA_CUBLAS_WORKSPACE (32u << 20)  /* cuBLAS workspace, tagged cublas/workspace (Hopper: 32 MiB) */
#define KCUDA_REDUCE_BLOCKS    256          /* partials of a reduction, combined in a fixed order     */
#define KCUDA_RMSNORM_PARTS    64           /* row groups of the RMSNorm weight gradient              */
#define KCUDA_FLASH_BUDGET     (64u << 20)  /* bytes of flash's Gram blocks (and of the tied gather)   */
#define KCUDA_FLASH_QUANTUM    64           /* block rows R: a multiple of this, or T itself         */
#define KCUDA_FLASH_PARTS      256          /* partial sums per (sample, block row), added in order   */
#define KCUDA_MAX_B            4096         /* samples per call of the per-sample norm kernels        */

/* Flash norms' and the tied cross term's scratch on the GPU: pure functions of the shapes, shared by
   the CUDA path and the plan for cuda (samples/dp/dp_norms.c allocates them as ghost/<param>.tile and
   ghost/<param>.tied.tile). R: the largest multiple of KCUDA_FLASH_QUANTUM whose block rows (both
   Gram blocks of every sample, B·R·T floats each) fit KCUDA_FLASH_BUDGET, at least one quantum, and
   T itself where all of T fits. */
static inline int kcuda_rows_in_budget(size_t row_bytes, int T) {
    if (T <= 0) return 1;
    size_t r = row_bytes ? (size_t)KCUDA_FLASH_BUDGET / row_bytes : (size_t)T;
    if (r >= (size_t)T) return T;
    r -= r % KCUDA_FLASH_QUANTUM;
    if (r < KCUDA_FLASH_QUANTUM) r = KCUDA_FLASH_QUANTUM;
    return r > (size_t)T ? T : (int)r;
}
static inline int kcuda_clamp_rows(int T, int R) { return R > T ? T : R < 1 ? 1 : R; }
static inline int kcuda_flash_rows(int B, int T) {
    return kcuda_rows_in_budget(2 * (size_t)(B > 0 ? B : 1) * (size_t)(T > 0 ? T : 0) * sizeof(float), T);
}
/* both Gram blocks [2, B, R, T] (fp32), then the partial sums [B, ceil(T/R), KCUDA_FLASH_PARTS] (double) */
static inline size_t kcuda_flash_floats(int B, int T, int R) {
    if (B <= 0 || T <= 0) return 0;
    R = kcuda_clamp_rows(T, R);
    size_t blocks = ((size_t)T + (size_t)R - 1) / (size_t)R;
    return 2 * (size_t)B * (size_t)R * (size_t)T + 2 * (size_t)B * blocks * KCUDA_FLASH_PARTS;
}
/* the gathered rows of D [B, R, T] in dt (bf16: two per float) */
static inline int kcuda_tied_rows(int B, int T, KDtype dt) {
    return kcuda_rows_in_budget((size_t)(B > 0 ? B : 1) * (size_t)(T > 0 ? T : 0) * KDT_SIZE(dt), T);
}
static inline size_t kcuda_tied_cross_floats(int B, int T, int R, KDtype dt) {
    if (B <= 0 || T <= 0) return 0;
    R = kcuda_clamp_rows(T, R);
    return ((size_t)B * (size_t)R * (size_t)T * KDT_SIZE(dt) + sizeof(float) - 1) / sizeof(float);
}

extern const KOps kops_cuda;         /* the real table (backend_cuda.cu, needs the CUDA runtime)      */
extern const KOps kops_cuda_target;  /* name, space and scratch sizes only: what a plan needs (C)     */

/* Scratch bytes of each op on the CUDA target: a pure function of the shapes. */
size_t kcuda_scratch_bytes(const KBackend *b, KOp op, const KShape *s);
/* The workspace given to cuDNN's fused attention (bf16), forward or backward: a bound that holds
   every engine's request (scratch_cuda.c says why), so that plans do not depend on the cuDNN version. */
size_t kcuda_attention_cudnn_workspace(int B, int T, int NH, int NKV, int HS, int backward);
/* cuDNN's fused causal GQA attention on bf16 [B,T,NH,HS] / [B,T,NKV,HS] storage, lse [B,NH,T] fp32
   (attention_cudnn.cpp); the workspace is kcuda_attention_cudnn_workspace bytes. */
void kcuda_attention_cudnn_forward(void *out, float *lse, const void *q, const void *k, const void *v,
                                   int B, int T, int NH, int NKV, int HS, void *workspace);
void kcuda_attention_cudnn_backward(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                                    const void *v, const void *out, const float *lse,
                                    int B, int T, int NH, int NKV, int HS, void *workspace);
/* The workspace the last graph built asked for (bytes; 0: none built yet), for the bench and the docs. */
size_t kcuda_attention_cudnn_asked(int backward);
/* Frees the cached graphs and the cuDNN handle (the backend's destruction calls it). */
void kcuda_attention_cudnn_release(void);
/* cuDNN's version (cudnnGetVersion), for logs. */
size_t kcuda_cudnn_version(void);

/* 1 when a CUDA device can be used, 0 otherwise (never fails loudly: for "--device auto"). */
int kcuda_device_available(void);
/* A CUDA backend on device `device` (-1: the current one). Allocates the cuBLAS workspace through
   kbuf_alloc as "cublas/workspace" (so it is in the memory breakdown). 0, or -1 with b->err set. */
int kbackend_cuda_init(KBackend *b, int device);
/* A plan backend for the CUDA target, with the same cublas/workspace allocation first. */
int kbackend_cuda_plan_init(KBackend *b);
/* Allocates the workspace on either kind of backend (used by both inits). */
void *kcuda_alloc_cublas_workspace(KBackend *b);

/* GEMM precision of fp32 GEMMs (weights, activations and optimizer state stay fp32 in every mode):
     KCUDA_GEMM_FP32  full fp32
     KCUDA_GEMM_TF32  (default) TF32 tensor cores: inputs rounded to 10-bit mantissas, fp32 accumulation
     KCUDA_GEMM_BF16  bf16 tensor cores: inputs rounded to bf16 (8-bit mantissas) inside cuBLAS, fp32
                      accumulation and output; the fp32 parameters are the master weights
   Read from DPMEM_CUDA_GEMM=fp32|tf32|bf16 (and DPMEM_CUDA_TF32=0 as fp32) by kbackend_cuda_init. */
enum { KCUDA_GEMM_FP32 = 0, KCUDA_GEMM_TF32 = 1, KCUDA_GEMM_BF16 = 2 };
void kcuda_set_gemm_precision(int p);
int  kcuda_gemm_precision(void);
const char *kcuda_gemm_precision_name(void);
void kcuda_set_tf32(int on);   /* 1: TF32, 0: FP32 */
int  kcuda_tf32(void);         /* 1 when the precision is TF32 */
/* Device memory: the stream-ordered pool (default) or cudaMalloc/cudaFree (DPMEM_CUDA_ALLOC=sync).
   Calls of the backend's alloc and free since the start (the trainer prints them per step), whether
   the pool is used, and what the pool holds now (and at most: *high), live blocks and cached ones. */
void kcuda_alloc_counts(unsigned long long *allocs, unsigned long long *frees);
int kcuda_alloc_pooled(void);
size_t kcuda_pool_reserved(size_t *high);
/* Waits for the device and reports an asynchronous kernel error, with `where`, as exit(1). */
void kcuda_sync_check(const char *where);

/* ---- DP on the GPU: the same contracts as dp_kernels.h, on device pointers ---------------------- */
/* psg [B, OC, IC] device; norm2[b] += ‖psg[b]‖² (one batched GEMM + a per-sample square sum). */
void dp_linear_norms_direct_cuda(float *norm2, float *psg, const float *a, const float *g,
                                 int B, int T, int IC, int OC, DpIO *io);
/* gram [2, B, T, T] device (two batched GEMMs), then norm2[b] += ⟨aaᵀ, ggᵀ⟩. */
void dp_linear_norms_ghost_cuda(float *norm2, float *gram, const float *a, const float *g,
                                int B, int T, int IC, int OC, DpIO *io);
/* Ghost norm in block rows (flash on tensor cores): time is cut into blocks of R rows; for each block
   row I two strided-batched cuBLAS GEMMs form a_I a_{0..I}ᵀ and g_I g_{0..I}ᵀ (R × (I+1)R, K = IC
   and OC, every sample at once) into `tile`, then one kernel adds 2·Σ of the off-diagonal blocks'
   elementwise products and 1·Σ of the diagonal block's into fixed partial slots (double), and a last
   kernel adds each sample's partials in order into norm2: the same result every run. `tile` holds
   kcuda_flash_floats(B, T, R) floats (device); R is clamped to [1, T]. The trainer takes R from
   kcuda_flash_rows(B, T): the scratch is bounded by the block, never T². */
void dp_linear_norms_flash_cuda(float *norm2, float *tile, const float *a, const float *g,
                                int B, int T, int IC, int OC, int R, DpIO *io);
void dp_linear_clipped_grad_bk_cuda(float *dw, const float *a, const float *g, const float *c,
                                    int B, int T, int IC, int OC);
void dp_embedding_norms_cuda(float *norm2, const int *tokens, const float *g, int B, int T, int C, DpIO *io);
/* Rows whose token was outside [0, V) in the embedding kernels (forward, backward, book-keeping scatter:
   skipped, nothing written out of the table) since the last call; resets the count. A read-back (it waits
   for the queue): call it where the caller synchronises anyway. */
unsigned long long kcuda_bad_tokens(void);
void dp_embedding_clipped_grad_bk_cuda(float *dwte, const int *tokens, const float *g, const float *c,
                                       int B, int T, int C, int V);
void dp_rmsnorm_norms_direct_cuda(float *norm2, float *psg, const float *dout, const float *inp,
                                  const float *rstd, int B, int T, int C);
void dp_clip_factors_cuda(float *c, const float *norm2, int B, float max_norm);
void dp_clipped_sum_cuda(float *grad, const float *psg, const float *c, int B, size_t P);
void dp_clipped_sum_first_cuda(float *grad, const float *rest, const float *c, int B, size_t P);

/* The same on bf16 activations (dt = KDT_BF16: a and g, dout and inp, g of the embedding are bf16;
   everything else fp32): GEMMs (direct, ghost, flash's Gram blocks, book-keeping) with bf16 operands
   and CUBLAS_COMPUTE_32F (tensor cores, exact products, fp32 sums), the embedding and RMSNorm kernels
   load bf16 and compute as the fp32 ones. dt = KDT_F32 is the entry above. */
void dp_linear_norms_direct_cuda_dt(float *norm2, float *psg, const float *a, const float *g,
                                    int B, int T, int IC, int OC, KDtype dt, DpIO *io);
void dp_linear_norms_ghost_cuda_dt(float *norm2, float *gram, const float *a, const float *g,
                                   int B, int T, int IC, int OC, KDtype dt, DpIO *io);
void dp_linear_norms_flash_cuda_dt(float *norm2, float *tile, const float *a, const float *g,
                                   int B, int T, int IC, int OC, int R, KDtype dt, DpIO *io);
void dp_linear_clipped_grad_bk_cuda_dt(float *dw, const float *a, const float *g, const float *c,
                                       int B, int T, int IC, int OC, KDtype dt);
/* The same with the factors c_host [B] in host memory (read back once per physical batch by the
   caller, not once per layer: each read-back waits for the whole queue). */
void dp_linear_clipped_grad_bk_hostc_cuda_dt(float *dw, const float *a, const float *g, const float *c_host,
                                             int B, int T, int IC, int OC, KDtype dt);
void dp_embedding_norms_cuda_dt(float *norm2, const int *tokens, const float *g, int B, int T, int C, KDtype dt, DpIO *io);
void dp_embedding_clipped_grad_bk_cuda_dt(float *dwte, const int *tokens, const float *g, const float *c,
                                          int B, int T, int C, int V, KDtype dt);
void dp_rmsnorm_norms_direct_cuda_dt(float *norm2, float *psg, const float *dout, const float *inp,
                                     const float *rstd, int B, int T, int C, KDtype dt);
/* Tied embeddings (dp_kernels.h's dp_tied_cross_u, dp_tied_cross_dot, dp_psg_norms): dlogits, a and g
   are of dt, u and psg fp32. u = D A in block rows of R: D's rows I (D[t,s] = dlogits_s[tok_t], of dt:
   an exact gather) into `scratch` (kcuda_tied_cross_floats(B, T, R, dt) floats), then one strided-
   batched GEMM with fp32 accumulation per block row. R is clamped to [1, T]; kcuda_tied_rows. */
void dp_tied_cross_u_cuda_dt(float *u, float *scratch, const int *tokens, const float *dlogits, const float *a,
                             int B, int T, int C, int V, int R, KDtype dt, DpIO *io);
void dp_tied_cross_dot_cuda_dt(float *norm2, const float *g, const float *u, int B, int T, int C, KDtype dt, DpIO *io);
void dp_psg_norms_cuda(float *norm2, const float *psg, int B, size_t P);
/* dp_clip_factors_safe's twin (dp_kernels.h). */
void dp_clip_factors_safe_cuda(float *c, const float *norm2, int B, float max_norm, double rel);
/* The DP step's noise and AdamW in one pass (dp_kernels.h's dp_noisy_adamw, dp_update.cu): the bits of
   noise_privatize_cuda followed by adamw_update on the GPU. Device pointers. */
void dp_noisy_adamw_cuda(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, const DpNoise *noise,
                         const DpAdamW *opt, int keep_noised);

/* ---- noise (kernels/noise.h's stream: value i is z(seed, step, offset + i)) --------------------- */
void noise_add_gaussian_cuda(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset);
void noise_privatize_cuda(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                          uint64_t seed, uint64_t step, uint64_t offset);

/* ---- the secure noise (--secure-noise: kernels/secure_noise.h, ChaCha20 with a 256-bit key) ------- */
/* secure_noise_privatize's twin (secure_noise.cu): the CPU's bits. key: the 8 words of a SecureKey. */
void secure_noise_privatize_cuda(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                                 const uint32_t key[8], uint64_t step, uint64_t offset);
/* The fused update with it (noise->seed unused): secure_noise_privatize_cuda followed by adamw_update. */
void secure_noisy_adamw_cuda(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, const DpNoise *noise,
                             const uint32_t key[8], const DpAdamW *opt);

#ifdef __cplusplus
}
#endif
#endif /* KERNELS_CUDA_H */
