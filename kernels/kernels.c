/* kernels.c — the backend-independent half of kernels.h: tagged buffers (kbuf_*), the memory limit,
   and the op wrappers that request each op's scratch through kbuf_alloc before running it.

   Because scratch is allocated HERE, from sizes the target computes from shapes, a plan backend
   and a real backend of the same target go through the same sequence of tagged allocations.
   Not here: any arithmetic (kernels/cpu, kernels/cuda) or the plan backend itself (kernels/plan). */
#include "kernels.h"
#include "dpmem.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kbackend_error(const KBackend *b) { return b->err[0] ? b->err : "no error"; }
int kbackend_computes(const KBackend *b) { return b->kind != KB_PLAN; }

static int live_push(KBackend *b, void *p, size_t bytes, const char *tag) {
    if (b->n_live == b->cap_live) {
        int cap = b->cap_live ? 2 * b->cap_live : 256;
        KLive *nl = realloc(b->lives, (size_t)cap * sizeof *nl);
        if (!nl) return -1;
        b->lives = nl; b->cap_live = cap;
    }
    char *t = strdup(tag);
    if (!t) return -1;
    b->lives[b->n_live++] = (KLive){ p, bytes, t };
    return 0;
}

/* The OOM post-mortem, with the device's figures when the backend knows them. */
static void report_oom(KBackend *b, size_t bytes, const char *tag) {
    size_t used = 0, total = 0;
    if (b->ops && b->ops->meminfo && b->ops->meminfo(b, &used, &total) != 0) used = total = 0;
    dpmem_oom(bytes, tag, b->space, used, total);
}

void *kbuf_alloc(KBackend *b, size_t bytes, const char *tag) {
    if (bytes == 0) return NULL;
    /* Byte counts (live, peak, the kit's totals, the plan's addresses) are 64-bit: past 1 EiB live
       they are refused before anything wraps (a plan of 3.2e19 bytes reported 1.8e19). */
    if (bytes > KBUF_MAX_LIVE || b->live > KBUF_MAX_LIVE - bytes) {
        snprintf(b->err, sizeof b->err, "%s needs %zu bytes with %zu live: more than 1 EiB, beyond what the 64-bit "
                 "byte counts can count (a smaller model, batch or sequence)", tag, bytes, b->live);
        return NULL;
    }
    if (b->mem_limit && (bytes > b->mem_limit || b->live > b->mem_limit - bytes)) {
        report_oom(b, bytes, tag);
        snprintf(b->err, sizeof b->err,
                 "out of memory: %s needs %zu bytes but %zu of the %zu-byte limit are in use (--mem-limit; on the CPU the default is 90%% of the memory available at start)",
                 tag, bytes, b->live, b->mem_limit);
        return NULL;
    }
    void *p;
    if (b->kind == KB_PLAN) {
        /* A unique address that is never dereferenced: 256-aligned, a gap between buffers. Addresses
           are never reused: when they would wrap past 2^64 the plan stops (an address seen twice
           would be counted as one buffer tagged again). */
        uint64_t step = ((uint64_t)bytes + 255) / 256 * 256 + 256;
        if (b->next_fake > UINT64_MAX - step) {
            snprintf(b->err, sizeof b->err, "%s: the plan has handed out 2^64 bytes of addresses in all: plan fewer steps",
                     tag);
            return NULL;
        }
        p = (void *)(uintptr_t)b->next_fake;
        b->next_fake += step;
    } else {
        p = b->ops->alloc(b, bytes);
        if (!p) {
            report_oom(b, bytes, tag);
            snprintf(b->err, sizeof b->err, "out of memory: the %s backend could not allocate %zu bytes for %s",
                     b->ops->name, bytes, tag);
            return NULL;
        }
    }
    if (live_push(b, p, bytes, tag) != 0) {
        if (b->kind != KB_PLAN) b->ops->free(b, p);
        snprintf(b->err, sizeof b->err, "out of host memory for the buffer list (%s)", tag);
        return NULL;
    }
    dpmem_tag_alloc_space(p, bytes, tag, b->space);
    b->live += bytes;
    if (b->live > b->peak) b->peak = b->live;
    if (b->trace) b->trace(b->trace_user, tag, bytes, 1);
    return p;
}

void *kbuf_alloc_overwritten(KBackend *b, size_t bytes, const char *tag) {
    b->overwritten = 1;
    void *p = kbuf_alloc(b, bytes, tag);
    b->overwritten = 0;
    return p;
}

void kbuf_free(KBackend *b, void *p) {
    if (!p) return;
    for (int i = b->n_live - 1; i >= 0; i--) {  /* newest first: most frees are LIFO */
        if (b->lives[i].p != p) continue;
        KLive l = b->lives[i];
        memmove(b->lives + i, b->lives + i + 1, (size_t)(b->n_live - i - 1) * sizeof *b->lives);
        b->n_live--;
        DPMEM_TAG_FREE(p);
        if (b->kind != KB_PLAN) b->ops->free(b, p);
        b->live -= l.bytes;
        if (b->trace) b->trace(b->trace_user, l.tag, 0, 0);
        free((void *)l.tag);
        return;
    }
    fprintf(stderr, "kbuf_free: %p was not allocated by kbuf_alloc (ignored)\n", p);
}

void kbackend_free_all(KBackend *b) {
    while (b->n_live > 0) kbuf_free(b, b->lives[b->n_live - 1].p);
}

void kbackend_destroy(KBackend *b) {
    kbackend_free_all(b);
    if (b->release) b->release(b);
    free(b->lives);
    b->lives = NULL; b->cap_live = 0;
}

int kbuf_upload(KBackend *b, void *dst, const void *src, size_t bytes) {
    if (bytes && b->kind != KB_PLAN) b->ops->upload(b, dst, src, bytes);
    return 0;
}

int kbuf_download(KBackend *b, void *dst, const void *src, size_t bytes) {
    if (!bytes) return 0;
    if (b->kind == KB_PLAN) memset(dst, 0, bytes);   /* nothing was computed */
    else b->ops->download(b, dst, src, bytes);
    return 0;
}

long long parse_bytes(const char *s) {
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || v > 9.0e18) return -1;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1024.0 * 1024; end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mult > 1 && *end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    v *= mult;
    if (v > 9.0e18) return -1;
    return (long long)v;
}

/* ---- scratch ---------------------------------------------------------------------------------- */

/* Allocates op's scratch (if its target needs any) as `tag`. -1 when it does not fit. */
static int scratch_get(KBackend *b, KOp op, const KShape *s, const char *tag, void **out) {
    size_t bytes = b->target->scratch_bytes(b, op, s);
    *out = NULL;
    if (bytes == 0) return 0;
    *out = kbuf_alloc(b, bytes, tag);
    return *out ? 0 : -1;
}

/* ---- wrappers --------------------------------------------------------------------------------- */

int gemm_strided_batched(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                         const float *A, int lda, long long strideA, const float *B, int ldb,
                         long long strideB, float beta, float *C, int ldc, long long strideC, int batch) {
    if (M > 0 && N > 0 && batch > 0)
        b->ops->gemm(b, transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
    return 0;
}

int matmul_forward(KBackend *b, float *y, const float *x, const float *w, int N, int IC, int OC, float beta) {
    return gemm_strided_batched(b, 0, 1, N, OC, IC, 1.0f, x, IC, 0, w, IC, 0, beta, y, OC, 0, 1);
}

int matmul_backward_input(KBackend *b, float *dx, const float *dy, const float *w, int N, int IC, int OC, float beta) {
    return gemm_strided_batched(b, 0, 0, N, IC, OC, 1.0f, dy, OC, 0, w, IC, 0, beta, dx, IC, 0, 1);
}

int matmul_backward_weight(KBackend *b, float *dw, const float *dy, const float *x, int N, int IC, int OC) {
    return gemm_strided_batched(b, 1, 0, OC, IC, N, 1.0f, dy, OC, 0, x, IC, 0, 1.0f, dw, IC, 0, 1);
}

int fill_buffer(KBackend *b, float *x, float value, size_t n) { if (n) b->ops->fill(b, x, value, n); return 0; }
int copy_buffer(KBackend *b, float *dst, const float *src, size_t n) { if (n) b->ops->copy(b, dst, src, n); return 0; }
int add_inplace(KBackend *b, float *y, const float *x, size_t n) { if (n) b->ops->add(b, y, x, n); return 0; }
int scale_inplace(KBackend *b, float *x, float s, size_t n) { if (n) b->ops->scale(b, x, s, n); return 0; }

int reduce_sum(KBackend *b, const float *x, size_t n, double *out) {
    KShape s = { .n = n }; void *w;
    if (scratch_get(b, KOP_REDUCE, &s, "workspace/reduce", &w)) return -1;
    *out = b->ops->sum(b, x, n, w);
    kbuf_free(b, w);
    return 0;
}

int reduce_sumsq(KBackend *b, const float *x, size_t n, double *out) {
    KShape s = { .n = n }; void *w;
    if (scratch_get(b, KOP_REDUCE, &s, "workspace/reduce", &w)) return -1;
    *out = b->ops->sumsq(b, x, n, w);
    kbuf_free(b, w);
    return 0;
}

int count_nonfinite(KBackend *b, const float *x, size_t n, size_t *out) {
    KShape s = { .n = n }; void *w;
    if (scratch_get(b, KOP_REDUCE, &s, "workspace/reduce", &w)) return -1;
    *out = b->ops->count_nonfinite(b, x, n, w);
    kbuf_free(b, w);
    return 0;
}

int embedding_forward(KBackend *b, float *out, const int *tokens, const float *wte, int N, int C) {
    b->ops->embedding_forward(b, out, tokens, wte, N, C);
    return 0;
}

int embedding_backward(KBackend *b, float *dwte, const int *tokens, const float *dout, int N, int C, int V) {
    KShape s = { .B = N, .T = 1, .C = C, .V = V }; void *w;
    if (scratch_get(b, KOP_EMBEDDING_BACKWARD, &s, "workspace/embedding_backward", &w)) return -1;
    b->ops->embedding_backward(b, dwte, tokens, dout, N, C, V, w);
    kbuf_free(b, w);
    return 0;
}

int rmsnorm_forward(KBackend *b, float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    b->ops->rmsnorm_forward(b, out, rstd, inp, w, N, C, eps);
    return 0;
}

int rmsnorm_backward(KBackend *b, float *dinp, float *dw, const float *dout, const float *inp,
                     const float *w, const float *rstd, int N, int C) {
    KShape s = { .B = N, .T = 1, .C = C }; void *ws;
    if (scratch_get(b, KOP_RMSNORM_BACKWARD, &s, "workspace/rmsnorm_backward", &ws)) return -1;
    b->ops->rmsnorm_backward(b, dinp, dw, dout, inp, w, rstd, N, C, ws);
    kbuf_free(b, ws);
    return 0;
}

int rope_forward(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope) {
    b->ops->rope_forward(b, x, B, T, NH, HS, rope);
    return 0;
}

int rope_backward(KBackend *b, float *dx, int B, int T, int NH, int HS, KRope rope) {
    b->ops->rope_backward(b, dx, B, T, NH, HS, rope);
    return 0;
}

int attention_forward(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                      int B, int T, int NH, int NKV, int HS) {
    KShape s = { .B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS }; void *w;
    if (scratch_get(b, KOP_ATTENTION_FORWARD, &s, "workspace/attn_forward", &w)) return -1;
    b->ops->attention_forward(b, out, lse, q, k, v, B, T, NH, NKV, HS, w);
    kbuf_free(b, w);
    return 0;
}

int attention_backward(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                       const float *k, const float *v, const float *out, const float *lse,
                       int B, int T, int NH, int NKV, int HS) {
    KShape s = { .B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS }; void *w;
    if (scratch_get(b, KOP_ATTENTION_BACKWARD, &s, "workspace/attn_backward", &w)) return -1;
    b->ops->attention_backward(b, dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, w);
    kbuf_free(b, w);
    return 0;
}

int swiglu_forward(KBackend *b, float *h, const float *gate, const float *up, size_t n) {
    b->ops->swiglu_forward(b, h, gate, up, n);
    return 0;
}

int swiglu_backward(KBackend *b, float *dgate, float *dup, const float *dh, const float *gate,
                    const float *up, size_t n) {
    b->ops->swiglu_backward(b, dgate, dup, dh, gate, up, n);
    return 0;
}

int crossentropy_forward(KBackend *b, float *losses, const float *logits, const int *targets, int N, int V) {
    KShape s = { .B = N, .T = 1, .V = V }; void *w;
    if (scratch_get(b, KOP_CROSSENTROPY_FORWARD, &s, "workspace/crossentropy", &w)) return -1;
    b->ops->crossentropy_forward(b, losses, logits, targets, N, V, w);
    kbuf_free(b, w);
    return 0;
}

int crossentropy_backward(KBackend *b, float *logits, const int *targets, float scale,
                          const float *sample_weight, int B, int T, int V) {
    KShape s = { .B = B, .T = T, .V = V }; void *w;
    if (scratch_get(b, KOP_CROSSENTROPY_BACKWARD, &s, "workspace/crossentropy", &w)) return -1;
    b->ops->crossentropy_backward(b, logits, targets, scale, sample_weight, B, T, V, w);
    kbuf_free(b, w);
    return 0;
}

int adamw_update(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
                 float beta1, float beta2, float eps, float weight_decay, int t) {
    if (n) b->ops->adamw(b, p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
    return 0;
}

int sgd_update(KBackend *b, float *p, const float *g, size_t n, float lr, float weight_decay) {
    if (n) b->ops->sgd(b, p, g, n, lr, weight_decay);
    return 0;
}

/* ---- mixed precision ---------------------------------------------------------------------------- */

int gemm_ex(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
            const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
            float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c) {
    if (ab == KDT_F32 && c == KDT_F32)
        return gemm_strided_batched(b, transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta,
                                    C, ldc, strideC, batch);
    if (M <= 0 || N <= 0 || batch <= 0) return 0;
    KShape s = { .M = M, .N = N, .K = K, .transA = transA, .transB = transB, .ab = ab, .c = c };
    void *w;
    if (scratch_get(b, KOP_GEMM_EX, &s, "workspace/gemm_bf16", &w)) return -1;
    b->ops->gemm_ex(b, transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
                    batch, ab, c, w);
    kbuf_free(b, w);
    return 0;
}

int matmul_forward_ex(KBackend *b, KDtype dt, KDtype ydt, float *y, const float *x, const float *w,
                      int N, int IC, int OC, float beta) {
    return gemm_ex(b, 0, 1, N, OC, IC, 1.0f, x, IC, 0, w, IC, 0, beta, y, OC, 0, 1, dt, ydt);
}

int matmul_backward_input_ex(KBackend *b, KDtype dt, float *dx, const float *dy, const float *w,
                             int N, int IC, int OC, float beta) {
    return gemm_ex(b, 0, 0, N, IC, OC, 1.0f, dy, OC, 0, w, IC, 0, beta, dx, IC, 0, 1, dt, dt);
}

int matmul_backward_weight_ex(KBackend *b, KDtype dt, float *dw, const float *dy, const float *x,
                              int N, int IC, int OC) {
    return gemm_ex(b, 1, 0, OC, IC, N, 1.0f, dy, OC, 0, x, IC, 0, 1.0f, dw, IC, 0, 1, dt, KDT_F32);
}

int widen_buffer(KBackend *b, float *dst, const float *src, size_t n) { if (n) b->ops->widen(b, dst, src, n); return 0; }
int narrow_buffer(KBackend *b, float *dst, const float *src, size_t n) { if (n) b->ops->narrow(b, dst, src, n); return 0; }
int narrow_inplace(KBackend *b, float *x, size_t n) { if (n) b->ops->narrow_inplace(b, x, n); return 0; }

int copy_ex(KBackend *b, KDtype dt, float *dst, const float *src, size_t n) {
    if (n) b->ops->copy_bytes(b, dst, src, n * KDT_SIZE(dt));
    return 0;
}

int zero_ex(KBackend *b, KDtype dt, float *x, size_t n) {
    if (n) b->ops->zero_bytes(b, x, n * KDT_SIZE(dt));
    return 0;
}

/* Conversion at the op boundary, in pieces: the fp32 twins (workspace/widen.<op>) hold at most
   KWIDEN_CHUNK elements per operand (whole rows) for the element-wise ops, the norms and the
   embedding, and one sample for RoPE and attention (each sample is independent there), so that they
   stay small whatever B·T is: a native bf16 kernel would need none. Every element is computed by the
   same fp32 op as on the whole (RMSNorm's and the embedding's weight gradients add the pieces in row
   order). */
#define KWIDEN_CHUNK ((size_t)1 << 20)

static int rows_per_piece(int N, int C) {
    size_t r = KWIDEN_CHUNK / (size_t)(C > 0 ? C : 1);
    if (r < 1) r = 1;
    return r < (size_t)N ? (int)r : N;
}

/* An fp32 twin of n elements (uninitialised), tagged workspace/widen.<op>; freed by the caller in reverse. */
static float *twin(KBackend *b, size_t n, const char *op) {
    char tag[64];
    snprintf(tag, sizeof tag, "workspace/widen.%s", op);
    return kbuf_alloc(b, n ? n * sizeof(float) : sizeof(float), tag);
}
/* The target runs this op on bf16 storage itself (KOps.bf16_native): no fp32 twins. A plan asks its
   target, so that it replays the allocations of the path the target takes. */
static int native(const KBackend *b, KDtype dt) { return dt == KDT_BF16 && b->target->bf16_native; }

static void in(KBackend *b, float *w, const float *src, size_t at, size_t n) { if (n) b->ops->widen(b, w, kact_at(src, at, KDT_BF16), n); }
static void out(KBackend *b, float *dst, const float *w, size_t at, size_t n) { if (n) b->ops->narrow(b, kact_at(dst, at, KDT_BF16), w, n); }

int embedding_forward_ex(KBackend *b, KDtype dt, float *o, const int *tokens, const float *wte, int N, int C) {
    if (dt == KDT_F32) return embedding_forward(b, o, tokens, wte, N, C);
    if (native(b, dt)) { b->ops->embedding_forward_bf16(b, o, tokens, wte, N, C); return 0; }
    const int R = rows_per_piece(N, C);
    float *w = twin(b, (size_t)R * C, "embedding_forward");
    int rc = w ? 0 : -1;
    for (int r0 = 0; !rc && r0 < N; r0 += R) {
        const int n = N - r0 < R ? N - r0 : R;
        if (!(rc = embedding_forward(b, w, tokens + r0, wte, n, C))) out(b, o, w, (size_t)r0 * C, (size_t)n * C);
    }
    kbuf_free(b, w);
    return rc;
}

int embedding_backward_ex(KBackend *b, KDtype dt, float *dwte, const int *tokens, const float *dout, int N, int C, int V) {
    if (dt == KDT_F32) return embedding_backward(b, dwte, tokens, dout, N, C, V);
    if (native(b, dt)) {
        KShape s = { .B = N, .T = 1, .C = C, .V = V, .ab = KDT_BF16 }; void *ws;
        if (scratch_get(b, KOP_EMBEDDING_BACKWARD, &s, "workspace/embedding_backward", &ws)) return -1;
        b->ops->embedding_backward_bf16(b, dwte, tokens, dout, N, C, V, ws);
        kbuf_free(b, ws);
        return 0;
    }
    const int R = rows_per_piece(N, C);
    float *w = twin(b, (size_t)R * C, "embedding_backward");
    int rc = w ? 0 : -1;
    for (int r0 = 0; !rc && r0 < N; r0 += R) {
        const int n = N - r0 < R ? N - r0 : R;
        in(b, w, dout, (size_t)r0 * C, (size_t)n * C);
        rc = embedding_backward(b, dwte, tokens + r0, w, n, C, V);
    }
    kbuf_free(b, w);
    return rc;
}

int rmsnorm_forward_ex(KBackend *b, KDtype dt, float *o, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    if (dt == KDT_F32) return rmsnorm_forward(b, o, rstd, inp, w, N, C, eps);
    if (native(b, dt)) { b->ops->rmsnorm_forward_bf16(b, o, rstd, inp, w, N, C, eps); return 0; }
    const int R = rows_per_piece(N, C);
    float *x = twin(b, (size_t)R * C, "rmsnorm_forward"), *y = x ? twin(b, (size_t)R * C, "rmsnorm_forward") : NULL;
    int rc = y ? 0 : -1;
    for (int r0 = 0; !rc && r0 < N; r0 += R) {
        const int n = N - r0 < R ? N - r0 : R;
        in(b, x, inp, (size_t)r0 * C, (size_t)n * C);
        if (!(rc = rmsnorm_forward(b, y, rstd + r0, x, w, n, C, eps))) out(b, o, y, (size_t)r0 * C, (size_t)n * C);
    }
    kbuf_free(b, y); kbuf_free(b, x);
    return rc;
}

int rmsnorm_backward_ex(KBackend *b, KDtype dt, float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C) {
    if (dt == KDT_F32) return rmsnorm_backward(b, dinp, dw, dout, inp, w, rstd, N, C);
    if (native(b, dt)) {
        KShape s = { .B = N, .T = 1, .C = C, .ab = KDT_BF16 }; void *ws;
        if (scratch_get(b, KOP_RMSNORM_BACKWARD, &s, "workspace/rmsnorm_backward", &ws)) return -1;
        b->ops->rmsnorm_backward_bf16(b, dinp, dw, dout, inp, w, rstd, N, C, ws);
        kbuf_free(b, ws);
        return 0;
    }
    if (!dinp) { snprintf(b->err, sizeof b->err, "rmsnorm_backward_ex: the weight's gradient alone is fp32 only"); return -1; }
    const int R = rows_per_piece(N, C);
    const size_t piece = (size_t)R * C;
    float *di = twin(b, piece, "rmsnorm_backward"), *dy = di ? twin(b, piece, "rmsnorm_backward") : NULL;
    float *x = dy ? twin(b, piece, "rmsnorm_backward") : NULL;
    int rc = x ? 0 : -1;
    for (int r0 = 0; !rc && r0 < N; r0 += R) {
        const int n = N - r0 < R ? N - r0 : R;
        const size_t at = (size_t)r0 * C, len = (size_t)n * C;
        in(b, di, dinp, at, len); in(b, dy, dout, at, len); in(b, x, inp, at, len);
        if (!(rc = rmsnorm_backward(b, di, dw, dy, x, w, rstd + r0, n, C))) out(b, dinp, di, at, len);
    }
    kbuf_free(b, x); kbuf_free(b, dy); kbuf_free(b, di);
    return rc;
}

static int rope_ex(KBackend *b, KDtype dt, float *x, int B, int T, int NH, int HS, KRope rope, int backward) {
    if (dt == KDT_F32) return backward ? rope_backward(b, x, B, T, NH, HS, rope) : rope_forward(b, x, B, T, NH, HS, rope);
    if (native(b, dt)) {
        (backward ? b->ops->rope_backward_bf16 : b->ops->rope_forward_bf16)(b, x, B, T, NH, HS, rope);
        return 0;
    }
    const size_t per = (size_t)T * NH * HS;   /* one sample: positions start at 0 in each */
    float *w = twin(b, per, backward ? "rope_backward" : "rope_forward");
    int rc = w ? 0 : -1;
    for (int s = 0; !rc && s < B; s++) {
        in(b, w, x, s * per, per);
        rc = backward ? rope_backward(b, w, 1, T, NH, HS, rope) : rope_forward(b, w, 1, T, NH, HS, rope);
        if (!rc) out(b, x, w, s * per, per);
    }
    kbuf_free(b, w);
    return rc;
}
int rope_forward_ex(KBackend *b, KDtype dt, float *x, int B, int T, int NH, int HS, KRope rope) { return rope_ex(b, dt, x, B, T, NH, HS, rope, 0); }
int rope_backward_ex(KBackend *b, KDtype dt, float *dx, int B, int T, int NH, int HS, KRope rope) { return rope_ex(b, dt, dx, B, T, NH, HS, rope, 1); }

int attention_forward_ex(KBackend *b, KDtype dt, float *o, float *lse, const float *q, const float *k, const float *v,
                         int B, int T, int NH, int NKV, int HS) {
    if (dt == KDT_F32) return attention_forward(b, o, lse, q, k, v, B, T, NH, NKV, HS);
    if (native(b, dt)) {
        KShape s = { .B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS, .ab = KDT_BF16 }; void *ws;
        if (scratch_get(b, KOP_ATTENTION_FORWARD, &s, "workspace/attn_forward", &ws)) return -1;
        b->ops->attention_forward_bf16(b, o, lse, q, k, v, B, T, NH, NKV, HS, ws);
        kbuf_free(b, ws);
        return 0;
    }
    const size_t nq = (size_t)T * NH * HS, nk = (size_t)T * NKV * HS;   /* one sample */
    const char *op = "attention_forward";
    float *qw = twin(b, nq, op), *kw = qw ? twin(b, nk, op) : NULL, *vw = kw ? twin(b, nk, op) : NULL;
    float *ow = vw ? twin(b, nq, op) : NULL;
    int rc = ow ? 0 : -1;
    for (int s = 0; !rc && s < B; s++) {
        in(b, qw, q, s * nq, nq); in(b, kw, k, s * nk, nk); in(b, vw, v, s * nk, nk);
        if (!(rc = attention_forward(b, ow, lse + (size_t)s * NH * T, qw, kw, vw, 1, T, NH, NKV, HS))) out(b, o, ow, s * nq, nq);
    }
    kbuf_free(b, ow); kbuf_free(b, vw); kbuf_free(b, kw); kbuf_free(b, qw);
    return rc;
}

int attention_backward_ex(KBackend *b, KDtype dt, float *dq, float *dk, float *dv, const float *dout, const float *q,
                          const float *k, const float *v, const float *o, const float *lse,
                          int B, int T, int NH, int NKV, int HS) {
    if (dt == KDT_F32) return attention_backward(b, dq, dk, dv, dout, q, k, v, o, lse, B, T, NH, NKV, HS);
    if (native(b, dt)) {
        KShape s = { .B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS, .ab = KDT_BF16 }; void *ws;
        if (scratch_get(b, KOP_ATTENTION_BACKWARD, &s, "workspace/attn_backward", &ws)) return -1;
        b->ops->attention_backward_bf16(b, dq, dk, dv, dout, q, k, v, o, lse, B, T, NH, NKV, HS, ws);
        kbuf_free(b, ws);
        return 0;
    }
    const size_t nq = (size_t)T * NH * HS, nk = (size_t)T * NKV * HS;   /* one sample */
    const char *op = "attention_backward";
    float *w[8] = { 0 };
    const float *src[5] = { dout, q, k, v, o };
    const size_t len[8] = { nq, nq, nk, nk, nq, nq, nk, nk };
    int rc = 0, i;
    for (i = 0; i < 8; i++) if (!(w[i] = twin(b, len[i], op))) { rc = -1; break; }
    for (int s = 0; !rc && s < B; s++) {
        for (i = 0; i < 5; i++) in(b, w[i], src[i], s * len[i], len[i]);
        rc = attention_backward(b, w[5], w[6], w[7], w[0], w[1], w[2], w[3], w[4], lse + (size_t)s * NH * T, 1, T, NH, NKV, HS);
        if (!rc) { out(b, dq, w[5], s * nq, nq); out(b, dk, w[6], s * nk, nk); out(b, dv, w[7], s * nk, nk); }
    }
    for (i = 7; i >= 0; i--) kbuf_free(b, w[i]);
    return rc;
}

int swiglu_forward_ex(KBackend *b, KDtype dt, float *h, const float *gate, const float *up, size_t n) {
    if (dt == KDT_F32) return swiglu_forward(b, h, gate, up, n);
    if (native(b, dt)) { if (n) b->ops->swiglu_forward_bf16(b, h, gate, up, n); return 0; }
    const size_t piece = n < KWIDEN_CHUNK ? n : KWIDEN_CHUNK;
    float *g = twin(b, piece, "swiglu_forward"), *u = g ? twin(b, piece, "swiglu_forward") : NULL;
    float *o = u ? twin(b, piece, "swiglu_forward") : NULL;
    int rc = o ? 0 : -1;
    for (size_t i0 = 0; !rc && i0 < n; i0 += piece) {
        const size_t m = n - i0 < piece ? n - i0 : piece;
        in(b, g, gate, i0, m); in(b, u, up, i0, m);
        if (!(rc = swiglu_forward(b, o, g, u, m))) out(b, h, o, i0, m);
    }
    kbuf_free(b, o); kbuf_free(b, u); kbuf_free(b, g);
    return rc;
}

int swiglu_backward_ex(KBackend *b, KDtype dt, float *dgate, float *dup, const float *dh, const float *gate,
                       const float *up, size_t n) {
    if (dt == KDT_F32) return swiglu_backward(b, dgate, dup, dh, gate, up, n);
    if (native(b, dt)) { if (n) b->ops->swiglu_backward_bf16(b, dgate, dup, dh, gate, up, n); return 0; }
    const size_t piece = n < KWIDEN_CHUNK ? n : KWIDEN_CHUNK;
    const char *op = "swiglu_backward";
    float *w[5] = { 0 };
    const float *src[3] = { dh, gate, up };
    int rc = 0, i;
    for (i = 0; i < 5; i++) if (!(w[i] = twin(b, piece, op))) { rc = -1; break; }
    for (size_t i0 = 0; !rc && i0 < n; i0 += piece) {
        const size_t m = n - i0 < piece ? n - i0 : piece;
        for (i = 0; i < 3; i++) in(b, w[i], src[i], i0, m);
        if (!(rc = swiglu_backward(b, w[3], w[4], w[0], w[1], w[2], m))) { out(b, dgate, w[3], i0, m); out(b, dup, w[4], i0, m); }
    }
    for (i = 4; i >= 0; i--) kbuf_free(b, w[i]);
    return rc;
}
