/* profile.c — device profiles for the plan's time (cost.h): named GPUs from their datasheets with
   efficiencies fitted on measured GPU steps, and this machine's CPU, measured.

   GPU PRESETS. Peaks (dense, no sparsity) and HBM bandwidth from NVIDIA's datasheets: H100 SXM5 80GB
   bf16 989, tf32 494 TFLOP/s, HBM3 3.35 TB/s; H200 SXM the same compute, HBM3e 4.8 TB/s; A100 SXM 80GB
   bf16 312, tf32 156 TFLOP/s, HBM2e 2.04 TB/s. Ring links: NVLink 4 (H100, H200) 450 GB/s a
   direction, NVLink 3 (A100) 300 GB/s; "ib" suffix: 8 × 400 Gb/s InfiniBand between nodes, 50 GB/s a GPU.
   What the trainers reach of those peaks is fitted, not assumed: GPU_EFF below, fitted on the 1b bf16
   rows of docs/CUDA_RESULTS_2026-11-27.md at T = 4096 (vanilla and direct+bk) and checked on the
   others (T = 4096 mixed, flash, ghost; T = 1024 in batches of 8; docs/CUDA_RESULTS_2026-11-26.md):
   docs/SCALING.md gives the ratios.

   THE CPU. Each figure is the fastest of 5-15 calls (time_call). kcost_profile_cpu measures, in about a second: the bandwidth of a streaming pass (the
   backend's copy of 32 MiB), the cost of a call (a 16-element fill), the sustained rate of the
   backend's GEMM (512³, OpenBLAS under the backend's OpenMP split) and of a tiny one (its fixed cost),
   of its attention and of its cross-entropy loop; then kcost_profile_measure times each GEMM and
   attention shape a plan uses (up to a cap on its size) with the backend's own kernels. Both are
   cached in one file per thread count (the caller names it: build/plan_profile_cpu_t<N>.txt, or
   $DPMEM_PLAN_PROFILE_DIR/plan_profile_cpu_t<N>.txt), which
   says when it was measured; a later plan reuses it and measures only the shapes it has not seen.

   Not here: the ledger and the formulas (cost.c), the trainer's report (samples/llama/plan_time.c). */
#include "cost.h"

#include "kernels.h"
#include "noise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Shares of the datasheet peaks the trainers reach: GEMMs and memory-bound kernels (fitted on the two
   rows above, least squares on log ratios over a grid; the two are nearly collinear there), attention
   (cuDNN's flash attention at bf16: bench_cuda_kernels' 43 % forward and 36 % backward at T = 4096,
   11-26; the project's fp32 attention kernels: 6.1 TFLOP/s, 1.2 % of TF32's peak, same bench), the
   other compute loops (a guess: cross-entropy, the noise), and the seconds of a launch with its host
   work (a guess; a small model's step is made of them). DPMEM_PLAN_GPU_EFF refits. */
enum { GPU_GEMM, GPU_ATTN, GPU_ATTN_F32, GPU_LOOP, GPU_MEM, GPU_CALL, GPU_EFF_N };
static const double GPU_EFF[GPU_EFF_N] = { 0.65, 0.38, 0.0123, 0.10, 0.60, 6e-6 };

static const struct {
    const char *name;
    double bf16, tf32, hbm, link;   /* TFLOP/s, TB/s, GB/s */
    const char *source;
} GPUS[] = {
    { "h100", 989, 494, 3.35, 450, "NVIDIA H100 SXM5 80GB datasheet: bf16 989, tf32 494 TFLOP/s dense, HBM3 3.35 TB/s, NVLink 4 450 GB/s a direction" },
    { "h200", 989, 494, 4.8, 450, "NVIDIA H200 SXM datasheet: bf16 989, tf32 494 TFLOP/s dense, HBM3e 4.8 TB/s, NVLink 4 450 GB/s a direction" },
    { "a100", 312, 156, 2.04, 300, "NVIDIA A100 SXM 80GB datasheet: bf16 312, tf32 156 TFLOP/s dense, HBM2e 2.04 TB/s, NVLink 3 300 GB/s a direction" },
};

/* GPU_EFF, or DPMEM_PLAN_GPU_EFF="gemm,attn,attn_f32,loop,mem,call_s" (a refit on new GPU rows) */
static void gpu_eff(double eff[GPU_EFF_N]) {
    memcpy(eff, GPU_EFF, sizeof GPU_EFF);
    const char *e = getenv("DPMEM_PLAN_GPU_EFF");
    double v[GPU_EFF_N];
    if (e && sscanf(e, "%lf,%lf,%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) == GPU_EFF_N) memcpy(eff, v, sizeof v);
}

int kcost_profile_preset(KCostProfile *p, const char *name, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    double E[GPU_EFF_N];
    gpu_eff(E);
    char base[32];
    snprintf(base, sizeof base, "%s", name ? name : "");
    const int ib = strlen(base) > 3 && !strcmp(base + strlen(base) - 3, "-ib");
    if (ib) base[strlen(base) - 3] = 0;
    for (size_t i = 0; i < sizeof GPUS / sizeof *GPUS; i++) {
        if (strcmp(base, GPUS[i].name)) continue;
        snprintf(p->name, sizeof p->name, "%s", name);
        snprintf(p->source, sizeof p->source, "%s%s; efficiencies fitted on docs/CUDA_RESULTS_2026-11-27.md (kernels/plan/profile.c)",
                 GPUS[i].source, ib ? "; links: InfiniBand 400 Gb/s a GPU" : "");
        p->peak[0] = GPUS[i].tf32 * 1e12; p->peak[1] = GPUS[i].bf16 * 1e12;
        p->gemm_rate[0] = GPUS[i].tf32 * 1e12 * E[GPU_GEMM];
        p->gemm_rate[1] = GPUS[i].bf16 * 1e12 * E[GPU_GEMM];
        p->attn_rate[0] = GPUS[i].tf32 * 1e12 * E[GPU_ATTN_F32];
        p->attn_rate[1] = GPUS[i].bf16 * 1e12 * E[GPU_ATTN];
        p->loop_rate = GPUS[i].bf16 * 1e12 * E[GPU_LOOP];
        p->mem_bw = GPUS[i].hbm * 1e12 * E[GPU_MEM];
        p->call_s = p->gemm_call_s = E[GPU_CALL];
        p->link_bw = (ib ? 50 : GPUS[i].link) * 1e9 * 0.8;   /* NCCL's ring reaches ~80 % of the link */
        p->link_s = 20e-6;
        snprintf(p->link_source, sizeof p->link_source, "%s, 80 %% of it (NCCL's ring), 20 us a call", ib ? "InfiniBand 400 Gb/s a GPU" : "NVLink");
        p->comm_overlap = 0.9;
        return 0;
    }
    if (err) snprintf(err, errlen, "no device profile '%s' (cpu, h100, h200, a100; -ib for InfiniBand links)", name ? name : "");
    return -1;
}

void kcost_profile_free(KCostProfile *p) {
    free(p->timed);
    p->timed = NULL; p->n_timed = p->cap_timed = 0;
}

/* ---- the CPU: measured ------------------------------------------------------------------------- */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What a step's op meets: operands that the ops between two uses of them pushed out of cache (on the
   machines this runs on, a step's GEMMs run 25-50 % slower than the same call repeated on the same
   buffers, as slow as with operands nobody touched for a while). So each timed call takes a fresh copy
   of its operands, one of `sets` (up to 16, at most COLD_POOL bytes in all; each filled once, long
   before its call); operands of 64 MB and more, one copy. */
#define COLD_POOL (256.0 * 1024 * 1024)
int kcost_cold_sets(double bytes_a_set) {
    if (bytes_a_set >= COLD_POOL / 4) return 1;   /* larger than any cache's share: one copy is as cold, and fills fast */
    const double k = bytes_a_set > 0 ? COLD_POOL / bytes_a_set : 16;
    return k >= 16 ? 16 : k <= 2 ? 2 : (int)k;
}

/* seconds of one call of fn: the fastest of 5 to 15 repetitions after a warm one (at least 20 ms of them
   when calls are short), each on the next of the operands' sets (*set, of sets): other work on the
   machine only ever adds time, so the minimum is the kernel's */
typedef void (*RunFn)(void *ctx);
double kcost_time_call(RunFn fn, void *ctx, int *set, int sets) {
    double best = 0;
    if (set) *set = 0;
    fn(ctx);
    const double start = now_s();
    for (int n = 0; n < 15 && (n < 5 || now_s() - start < 0.02); n++) {
        if (set) *set = (n + 1) % sets;
        const double t0 = now_s();
        fn(ctx);
        const double t = now_s() - t0;
        if (n == 0 || t < best) best = t;
    }
    return best;
}

/* a GEMM's or attention's operands, `sets` copies of each (lengths in floats: one copy) */
typedef struct {
    KBackend *b; int key[8]; float *x, *y, *z, *w, *o, *dx, *dy, *dz; void *scratch; size_t n;
    size_t lx, ly, lz, lw, lo; int set;
} Bench;
#define AT(c, f, l) ((c)->f + (size_t)(c)->set * (c)->l)

static void run_gemm(void *v) {
    Bench *c = v;
    const int ta = c->key[0], tb = c->key[1], M = c->key[2], N = c->key[3], K = c->key[4];
    const int batch = c->key[5];
    const long long sa = (long long)M * K, sb = (long long)K * N, sc = (long long)M * N;
    float *x = AT(c, x, lx), *y = AT(c, y, ly), *z = AT(c, z, lz);
    if (c->key[6] == 2)
        c->b->ops->gemm_ex(c->b, ta, tb, M, N, K, 1.0f, x, ta ? M : K, sa, y, tb ? K : N, sb, 0.0f, z, N, sc, batch,
                           KDT_BF16, KDT_F32, c->scratch);
    else c->b->ops->gemm(c->b, ta, tb, M, N, K, 1.0f, x, ta ? M : K, sa, y, tb ? K : N, sb, 0.0f, z, N, sc, batch);
}

static void run_attn(void *v) {
    Bench *c = v;
    const int B = c->key[0], T = c->key[1], NH = c->key[2], NKV = c->key[3], HS = c->key[4];
    float *q = AT(c, x, lx), *k = AT(c, y, ly), *vv = AT(c, z, ly), *o = AT(c, o, lx), *lse = AT(c, w, lw);
    if (c->key[7]) c->b->ops->attention_backward(c->b, AT(c, dx, lx), AT(c, dy, ly), AT(c, dz, ly), o, q, k, vv, o, lse, B, T, NH, NKV, HS, c->scratch);
    else c->b->ops->attention_forward(c->b, o, lse, q, k, vv, B, T, NH, NKV, HS, c->scratch);
}

static void run_copy(void *v) { Bench *c = v; c->b->ops->copy(c->b, c->y, c->x, c->n); }
static void run_fill(void *v) { Bench *c = v; c->b->ops->fill(c->b, c->x, 1.0f, c->n); }
static void run_ce(void *v) {
    Bench *c = v;
    c->b->ops->crossentropy_forward(c->b, c->o, c->x, (const int *)c->w, c->key[0], c->key[1], c->scratch);
}

float *kcost_filled(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; p && i < n; i++) p[i] = (float)((i * 7919u) % 1000u) * 1e-3f;
    return p;
}

/* Seconds of one call of a GEMM or attention shape on the CPU backend b; < 0 when it could not be
   measured (out of host memory). bf16 operands are given as bf16 storage (half the floats). */
static double measure_shape(KBackend *b, int kind, const int *key) {
    Bench c;
    memset(&c, 0, sizeof c);
    c.b = b;
    memcpy(c.key, key, sizeof c.key);
    double s = -1;
    if (kind == KC_GEMM) {
        const int batch = key[5];
        const size_t a = (size_t)key[2] * key[4] * batch, bb = (size_t)key[4] * key[3] * batch, cc = (size_t)key[2] * key[3] * batch;
        KShape sh = { .M = key[2], .N = key[3], .K = key[4], .transA = key[0], .transB = key[1], .ab = KDT_BF16, .c = KDT_F32 };
        const size_t scr = key[6] == 2 ? b->ops->scratch_bytes(b, KOP_GEMM_EX, &sh) : 0;
        const int sets = kcost_cold_sets(4.0 * (double)(a + bb + cc));
        c.lx = a; c.ly = bb; c.lz = cc;
        c.x = kcost_filled(a * sets); c.y = kcost_filled(bb * sets); c.z = kcost_filled(cc * sets);
        c.scratch = scr ? malloc(scr) : NULL;
        if (c.x && c.y && c.z && (!scr || c.scratch)) {
            if (key[6] == 2)   /* bf16 operands: the values rounded, stored in the first half of each copy */
                for (c.set = 0; c.set < sets; c.set++) {
                    b->ops->narrow_inplace(b, AT(&c, x, lx), a);
                    b->ops->narrow_inplace(b, AT(&c, y, ly), bb);
                }
            s = kcost_time_call(run_gemm, &c, &c.set, sets);
        }
        free(c.scratch);
    } else {
        const int B = key[0], T = key[1], NH = key[2], NKV = key[3], HS = key[4];
        c.key[7] = kind == KC_ATTN_B;
        const size_t q = (size_t)B * T * NH * HS, kv = (size_t)B * T * NKV * HS;
        KShape sh = { .B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS };
        const size_t scr = b->ops->scratch_bytes(b, kind == KC_ATTN_B ? KOP_ATTENTION_BACKWARD : KOP_ATTENTION_FORWARD, &sh);
        const size_t lw = (size_t)B * NH * T;
        const int sets = kcost_cold_sets(4.0 * (double)(3 * q + 4 * kv + lw));
        c.lx = q; c.ly = kv; c.lw = lw;
        c.x = kcost_filled(q * sets); c.y = kcost_filled(kv * sets); c.z = kcost_filled(kv * sets); c.o = kcost_filled(q * sets); c.w = kcost_filled(lw * sets);
        c.dx = kcost_filled(q * sets); c.dy = kcost_filled(kv * sets); c.dz = kcost_filled(kv * sets);   /* the backward's outputs: apart from its inputs */
        c.scratch = scr ? malloc(scr) : NULL;
        if (c.x && c.y && c.z && c.o && c.w && c.dx && c.dy && c.dz && (!scr || c.scratch)) {
            if (kind == KC_ATTN_B)   /* a real lse in each set */
                for (c.set = 0, c.key[7] = 0; c.set < sets; c.set++) run_attn(&c);
            c.key[7] = kind == KC_ATTN_B;
            s = kcost_time_call(run_attn, &c, &c.set, sets);
        }
        free(c.scratch);
    }
    free(c.x); free(c.y); free(c.z); free(c.o); free(c.w); free(c.dx); free(c.dy); free(c.dz);
    return s;
}

/* ---- the named ops (kcost_op): each at its rows × inner elements -------------------------------- */
typedef struct { KBackend *b; int op; size_t rows; int inner, extra; float *x0[5]; int *tok0; void *scratch; int set; float *x[5]; int *tok; } OpBench;

static void run_op(void *v) {
    OpBench *c = v;
    KBackend *b = c->b;
    const KOps *o = b->ops;
    const size_t n = c->rows * (size_t)c->inner;
    for (int i = 0; i < 5; i++) c->x[i] = c->x0[i] + (size_t)c->set * n;   /* this call's copy */
    c->tok = c->tok0 + (size_t)c->set * c->rows;
    float **x = c->x;
    const int R = (int)c->rows, C = c->inner, HS = c->extra > 0 ? c->extra : C;
    const KRope rope = { .theta = 10000.0f };
    switch (c->op) {
        case KCO_FILL: o->fill(b, x[0], 0.5f, n); break;
        case KCO_COPY: o->copy(b, x[1], x[0], n); break;
        case KCO_ADD: o->add(b, x[1], x[0], n); break;
        case KCO_SCALE: o->scale(b, x[0], 1.0f, n); break;
        case KCO_REDUCE: (void)o->sumsq(b, x[0], n, c->scratch); break;
        case KCO_EMB_F: o->embedding_forward(b, x[1], c->tok, x[0], R, C); break;   /* x[0]: a table of R rows */
        case KCO_EMB_B: o->embedding_backward(b, x[1], c->tok, x[0], R, C, R, c->scratch); break;
        case KCO_RMS_F: o->rmsnorm_forward(b, x[1], x[3], x[0], x[2], R, C, 1e-5f); break;
        case KCO_RMS_B: o->rmsnorm_backward(b, x[1], x[4], x[0], x[2], x[3], x[3], R, C, c->scratch); break;
        case KCO_ROPE: o->rope_forward(b, x[0], 1, R, C / HS, HS, rope); break;
        case KCO_SWI_F: o->swiglu_forward(b, x[2], x[0], x[1], n); break;
        case KCO_SWI_B: o->swiglu_backward(b, x[3], x[4], x[2], x[0], x[1], n); break;
        case KCO_CE_F: o->crossentropy_forward(b, x[1], x[0], c->tok, R, C, c->scratch); break;
        case KCO_CE_B: o->crossentropy_backward(b, x[0], c->tok, 1e-3f, NULL, 1, R, C, c->scratch); break;
        case KCO_ADAMW: o->adamw(b, x[0], x[1], x[2], x[3], n, 1e-6f, 0.9f, 0.95f, 1e-8f, 0.0f, 2); break;
        case KCO_SGD: o->sgd(b, x[0], x[1], n, 1e-6f, 0.0f); break;
        case KCO_WIDEN: o->widen(b, x[1], x[0], n); break;
        case KCO_NARROW: o->narrow(b, x[1], x[0], n); break;
        case KCO_NOISE: noise_privatize(x[0], n, 1e-3, 1.0, 1.0, 1, 1, 0); break;
        default: break;
    }
}

/* Seconds of one call of a named op over rows × inner (extra: RoPE's HS) on the CPU backend b; < 0 when
   it could not be measured (out of host memory). The fused noise + AdamW as its two halves (the CPU's
   fused pass is no faster than the two: bench/bench_noise). */
static double measure_op(KBackend *b, int op, size_t rows, int inner, int extra) {
    if (op == KCO_NOISY_ADAMW) {
        const double a = measure_op(b, KCO_NOISE, rows, inner, extra), m = measure_op(b, KCO_ADAMW, rows, inner, extra);
        return a < 0 || m < 0 ? -1 : a + m;
    }
    OpBench c = { .b = b, .op = op, .rows = rows, .inner = inner, .extra = extra };
    const size_t n = rows * (size_t)inner;
    const int ce = op == KCO_CE_F || op == KCO_CE_B;
    KShape sh = { .B = 1, .T = (int)rows, .C = inner, .V = ce ? inner : (int)rows, .n = n };
    const KOp kop = op == KCO_REDUCE ? KOP_REDUCE : op == KCO_EMB_B ? KOP_EMBEDDING_BACKWARD : op == KCO_RMS_B ? KOP_RMSNORM_BACKWARD
                  : op == KCO_CE_F ? KOP_CROSSENTROPY_FORWARD : op == KCO_CE_B ? KOP_CROSSENTROPY_BACKWARD : KOP_COUNT;
    const size_t scr = kop == KOP_COUNT ? 0 : b->ops->scratch_bytes(b, kop, &sh);
    double s = -1;
    const int sets = kcost_cold_sets((20.0 + 4.0 / inner) * (double)n);
    int ok = (c.tok0 = malloc(rows * sets * sizeof *c.tok0)) != NULL && (!scr || (c.scratch = malloc(scr)) != NULL);
    for (int i = 0; ok && i < 5; i++) ok = (c.x0[i] = kcost_filled(n * sets)) != NULL;   /* values in [0, 1): logits, moments in range */
    if (ok) {
        for (size_t i = 0; i < rows * sets; i++) c.tok0[i] = (int)((i % rows * 2654435761u) % (size_t)(ce ? inner : (int)rows));
        s = kcost_time_call(run_op, &c, &c.set, sets);
    }
    for (int i = 0; i < 5; i++) free(c.x0[i]);
    free(c.tok0); free(c.scratch);
    return s;
}

/* each named op's seconds an element at 2^20 elements (p->op_s), less a call's fixed cost: for a size too
   large to time, when no timed size scales to it */
static int measure_ops(KBackend *b, KCostProfile *p) {
    for (int op = KCO_FILL; op < KCO_N; op++) {
        const int rows_op = op == KCO_EMB_F || op == KCO_EMB_B || op == KCO_RMS_F || op == KCO_RMS_B || op == KCO_ROPE;
        const int ce = op == KCO_CE_F || op == KCO_CE_B, inner = rows_op ? 512 : ce ? 4096 : 1;
        const double t = measure_op(b, op, ((size_t)1 << 20) / (size_t)inner, inner, op == KCO_ROPE ? 64 : 0);
        if (t < 0) return -1;
        p->op_s[op] = (t > p->call_s ? t - p->call_s : 0) / (double)(1 << 20) + 1e-15;
    }
    return 0;
}

static int add_timed(KCostProfile *p, int kind, const int *key, double s) {
    if (p->n_timed == p->cap_timed) {
        const int cap = p->cap_timed ? 2 * p->cap_timed : 64;
        KCostTimed *t = realloc(p->timed, (size_t)cap * sizeof *t);
        if (!t) return -1;
        p->timed = t; p->cap_timed = cap;
    }
    KCostTimed *t = &p->timed[p->n_timed++];
    t->kind = kind; memcpy(t->key, key, sizeof t->key); t->seconds = s;
    return 0;
}

/* 2: every shape timed on fresh operands, the named ops timed (an older file is measured again) */
#define PROFILE_VERSION 2

/* a shape measured when one call stays under these (a larger one takes the rates measured below) */
#define MEASURE_MAX_FLOPS 8e9
#define MEASURE_MAX_BYTES (512.0 * 1024 * 1024)

int kcost_profile_measure(KCostProfile *p, const KCostLedger *l, int nthreads, int exact) {
    KBackend b;
    int added = 0, ready = 0;   /* the backend made only when a shape is to be measured */
    for (int i = 0; i < l->n; i++) {
        const KCostEntry *e = &l->e[i];
        const int named = kcost_op_elements(e) > 0 && e->key[1] == 4;   /* (the CPU runs no bf16 storage op) */
        const int dp = l->bench_dp != NULL && (e->kind == KC_DP || (named && e->key[0] == KCO_NOISY_ADAMW));   /* the DP layer's kernels */
        if (e->kind != KC_GEMM && e->kind != KC_ATTN_F && e->kind != KC_ATTN_B && !named && !dp) continue;
        int seen = 0;   /* measured (exact), or a measured shape that scales to it */
        for (int j = 0; exact && j < p->n_timed && !seen; j++) seen = p->timed[j].kind == e->kind && !memcmp(p->timed[j].key, e->key, sizeof e->key);
        if (!exact) seen = kcost_timed_seconds(p, e) >= 0;
        if (seen || e->flops > MEASURE_MAX_FLOPS || e->bytes > MEASURE_MAX_BYTES || (named && 20.0 * kcost_op_elements(e) > MEASURE_MAX_BYTES)) continue;
        if (!ready) { kbackend_cpu_init(&b, nthreads); ready = 1; }
        const double s = dp ? l->bench_dp(e, nthreads) : named ? measure_op(&b, e->key[0], (size_t)e->key[2], e->key[3], e->key[4])
                       : measure_shape(&b, e->kind, e->key);
        if (s >= 0 && add_timed(p, e->kind, e->key, s) == 0) added++;
    }
    if (ready) kbackend_destroy(&b);
    return added;
}

int kcost_profile_cpu(KCostProfile *p, int nthreads) {
    memset(p, 0, sizeof *p);
    KBackend b;
    kbackend_cpu_init(&b, nthreads);
    Bench c;
    memset(&c, 0, sizeof c);
    c.b = &b;
    int rc = -1;
    c.n = (size_t)8 << 20;   /* 32 MiB a side */
    c.x = kcost_filled(c.n); c.y = kcost_filled(c.n);
    if (!c.x || !c.y) goto out;
    p->mem_bw = 2.0 * 4 * (double)c.n / kcost_time_call(run_copy, &c, NULL, 1);
    c.n = 16;
    p->call_s = kcost_time_call(run_fill, &c, NULL, 1);
    free(c.x); free(c.y); c.x = c.y = NULL;
    const int big[8] = { 0, 1, 512, 512, 512, 1, 4, 0 }, tiny[8] = { 0, 1, 8, 8, 8, 1, 4, 0 };
    const double t_big = measure_shape(&b, KC_GEMM, big), t_tiny = measure_shape(&b, KC_GEMM, tiny);
    const int bigb[8] = { 0, 1, 512, 512, 512, 1, 2, 0 };
    const double t_bigb = measure_shape(&b, KC_GEMM, bigb);
    if (t_big <= 0 || t_tiny <= 0 || t_bigb <= 0) goto out;
    p->gemm_call_s = t_tiny;
    p->gemm_rate[0] = 2.0 * 512 * 512 * 512 / t_big;
    p->gemm_rate[1] = 2.0 * 512 * 512 * 512 / t_bigb;
    const int at[8] = { 1, 256, 4, 4, 32, 4, 0, 0 };
    const double t_at = measure_shape(&b, KC_ATTN_F, at);
    if (t_at <= 0) goto out;
    p->attn_rate[0] = p->attn_rate[1] = 256.0 * 257 / 2 * 4 * (4.0 * 32 + 2) / t_at;
    c.key[0] = 256; c.key[1] = 2000;
    KShape sh = { .B = 1, .T = 256, .V = 2000 };
    const size_t scr = b.ops->scratch_bytes(&b, KOP_CROSSENTROPY_FORWARD, &sh);
    c.x = kcost_filled((size_t)256 * 2000); c.o = kcost_filled(256); c.w = calloc(256, sizeof(int));
    c.scratch = scr ? malloc(scr) : NULL;
    if (!c.x || !c.o || !c.w || (scr && !c.scratch)) goto out;
    p->loop_rate = 3.0 * 256 * 2000 / kcost_time_call(run_ce, &c, NULL, 1);
    if (measure_ops(&b, p)) goto out;
    p->link_bw = p->mem_bw / 4;   /* MPI between processes of this machine: shared memory copies */
    p->link_s = 20e-6;
    p->comm_overlap = 0.0;        /* the CPU's collectives take the cores the backward needs */
    snprintf(p->name, sizeof p->name, "cpu");
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(p->measured, sizeof p->measured, "%Y-%m-%d %H:%M UTC", &tm);
    snprintf(p->source, sizeof p->source, "this machine, %d thread%s, measured %s (kernels/plan/profile.c)", b.nthreads,
             b.nthreads == 1 ? "" : "s", p->measured);
    rc = 0;
out:
    free(c.x); free(c.y); free(c.o); free(c.w); free(c.scratch);
    kbackend_destroy(&b);
    return rc;
}

/* ---- the cache file ---------------------------------------------------------------------------- */
int kcost_profile_save(const KCostProfile *p, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "# dpmem plan profile (kernels/plan/profile.c); delete this file to measure again\n");
    fprintf(f, "version %d\n", PROFILE_VERSION);
    fprintf(f, "name %s\nmeasured %s\nsource %s\n", p->name, p->measured, p->source);
    if (p->link_source[0]) fprintf(f, "link_source %s\n", p->link_source);
    fprintf(f, "rates %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", p->gemm_rate[0], p->gemm_rate[1],
            p->gemm_call_s, p->attn_rate[0], p->attn_rate[1], p->loop_rate, p->mem_bw, p->call_s, p->link_bw, p->link_s,
            p->comm_overlap, p->rank_skew);
    fprintf(f, "ops");
    for (int i = 0; i < KCO_N; i++) fprintf(f, " %.9g", p->op_s[i]);
    fprintf(f, "\n");
    for (int i = 0; i < p->n_timed; i++) {
        const KCostTimed *t = &p->timed[i];
        fprintf(f, "timed %d %d %d %d %d %d %d %d %d %.9g\n", t->kind, t->key[0], t->key[1], t->key[2], t->key[3], t->key[4],
                t->key[5], t->key[6], t->key[7], t->seconds);
    }
    const int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) { remove(tmp); return -1; }
    return 0;
}

int kcost_profile_load(KCostProfile *p, const char *path) {
    memset(p, 0, sizeof *p);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int have_rates = 0, bad = 0, version = 0, have_ops = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        KCostTimed t;
        if (!strncmp(line, "version ", 8)) version = atoi(line + 8);
        else if (!strncmp(line, "ops ", 4)) {
            char *q = line + 4, *end;
            for (have_ops = 0; have_ops < KCO_N; have_ops++, q = end) {
                p->op_s[have_ops] = strtod(q, &end);
                if (end == q || !(p->op_s[have_ops] >= 0)) break;
            }
            bad = have_ops != KCO_N;
        } else if (!strncmp(line, "name ", 5)) snprintf(p->name, sizeof p->name, "%.31s", line + 5);
        else if (!strncmp(line, "measured ", 9)) snprintf(p->measured, sizeof p->measured, "%.31s", line + 9);
        else if (!strncmp(line, "source ", 7)) snprintf(p->source, sizeof p->source, "%.319s", line + 7);
        else if (!strncmp(line, "link_source ", 12)) snprintf(p->link_source, sizeof p->link_source, "%.127s", line + 12);
        else if (!strncmp(line, "rates ", 6))
            have_rates = sscanf(line + 6, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &p->gemm_rate[0], &p->gemm_rate[1],
                                &p->gemm_call_s, &p->attn_rate[0], &p->attn_rate[1], &p->loop_rate, &p->mem_bw, &p->call_s,
                                &p->link_bw, &p->link_s, &p->comm_overlap, &p->rank_skew) == 12;
        else if (!strncmp(line, "timed ", 6)) {
            bad = sscanf(line + 6, "%d %d %d %d %d %d %d %d %d %lf", &t.kind, &t.key[0], &t.key[1], &t.key[2], &t.key[3], &t.key[4],
                         &t.key[5], &t.key[6], &t.key[7], &t.seconds) != 10 || t.seconds < 0 || add_timed(p, t.kind, t.key, t.seconds);
        } else if (line[0] && line[0] != '#') bad = 1;
    }
    fclose(f);
    if (bad || version != PROFILE_VERSION || have_ops != KCO_N || !have_rates || !(p->gemm_rate[0] > 0) || !(p->mem_bw > 0)) { kcost_profile_free(p); memset(p, 0, sizeof *p); return -1; }
    return 0;
}
