/* backend_plan.c — the plan backend: runs the model's code path with every allocation tagged and
   recorded exactly as on its target (same tags, same sizes, same order, the target's scratch sizes
   and memory space), while computing nothing and touching no buffer. Addresses are fake (from a
   counter, see kbuf_alloc) and never dereferenced. This is how the 3B preset at T = 16384 gets an
   exact tagged memory timeline on a laptop.
   Each op also records what it would cost (FLOPs, bytes, a call) at its shapes into the backend's
   time ledger when one is set (b->cost, kernels/plan/cost.h): the plan's predicted step time.
   Not here: the device profiles that turn costs into seconds (profile.c). */
#include "kernels.h"
#include "cost.h"

#include <string.h>

static void *plan_alloc(KBackend *b, size_t n) { (void)b; (void)n; return NULL; }  /* kbuf_alloc never calls it */
static void plan_free(KBackend *b, void *p) { (void)b; (void)p; }
static void plan_xfer(KBackend *b, void *d, const void *s, size_t n) { (void)b; (void)d; (void)s; (void)n; }
static size_t plan_scratch(const KBackend *b, KOp op, const KShape *s) { return b->target->scratch_bytes(b, op, s); }
static void plan_gemm(KBackend *b, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                      long long sc, int batch) {
    (void)alpha; (void)A; (void)lda; (void)sa; (void)B; (void)ldb; (void)sb; (void)C; (void)ldc; (void)sc;
    kcost_gemm(b->cost, ta, tb, M, N, K, batch, 4, 4, beta != 0.0f);
}
static void plan_fill(KBackend *b, float *x, float v, size_t n) { (void)x; (void)v; kcost_op(b->cost, KCO_FILL, 4, n, 1, 0); }
static void plan_copy(KBackend *b, float *d, const float *s, size_t n) { (void)d; (void)s; kcost_op(b->cost, KCO_COPY, 4, n, 1, 0); }
static void plan_add(KBackend *b, float *y, const float *x, size_t n) { (void)y; (void)x; kcost_op(b->cost, KCO_ADD, 4, n, 1, 0); }
static void plan_scale(KBackend *b, float *x, float s, size_t n) { (void)x; (void)s; kcost_op(b->cost, KCO_SCALE, 4, n, 1, 0); }
static double plan_reduce(KBackend *b, const float *x, size_t n, void *w) { (void)x; (void)w; kcost_op(b->cost, KCO_REDUCE, 4, n, 1, 0); return 0.0; }
static size_t plan_count(KBackend *b, const float *x, size_t n, void *w) { (void)x; (void)w; kcost_op(b->cost, KCO_REDUCE, 4, n, 1, 0); return 0; }
static void plan_emb_f(KBackend *b, float *o, const int *t, const float *w, int N, int C) {
    (void)o; (void)t; (void)w;
    kcost_op(b->cost, KCO_EMB_F, 4, (size_t)N, C, 0);
}
static void plan_emb_b(KBackend *b, float *dw, const int *t, const float *d, int N, int C, int V, void *s) {
    (void)dw; (void)t; (void)d; (void)V; (void)s;
    kcost_op(b->cost, KCO_EMB_B, 4, (size_t)N, C, 0);
}
static void plan_rms_f(KBackend *b, float *o, float *r, const float *x, const float *w, int N, int C, float e) {
    (void)o; (void)r; (void)x; (void)w; (void)e;
    kcost_op(b->cost, KCO_RMS_F, 4, (size_t)N, C, 0);
}
static void plan_rms_b(KBackend *b, float *dx, float *dw, const float *dy, const float *x, const float *w,
                       const float *r, int N, int C, void *s) {
    (void)dx; (void)dw; (void)dy; (void)x; (void)w; (void)r; (void)s;
    kcost_op(b->cost, KCO_RMS_B, 4, (size_t)N, C, 0);
}
static void plan_rope(KBackend *b, float *x, int B, int T, int NH, int HS, KRope r) {
    (void)x; (void)r;
    kcost_op(b->cost, KCO_ROPE, 4, (size_t)B * T, NH * HS, HS);
}
static void plan_attn_f(KBackend *b, float *o, float *l, const float *q, const float *k, const float *v,
                        int B, int T, int NH, int NKV, int HS, void *s) {
    (void)o; (void)l; (void)q; (void)k; (void)v; (void)s;
    kcost_attention(b->cost, 0, B, T, NH, NKV, HS, 4);
}
static void plan_attn_b(KBackend *b, float *dq, float *dk, float *dv, const float *d, const float *q,
                        const float *k, const float *v, const float *o, const float *l,
                        int B, int T, int NH, int NKV, int HS, void *s) {
    (void)dq; (void)dk; (void)dv; (void)d; (void)q; (void)k; (void)v; (void)o; (void)l;
    (void)s;
    kcost_attention(b->cost, 1, B, T, NH, NKV, HS, 4);
}
static void plan_swi_f(KBackend *b, float *h, const float *g, const float *u, size_t n) {
    (void)h; (void)g; (void)u;
    kcost_op(b->cost, KCO_SWI_F, 4, n, 1, 0);
}
static void plan_swi_b(KBackend *b, float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
    (void)dg; (void)du; (void)dh; (void)g; (void)u;
    kcost_op(b->cost, KCO_SWI_B, 4, n, 1, 0);
}
static void plan_ce_f(KBackend *b, float *l, const float *x, const int *t, int N, int V, void *s) {
    (void)l; (void)x; (void)t; (void)s;
    kcost_op(b->cost, KCO_CE_F, 4, (size_t)N, V, 0);
}
static void plan_ce_b(KBackend *b, float *x, const int *t, float sc, const float *w, int B, int T, int V, void *s) {
    (void)x; (void)t; (void)sc; (void)w; (void)s;
    kcost_op(b->cost, KCO_CE_B, 4, (size_t)B * T, V, 0);
}
static void plan_adamw(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
                       float b1, float b2, float eps, float wd, int t) {
    (void)p; (void)g; (void)m; (void)v; (void)lr; (void)b1; (void)b2; (void)eps; (void)wd; (void)t;
    kcost_op(b->cost, KCO_ADAMW, 4, n, 1, 0);
}
static void plan_sgd(KBackend *b, float *p, const float *g, size_t n, float lr, float wd) {
    (void)p; (void)g; (void)lr; (void)wd;
    kcost_op(b->cost, KCO_SGD, 4, n, 1, 0);
}

static void plan_gemm_ex(KBackend *b, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda,
                         long long sa, const void *B, int ldb, long long sb, float beta, void *C, int ldc,
                         long long sc, int batch, KDtype ab, KDtype c, void *s) {
    (void)alpha; (void)A; (void)lda; (void)sa;
    (void)B; (void)ldb; (void)sb; (void)C; (void)ldc; (void)sc; (void)s;
    kcost_gemm(b->cost, ta, tb, M, N, K, batch, (int)KDT_SIZE(ab), (int)KDT_SIZE(c), beta != 0.0f);
}
/* bf16 <-> fp32: 2 bytes read and 4 written an element, or the reverse */
static void plan_widen(KBackend *b, float *d, const void *s, size_t n) { (void)d; (void)s; kcost_op(b->cost, KCO_WIDEN, 4, n, 1, 0); }
static void plan_narrow(KBackend *b, void *d, const float *s, size_t n) { (void)d; (void)s; kcost_op(b->cost, KCO_NARROW, 4, n, 1, 0); }
static void plan_narrow_inplace(KBackend *b, void *x, size_t n) { (void)x; kcost_op(b->cost, KCO_NARROW, 4, n, 1, 0); }
static void plan_copy_bytes(KBackend *b, void *d, const void *s, size_t n) { (void)d; (void)s; kcost_bytes(b->cost, 2.0 * (double)n); }
static void plan_zero_bytes(KBackend *b, void *x, size_t n) { (void)x; kcost_bytes(b->cost, (double)n); }
static void plan_init_normal(KBackend *b, float *x, size_t n, double sd, uint64_t seed, uint64_t stream) {
    (void)b; (void)x; (void)n; (void)sd; (void)seed; (void)stream;
}

/* the native bf16 entries (kernels.h): a plan for a target that has them calls these */
static void plan_emb_f16(KBackend *b, void *o, const int *t, const float *w, int N, int C) {
    (void)o; (void)t; (void)w;
    kcost_op(b->cost, KCO_EMB_F, 2, (size_t)N, C, 0);
}
static void plan_emb_b16(KBackend *b, float *dw, const int *t, const void *d, int N, int C, int V, void *s) {
    (void)dw; (void)t; (void)d; (void)V; (void)s;
    kcost_op(b->cost, KCO_EMB_B, 2, (size_t)N, C, 0);
}
static void plan_rms_f16(KBackend *b, void *o, float *r, const void *x, const float *w, int N, int C, float e) {
    (void)o; (void)r; (void)x; (void)w; (void)e;
    kcost_op(b->cost, KCO_RMS_F, 2, (size_t)N, C, 0);
}
static void plan_rms_b16(KBackend *b, void *dx, float *dw, const void *dy, const void *x, const float *w,
                         const float *r, int N, int C, void *s) {
    (void)dx; (void)dw; (void)dy; (void)x; (void)w; (void)r; (void)s;
    kcost_op(b->cost, KCO_RMS_B, 2, (size_t)N, C, 0);
}
static void plan_rope16(KBackend *b, void *x, int B, int T, int NH, int HS, KRope r) {
    (void)x; (void)r;
    kcost_op(b->cost, KCO_ROPE, 2, (size_t)B * T, NH * HS, HS);
}
static void plan_attn_f16(KBackend *b, void *o, float *l, const void *q, const void *k, const void *v,
                          int B, int T, int NH, int NKV, int HS, void *s) {
    (void)o; (void)l; (void)q; (void)k; (void)v; (void)s;
    kcost_attention(b->cost, 0, B, T, NH, NKV, HS, 2);
}
static void plan_attn_b16(KBackend *b, void *dq, void *dk, void *dv, const void *d, const void *q,
                          const void *k, const void *v, const void *o, const float *l,
                          int B, int T, int NH, int NKV, int HS, void *s) {
    (void)dq; (void)dk; (void)dv; (void)d; (void)q; (void)k; (void)v; (void)o; (void)l;
    (void)s;
    kcost_attention(b->cost, 1, B, T, NH, NKV, HS, 2);
}
static void plan_swi_f16(KBackend *b, void *h, const void *g, const void *u, size_t n) {
    (void)h; (void)g; (void)u;
    kcost_op(b->cost, KCO_SWI_F, 2, n, 1, 0);
}
static void plan_swi_b16(KBackend *b, void *dg, void *du, const void *dh, const void *g, const void *u, size_t n) {
    (void)dg; (void)du; (void)dh; (void)g; (void)u;
    kcost_op(b->cost, KCO_SWI_B, 2, n, 1, 0);
}

const KOps kops_plan = {
    .name = "plan", .space = 0,
    .alloc = plan_alloc, .free = plan_free, .upload = plan_xfer, .download = plan_xfer,
    .scratch_bytes = plan_scratch,
    .gemm = plan_gemm, .fill = plan_fill, .copy = plan_copy, .add = plan_add, .scale = plan_scale,
    .sum = plan_reduce, .sumsq = plan_reduce, .count_nonfinite = plan_count,
    .embedding_forward = plan_emb_f, .embedding_backward = plan_emb_b,
    .rmsnorm_forward = plan_rms_f, .rmsnorm_backward = plan_rms_b,
    .rope_forward = plan_rope, .rope_backward = plan_rope,
    .attention_forward = plan_attn_f, .attention_backward = plan_attn_b,
    .swiglu_forward = plan_swi_f, .swiglu_backward = plan_swi_b,
    .crossentropy_forward = plan_ce_f, .crossentropy_backward = plan_ce_b,
    .adamw = plan_adamw, .sgd = plan_sgd,
    .gemm_ex = plan_gemm_ex, .widen = plan_widen, .narrow = plan_narrow, .narrow_inplace = plan_narrow_inplace,
    .copy_bytes = plan_copy_bytes, .zero_bytes = plan_zero_bytes,
    .embedding_forward_bf16 = plan_emb_f16, .embedding_backward_bf16 = plan_emb_b16,
    .rmsnorm_forward_bf16 = plan_rms_f16, .rmsnorm_backward_bf16 = plan_rms_b16,
    .rope_forward_bf16 = plan_rope16, .rope_backward_bf16 = plan_rope16,
    .attention_forward_bf16 = plan_attn_f16, .attention_backward_bf16 = plan_attn_b16,
    .swiglu_forward_bf16 = plan_swi_f16, .swiglu_backward_bf16 = plan_swi_b16,
    .init_normal = plan_init_normal,
};

void kbackend_plan_init(KBackend *b, const KOps *target, int nthreads) {
    memset(b, 0, sizeof *b);
    b->kind = KB_PLAN;
    b->ops = &kops_plan;
    b->target = target;
    b->space = target->space;
    b->nthreads = nthreads > 0 ? nthreads : kcpu_max_threads();
    b->next_fake = (uint64_t)1 << 44;
}
