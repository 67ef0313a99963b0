/* kernels.h — the one interface between the LLaMA model and the machine that runs it.

   A KBackend is a device: the CPU (kernels/cpu, OpenBLAS + OpenMP, fp32), the plan backend
   (kernels/plan: records every allocation exactly and computes nothing) or CUDA (kernels/cuda,
   the same table). The model calls the wrappers below (matmul_forward, attention_backward,
   ...); they ask the backend how much scratch the op needs (a pure function of the shapes and the
   target), allocate it through kbuf_alloc under a fixed `workspace/...` tag, run the op and free the
   scratch. So a plan run replays the allocation sequence of a real run of its target exactly
   (tests/test_llama_memory.c checks it event by event against the CPU).
   A new backend: fill a KOps (compute entries never allocate; scratch_bytes says what each op
   needs, from KShape alone), init a KBackend with it, and allocate anything of its own (cuBLAS
   workspace...) through kbuf_alloc too.

   Every buffer is allocated with kbuf_alloc(b, bytes, "category/name"), which tags it with
   dpmem (DPMEM_TAG_ALLOC) in the backend's memory space and enforces the backend's memory limit:
   above it, dpmem_oom() records the failed request and kbuf_alloc returns NULL, the op returns -1
   and kbackend_error(b) says what failed.

   Dimension letters: B batch, T sequence length, C model width, NH query heads, NKV key/value heads
   (GQA: query head h reads kv head h / (NH/NKV)), HS head size, F FFN width, V vocabulary,
   N = B*T rows. All tensors are row-major fp32 unless said otherwise; token ids are int32.

   Mixed precision (bf16 storage, fp32 arithmetic): a KDtype says how a buffer stores its elements.
   GEMMs take bf16 operands natively (gemm_ex: fp32 accumulation, fp32 or bf16 output; OpenBLAS's
   cblas_sbgemm on the CPU where the library exports it, else the operands are widened into tagged
   scratch; cuBLAS GemmEx on the GPU). Every other op keeps its one fp32 implementation: the `_ex`
   wrappers below take the storage type of the activations and, for bf16, widen the inputs into
   fp32 workspace (workspace/widen.<op>), run the fp32 op, and round the outputs back to bf16
   (round to nearest even) — conversion at the op boundary, as autocast does for its fp32 ops —
   piece by piece (at most 2^20 elements per operand, or one sample for RoPE and attention), so the
   fp32 twins stay small whatever B·T is.
   Pointers to bf16 buffers are passed as float * (the storage is uint16_t): offset them with
   kact_at(), never with float arithmetic.
   A target that runs the ops on bf16 storage itself (KOps.bf16_native: CUDA) gets them without the
   widening: the same values (one rounding per output), no fp32 twins, no extra passes over memory;
   its attention is cuDNN's fused flash attention (bf16 in, fp32 statistics).

   Not here: fused kernels beyond what the model needs, native bf16 element-wise ops on the CPU (it
   widens), the DP per-sample norm kernels (kernels/cpu/dp_*.c, their own interface). */
#ifndef KERNELS_H
#define KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { KB_CPU = 0, KB_PLAN = 1, KB_CUDA = 2 };

/* How a buffer stores its elements. */
typedef enum { KDT_F32 = 0, KDT_BF16 = 1 } KDtype;
#define KDT_SIZE(t) ((t) == KDT_BF16 ? (size_t)2 : (size_t)4)

/* Ops that may need scratch; the scratch size is scratch_bytes(target, op, shape). */
typedef enum {
    KOP_ATTENTION_FORWARD = 0, KOP_ATTENTION_BACKWARD, KOP_RMSNORM_BACKWARD, KOP_EMBEDDING_BACKWARD,
    KOP_CROSSENTROPY_FORWARD, KOP_CROSSENTROPY_BACKWARD, KOP_REDUCE, KOP_GEMM_EX, KOP_COUNT
} KOp;

/* Every size an op's scratch may depend on (unused ones 0). KOP_GEMM_EX: M, N, K, the transposes,
   the operands' type ab and the output's type c (one product: the batch reuses the scratch). */
typedef struct { int B, T, C, NH, NKV, HS, V; size_t n; int M, N, K, transA, transB; KDtype ab, c; } KShape;

typedef struct KBackend KBackend;

/* RoPE frequencies: inv_freq_i = theta^(-2i/HS) for i < HS/2 and, when factor > 0, Llama 3.1/3.2's
   "llama3" scaling (transformers' _compute_llama3_parameters): wavelengths above
   original_max_pos/low_freq_factor are stretched by factor, those below original_max_pos/high_freq_factor
   kept, those between blended. fp32, as transformers computes them. */
typedef struct { float theta, factor, low_freq_factor, high_freq_factor, original_max_pos; } KRope;
#ifdef __CUDACC__
#define KROPE_FN static inline __host__ __device__
#else
#define KROPE_FN static inline
#endif
/* fp32 -> bf16, round to nearest even (as torch's .to(torch.bfloat16)); NaN stays a quiet NaN of the
   same sign, ±Inf stays ±Inf, values above the largest bf16 round to ±Inf. bf16 -> fp32 is exact. */
KROPE_FN uint16_t kbf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
KROPE_FN float kbf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

KROPE_FN float krope_inv_freq(KRope r, int i, int HS) {
    float f = 1.0f / powf(r.theta, (float)(2 * i) / (float)HS);
    if (r.factor > 0.0f) {
        float wavelen = 6.283185307179586f / f;
        if (wavelen > r.original_max_pos / r.low_freq_factor) f = f / r.factor;
        else if (wavelen >= r.original_max_pos / r.high_freq_factor) {
            float s = (r.original_max_pos / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
            f = (1.0f - s) * f / r.factor + s * f;
        }
    }
    return f;
}

/* What a backend implements. The compute entries receive device pointers and scratch already
   allocated; they cannot fail. A plan backend's entries do nothing. */
typedef struct KOps {
    const char *name;                                     /* "cpu", "cuda" */
    int space;                                            /* DPMEM_HOST or DPMEM_DEVICE */
    void  *(*alloc)(KBackend *b, size_t bytes);           /* NULL when the device is full; need not be zeroed */
    void   (*free)(KBackend *b, void *p);
    /* The device's used and total bytes (cudaMemGetInfo), for the OOM post-mortem; NULL: not known. */
    int    (*meminfo)(KBackend *b, size_t *used, size_t *total);
    void   (*upload)(KBackend *b, void *dst, const void *src, size_t bytes);
    void   (*download)(KBackend *b, void *dst, const void *src, size_t bytes);
    size_t (*scratch_bytes)(const KBackend *b, KOp op, const KShape *s);
    /* C[i] = alpha op(A[i]) op(B[i]) + beta C[i] for i < batch; row-major; op(X) = Xᵀ when trans. */
    void (*gemm)(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                 const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
                 float beta, float *C, int ldc, long long strideC, int batch);
    void (*fill)(KBackend *b, float *x, float value, size_t n);
    void (*copy)(KBackend *b, float *dst, const float *src, size_t n);
    void (*add)(KBackend *b, float *y, const float *x, size_t n);              /* y += x */
    void (*scale)(KBackend *b, float *x, float s, size_t n);
    /* Reductions return on the host. */
    double (*sum)(KBackend *b, const float *x, size_t n, void *scratch);
    double (*sumsq)(KBackend *b, const float *x, size_t n, void *scratch);
    size_t (*count_nonfinite)(KBackend *b, const float *x, size_t n, void *scratch);
    void (*embedding_forward)(KBackend *b, float *out, const int *tokens, const float *wte, int N, int C);
    /* V: the table's rows; a token outside [0, V) is skipped (a backend may count it: kcuda_bad_tokens) */
    void (*embedding_backward)(KBackend *b, float *dwte, const int *tokens, const float *dout, int N, int C, int V,
                               void *scratch);
    void (*rmsnorm_forward)(KBackend *b, float *out, float *rstd, const float *inp, const float *w,
                            int N, int C, float eps);
    void (*rmsnorm_backward)(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                             const float *w, const float *rstd, int N, int C, void *scratch);
    void (*rope_forward)(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope);
    void (*rope_backward)(KBackend *b, float *dx, int B, int T, int NH, int HS, KRope rope);
    void (*attention_forward)(KBackend *b, float *out, float *lse, const float *q, const float *k,
                              const float *v, int B, int T, int NH, int NKV, int HS, void *scratch);
    void (*attention_backward)(KBackend *b, float *dq, float *dk, float *dv, const float *dout,
                               const float *q, const float *k, const float *v, const float *out,
                               const float *lse, int B, int T, int NH, int NKV, int HS, void *scratch);
    void (*swiglu_forward)(KBackend *b, float *h, const float *gate, const float *up, size_t n);
    void (*swiglu_backward)(KBackend *b, float *dgate, float *dup, const float *dh, const float *gate,
                            const float *up, size_t n);
    void (*crossentropy_forward)(KBackend *b, float *losses, const float *logits, const int *targets,
                                 int N, int V, void *scratch);
    void (*crossentropy_backward)(KBackend *b, float *logits_to_dlogits, const int *targets, float scale,
                                  const float *sample_weight, int B, int T, int V, void *scratch);
    void (*adamw)(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int t);
    void (*sgd)(KBackend *b, float *p, const float *g, size_t n, float lr, float weight_decay);
    /* ---- mixed precision ---- */
    /* gemm with operands A, B of type ab and output C of type c (void pointers: either storage),
       fp32 accumulation; scratch: scratch_bytes(KOP_GEMM_EX). ab = c = KDT_F32 is never passed. */
    void (*gemm_ex)(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                    const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
                    float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c, void *scratch);
    void (*widen)(KBackend *b, float *dst, const void *src_bf16, size_t n);   /* exact */
    void (*narrow)(KBackend *b, void *dst_bf16, const float *src, size_t n);  /* round to nearest even */
    /* In place: the n floats at x become n bf16 values in its first 2n bytes. */
    void (*narrow_inplace)(KBackend *b, void *x, size_t n);
    void (*copy_bytes)(KBackend *b, void *dst, const void *src, size_t bytes);
    void (*zero_bytes)(KBackend *b, void *x, size_t bytes);
    /* ---- initialisation (kernels/init.c) ---- */
    /* x[i] = (float)(std · z(seed, stream, i)) for i < n: kernels/noise.h's normal stream, `stream`
       in the place of its step. */
    void (*init_normal)(KBackend *b, float *x, size_t n, double std, uint64_t seed, uint64_t stream);
    /* ---- native bf16 (a target with bf16_native = 1 fills every entry below; 0: the _ex wrappers
       widen into fp32 workspace instead) ----
       The same ops as above on bf16 storage (void pointers: uint16_t elements), fp32 arithmetic,
       each output rounded once to nearest even: the values the widening path gives, without its fp32
       twins. Statistics (rstd, lse), weights and weight gradients stay fp32. Attention may use
       another algorithm (cuDNN's fused flash attention on CUDA): its scratch is
       scratch_bytes(KOP_ATTENTION_*, shape with ab = KDT_BF16). */
    int bf16_native;
    void (*embedding_forward_bf16)(KBackend *b, void *out, const int *tokens, const float *wte, int N, int C);
    void (*embedding_backward_bf16)(KBackend *b, float *dwte, const int *tokens, const void *dout, int N, int C,
                                    int V, void *scratch);
    void (*rmsnorm_forward_bf16)(KBackend *b, void *out, float *rstd, const void *inp, const float *w,
                                 int N, int C, float eps);
    /* dinp (bf16) += ...; dinp may be NULL (the weight's gradient alone), dw may be NULL */
    void (*rmsnorm_backward_bf16)(KBackend *b, void *dinp, float *dw, const void *dout, const void *inp,
                                  const float *w, const float *rstd, int N, int C, void *scratch);
    void (*rope_forward_bf16)(KBackend *b, void *x, int B, int T, int NH, int HS, KRope rope);
    void (*rope_backward_bf16)(KBackend *b, void *dx, int B, int T, int NH, int HS, KRope rope);
    void (*attention_forward_bf16)(KBackend *b, void *out, float *lse, const void *q, const void *k,
                                   const void *v, int B, int T, int NH, int NKV, int HS, void *scratch);
    void (*attention_backward_bf16)(KBackend *b, void *dq, void *dk, void *dv, const void *dout,
                                    const void *q, const void *k, const void *v, const void *out,
                                    const float *lse, int B, int T, int NH, int NKV, int HS, void *scratch);
    void (*swiglu_forward_bf16)(KBackend *b, void *h, const void *gate, const void *up, size_t n);
    void (*swiglu_backward_bf16)(KBackend *b, void *dgate, void *dup, const void *dh, const void *gate,
                                 const void *up, size_t n);
} KOps;

/* One live allocation, as the backend remembers it (for kbackend_free_all and tests). */
typedef struct { void *p; size_t bytes; const char *tag; } KLive;

/* Called for each allocation (bytes > 0) and free (bytes == 0) when set: tests compare runs with it. */
typedef void (*KTraceFn)(void *user, const char *tag, size_t bytes, int is_alloc);

struct KBackend {
    int kind;                 /* KB_CPU, KB_PLAN, KB_CUDA: who computes */
    const KOps *ops;          /* compute table (plan: no-ops) */
    const KOps *target;       /* whose scratch sizes and memory space are used (itself unless plan) */
    int space;                /* dpmem memory space of its buffers */
    int nthreads;             /* CPU threads the target's ops use (scratch may depend on it) */
    size_t mem_limit;         /* 0: none */
    size_t live, peak;        /* bytes through kbuf_alloc */
    uint64_t next_fake;       /* plan: next fake address */
    KLive *lives; int n_live, cap_live;
    KTraceFn trace; void *trace_user;
    void *priv;               /* the backend's own state (the CPU's cache of freed blocks) */
    void (*release)(KBackend *b);   /* kbackend_destroy: gives back what priv holds; NULL: nothing */
    struct KCostLedger *cost; /* plan: each op's FLOPs and bytes go here when set (kernels/plan/cost.h) */
    int overwritten;          /* set during kbuf_alloc_overwritten: the CUDA backend skips its zero-fill */
    char err[256];
};

/* Backends. kbackend_plan_init(b, &kops_cpu, n) plans for the CPU (n threads; <= 0: OpenMP's
   default); for the CUDA target use kbackend_cuda_plan_init (kernels/cuda/kernels_cuda.h), which
   also records the cuBLAS workspace a CUDA backend allocates first. */
extern const KOps kops_cpu;
extern const KOps kops_plan;
void kbackend_cpu_init(KBackend *b, int nthreads);   /* nthreads <= 0: OpenMP's default */
void kbackend_plan_init(KBackend *b, const KOps *target, int nthreads);
void kbackend_free_all(KBackend *b);                  /* frees whatever is still live (error paths) */
void kbackend_destroy(KBackend *b);
const char *kbackend_error(const KBackend *b);
int  kbackend_computes(const KBackend *b);            /* 0 for plan: buffers must not be touched */
int  kcpu_max_threads(void);

/* Tagged buffers. bytes == 0 gives NULL and is no error. */
/* Live bytes through kbuf_alloc stay under 1 EiB (2^60): a request past it is refused (NULL, b->err
   says so) before a 64-bit byte count can wrap, as config_check refuses a model past 1 EiB. */
#define KBUF_MAX_LIVE ((size_t)1 << 60)
void  *kbuf_alloc(KBackend *b, size_t bytes, const char *tag);
/* The same, for a buffer whose every byte is written before anything reads it (a GEMM's output with
   beta = 0, a copy's destination): the CUDA backend skips the zero-fill it gives kbuf_alloc's buffers
   (with DPMEM_CUDA_POISON=1 it fills NaN bytes instead, so that a test catches a wrong claim; the CPU
   backend never zero-fills and poisons every buffer under the sanitizers). */
void  *kbuf_alloc_overwritten(KBackend *b, size_t bytes, const char *tag);
void   kbuf_free(KBackend *b, void *p);
int    kbuf_upload(KBackend *b, void *dst, const void *src, size_t bytes);
int    kbuf_download(KBackend *b, void *dst, const void *src, size_t bytes);
/* "2G", "512M", "1.5GiB", "1000000" -> bytes; -1 on garbage. */
long long parse_bytes(const char *s);

/* The ops, as the model calls them. All return 0, or -1 (scratch did not fit: kbackend_error). */
int gemm_strided_batched(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                         const float *A, int lda, long long strideA, const float *B, int ldb,
                         long long strideB, float beta, float *C, int ldc, long long strideC, int batch);
/* y[N,OC] = beta*y + x[N,IC] W[OC,IC]ᵀ  (a bias-free linear layer) */
int matmul_forward(KBackend *b, float *y, const float *x, const float *w, int N, int IC, int OC, float beta);
/* dx[N,IC] = beta*dx + dy W;   dW[OC,IC] += dyᵀ x */
int matmul_backward_input(KBackend *b, float *dx, const float *dy, const float *w, int N, int IC, int OC, float beta);
int matmul_backward_weight(KBackend *b, float *dw, const float *dy, const float *x, int N, int IC, int OC);
int fill_buffer(KBackend *b, float *x, float value, size_t n);
int copy_buffer(KBackend *b, float *dst, const float *src, size_t n);
int add_inplace(KBackend *b, float *y, const float *x, size_t n);
int scale_inplace(KBackend *b, float *x, float s, size_t n);
int reduce_sum(KBackend *b, const float *x, size_t n, double *out);
int reduce_sumsq(KBackend *b, const float *x, size_t n, double *out);
int count_nonfinite(KBackend *b, const float *x, size_t n, size_t *out);
int embedding_forward(KBackend *b, float *out, const int *tokens, const float *wte, int N, int C);
/* dwte[V,C] += scatter of dout rows by token */
int embedding_backward(KBackend *b, float *dwte, const int *tokens, const float *dout, int N, int C, int V);
/* out = inp * rstd * w, rstd[N] saved for backward */
int rmsnorm_forward(KBackend *b, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
/* dinp[N,C] += ..., dw[C] += ... (dw may be NULL: frozen; dinp may be NULL: the weight's gradient
   alone, for a second backward that scales it per sample) */
int rmsnorm_backward(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                     const float *w, const float *rstd, int N, int C);
/* In place on x[B,T,NH,HS], position = t, rotate-half convention (Hugging Face). */
int rope_forward(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope);
int rope_backward(KBackend *b, float *dx, int B, int T, int NH, int HS, KRope rope);
/* Causal, tiled with online softmax: out[B,T,NH,HS], lse[B,NH,T] (natural log of each row's softmax
   denominator, scores scaled by 1/sqrt(HS)); q[B,T,NH,HS], k,v[B,T,NKV,HS]. No T×T buffer. */
int attention_forward(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                      int B, int T, int NH, int NKV, int HS);
/* dq, dk, dv are overwritten. Scratch: workspace/attn_delta (B*NH*T) and the target's own. */
int attention_backward(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                       const float *k, const float *v, const float *out, const float *lse,
                       int B, int T, int NH, int NKV, int HS);
/* h = silu(gate) * up */
int swiglu_forward(KBackend *b, float *h, const float *gate, const float *up, size_t n);
int swiglu_backward(KBackend *b, float *dgate, float *dup, const float *dh, const float *gate,
                    const float *up, size_t n);
/* losses[N] = logsumexp(logits row) - logit[target] */
int crossentropy_forward(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V);
/* In place: logits[B*T,V] become dlogits = (softmax - onehot) * scale * sample_weight[b]
   (sample_weight: a device vector [B], or NULL for 1). */
int crossentropy_backward(KBackend *b, float *logits, const int *targets, float scale,
                          const float *sample_weight, int B, int T, int V);
/* AdamW (decoupled decay), t >= 1 the step count for bias correction. */
int adamw_update(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
                 float beta1, float beta2, float eps, float weight_decay, int t);
int sgd_update(KBackend *b, float *p, const float *g, size_t n, float lr, float weight_decay);

/* ---- mixed precision (see the top of this file) ------------------------------------------------ */
/* The element at index i of a buffer of type dt. */
static inline float *kact_at(const float *p, size_t i, KDtype dt) {
    return (float *)(uintptr_t)((const char *)p + i * KDT_SIZE(dt));
}
int gemm_ex(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
            const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
            float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c);
/* The matmul_* above with x, dy, w of type dt and y (or dx) of type ydt; dW is fp32. */
int matmul_forward_ex(KBackend *b, KDtype dt, KDtype ydt, float *y, const float *x, const float *w,
                      int N, int IC, int OC, float beta);
int matmul_backward_input_ex(KBackend *b, KDtype dt, float *dx, const float *dy, const float *w,
                             int N, int IC, int OC, float beta);
int matmul_backward_weight_ex(KBackend *b, KDtype dt, float *dw, const float *dy, const float *x,
                              int N, int IC, int OC);
int widen_buffer(KBackend *b, float *dst, const float *src_bf16, size_t n);
int narrow_buffer(KBackend *b, float *dst_bf16, const float *src, size_t n);
int narrow_inplace(KBackend *b, float *x, size_t n);
/* n elements of type dt: copied, zeroed. */
int copy_ex(KBackend *b, KDtype dt, float *dst, const float *src, size_t n);
int zero_ex(KBackend *b, KDtype dt, float *x, size_t n);
/* The model's ops with activations (and activation gradients) stored as dt; for dt = KDT_F32 each is
   the plain op. Statistics (rstd, lse), weights and weight gradients stay fp32. */
int embedding_forward_ex(KBackend *b, KDtype dt, float *out, const int *tokens, const float *wte, int N, int C);
int embedding_backward_ex(KBackend *b, KDtype dt, float *dwte, const int *tokens, const float *dout, int N, int C, int V);
int rmsnorm_forward_ex(KBackend *b, KDtype dt, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
int rmsnorm_backward_ex(KBackend *b, KDtype dt, float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C);
int rope_forward_ex(KBackend *b, KDtype dt, float *x, int B, int T, int NH, int HS, KRope rope);
int rope_backward_ex(KBackend *b, KDtype dt, float *dx, int B, int T, int NH, int HS, KRope rope);
int attention_forward_ex(KBackend *b, KDtype dt, float *out, float *lse, const float *q, const float *k, const float *v,
                         int B, int T, int NH, int NKV, int HS);
int attention_backward_ex(KBackend *b, KDtype dt, float *dq, float *dk, float *dv, const float *dout, const float *q,
                          const float *k, const float *v, const float *out, const float *lse,
                          int B, int T, int NH, int NKV, int HS);
int swiglu_forward_ex(KBackend *b, KDtype dt, float *h, const float *gate, const float *up, size_t n);
int swiglu_backward_ex(KBackend *b, KDtype dt, float *dgate, float *dup, const float *dh, const float *gate,
                       const float *up, size_t n);

/* ---- initialisation (kernels/init.c) ------------------------------------------------------------
   Random weights drawn on the device that holds them, from kernels/noise.h's Philox4x32-10 +
   Box-Muller stream: x[i] = (float)(std · z(seed, stream, i)), z the standard normal value of
   coordinate i with `stream` in the place of the noise's step. Every value is a function of
   (seed, stream, i) alone: the CPU (any thread count) and the GPU give the same floats (the GPU's
   double ln/sin/cos may differ from the CPU's by an ulp: noise.h). No scratch. */
int init_normal(KBackend *b, float *x, size_t n, double std, uint64_t seed, uint64_t stream);

/* Scratch sizes of the CPU target (kernels/cpu/scratch.c); a CUDA table has its own. */
size_t kcpu_scratch_bytes(const KBackend *b, KOp op, const KShape *s);
/* 1 when the CPU's GEMMs with bf16 operands go to OpenBLAS's cblas_sbgemm (found at run time with
   dlsym: Debian's 0.3.21 declares it but does not export it), 0 when they widen into scratch.
   DPMEM_CPU_SBGEMM=0 forces the widening path. The CPU plan asks the same question. */
int kcpu_have_sbgemm(void);

#endif /* KERNELS_H */
