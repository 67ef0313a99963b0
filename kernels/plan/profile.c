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

/* seconds of one call of fn: the fastest of 5 to 15 repetitions after a warm one (at least 20 ms of them
   when calls are short): other work on the machine only ever adds time, so the minimum is the kernel's */
typedef void (*RunFn)(void *ctx);
static double time_call(RunFn fn, void *ctx) {
    double best = 0;
    fn(ctx);
    const double start = now_s();
    for (int n = 0; n < 15 && (n < 5 || now_s() - start < 0.02); n++) {
        const double t0 = now_s();
        fn(ctx);
        const double t = now_s() - t0;
        if (n == 0 || t < best) best = t;
    }
    return best;
}

typedef struct { KBackend *b; int key[8]; float *x, *y, *z, *w, *o, *dx, *dy, *dz; void *scratch; size_t n; } Bench;

static void run_gemm(void *v) {
    Bench *c = v;
    const int ta = c->key[0], tb = c->key[1], M = c->key[2], N = c->key[3], K = c->key[4];
    const int batch = c->key[7] ? 1 : c->key[5];
    const long long sa = (long long)M * K, sb = (long long)K * N, sc = (long long)M * N;
    if (c->key[6] == 2)
        c->b->ops->gemm_ex(c->b, ta, tb, M, N, K, 1.0f, c->x, ta ? M : K, sa, c->y, tb ? K : N, sb, 0.0f, c->z, N, sc, batch,
                           KDT_BF16, KDT_F32, c->scratch);
    else c->b->ops->gemm(c->b, ta, tb, M, N, K, 1.0f, c->x, ta ? M : K, sa, c->y, tb ? K : N, sb, 0.0f, c->z, N, sc, batch);
}

static void run_attn(void *v) {
    Bench *c = v;
    const int B = c->key[0], T = c->key[1], NH = c->key[2], NKV = c->key[3], HS = c->key[4];
    if (c->key[7]) c->b->ops->attention_backward(c->b, c->dx, c->dy, c->dz, c->o, c->x, c->y, c->z, c->o, c->w, B, T, NH, NKV, HS, c->scratch);
    else c->b->ops->attention_forward(c->b, c->o, c->w, c->x, c->y, c->z, B, T, NH, NKV, HS, c->scratch);
}

static void run_copy(void *v) { Bench *c = v; c->b->ops->copy(c->b, c->y, c->x, c->n); }
static void run_fill(void *v) { Bench *c = v; c->b->ops->fill(c->b, c->x, 1.0f, c->n); }
static void run_ce(void *v) {
    Bench *c = v;
    c->b->ops->crossentropy_forward(c->b, c->o, c->x, (const int *)c->w, c->key[0], c->key[1], c->scratch);
}

static float *filled(size_t n) {
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
        const int batch = key[7] ? 1 : key[5];
        const size_t a = (size_t)key[2] * key[4] * batch, bb = (size_t)key[4] * key[3] * batch, cc = (size_t)key[2] * key[3] * batch;
        KShape sh = { .M = key[2], .N = key[3], .K = key[4], .transA = key[0], .transB = key[1], .ab = KDT_BF16, .c = KDT_F32 };
        const size_t scr = key[6] == 2 ? b->ops->scratch_bytes(b, KOP_GEMM_EX, &sh) : 0;
        c.x = filled(a); c.y = filled(bb); c.z = filled(cc);
        c.scratch = scr ? malloc(scr) : NULL;
        if (c.x && c.y && c.z && (!scr || c.scratch)) {
            if (key[6] == 2) {   /* bf16 operands: the values rounded, stored in the first half */
                b->ops->narrow_inplace(b, c.x, a);
                b->ops->narrow_inplace(b, c.y, bb);
            }
            s = time_call(run_gemm, &c);
            if (key[7]) s *= (double)key[5] * (key[7] == 1 ? 0.5 : 1.0);   /* syrk: half; flash: its tile pairs */
        }
        free(c.scratch);
    } else {
        const int B = key[0], T = key[1], NH = key[2], NKV = key[3], HS = key[4];
        c.key[7] = kind == KC_ATTN_B;
        const size_t q = (size_t)B * T * NH * HS, kv = (size_t)B * T * NKV * HS;
        KShape sh = { .B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS };
        const size_t scr = b->ops->scratch_bytes(b, kind == KC_ATTN_B ? KOP_ATTENTION_BACKWARD : KOP_ATTENTION_FORWARD, &sh);
        c.x = filled(q); c.y = filled(kv); c.z = filled(kv); c.o = filled(q); c.w = filled((size_t)B * NH * T);
        c.dx = filled(q); c.dy = filled(kv); c.dz = filled(kv);   /* the backward's outputs: apart from its inputs */
        c.scratch = scr ? malloc(scr) : NULL;
        if (c.x && c.y && c.z && c.o && c.w && c.dx && c.dy && c.dz && (!scr || c.scratch)) {
            if (kind == KC_ATTN_B) { c.key[7] = 0; run_attn(&c); c.key[7] = 1; }   /* a real lse */
            s = time_call(run_attn, &c);
        }
        free(c.scratch);
    }
    free(c.x); free(c.y); free(c.z); free(c.o); free(c.w); free(c.dx); free(c.dy); free(c.dz);
    return s;
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

/* a shape measured when one call stays under these (a larger one takes the rates measured below) */
#define MEASURE_MAX_FLOPS 8e9
#define MEASURE_MAX_BYTES (512.0 * 1024 * 1024)

int kcost_profile_measure(KCostProfile *p, const KCostLedger *l, int nthreads, int exact) {
    KBackend b;
    int added = 0, ready = 0;   /* the backend made only when a shape is to be measured */
    for (int i = 0; i < l->n; i++) {
        const KCostEntry *e = &l->e[i];
        if (e->kind != KC_GEMM && e->kind != KC_ATTN_F && e->kind != KC_ATTN_B) continue;
        int seen = 0;   /* measured (exact), or a measured shape that scales to it */
        for (int j = 0; exact && j < p->n_timed && !seen; j++) seen = p->timed[j].kind == e->kind && !memcmp(p->timed[j].key, e->key, sizeof e->key);
        if (!exact) seen = kcost_timed_seconds(p, e) >= 0;
        const double flops = e->kind == KC_GEMM && e->key[7] ? e->flops / e->key[5] : e->flops;
        if (seen || flops > MEASURE_MAX_FLOPS || e->bytes > MEASURE_MAX_BYTES) continue;
        if (!ready) { kbackend_cpu_init(&b, nthreads); ready = 1; }
        const double s = measure_shape(&b, e->kind, e->key);
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
    c.x = filled(c.n); c.y = filled(c.n);
    if (!c.x || !c.y) goto out;
    p->mem_bw = 2.0 * 4 * (double)c.n / time_call(run_copy, &c);
    c.n = 16;
    p->call_s = time_call(run_fill, &c);
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
    c.x = filled((size_t)256 * 2000); c.o = filled(256); c.w = calloc(256, sizeof(int));
    c.scratch = scr ? malloc(scr) : NULL;
    if (!c.x || !c.o || !c.w || (scr && !c.scratch)) goto out;
    p->loop_rate = 3.0 * 256 * 2000 / time_call(run_ce, &c);
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
    fprintf(f, "name %s\nmeasured %s\nsource %s\n", p->name, p->measured, p->source);
    if (p->link_source[0]) fprintf(f, "link_source %s\n", p->link_source);
    fprintf(f, "rates %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", p->gemm_rate[0], p->gemm_rate[1],
            p->gemm_call_s, p->attn_rate[0], p->attn_rate[1], p->loop_rate, p->mem_bw, p->call_s, p->link_bw, p->link_s,
            p->comm_overlap, 0.0);
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
    int have_rates = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        double unused;
        KCostTimed t;
        if (!strncmp(line, "name ", 5)) snprintf(p->name, sizeof p->name, "%.31s", line + 5);
        else if (!strncmp(line, "measured ", 9)) snprintf(p->measured, sizeof p->measured, "%.31s", line + 9);
        else if (!strncmp(line, "source ", 7)) snprintf(p->source, sizeof p->source, "%.319s", line + 7);
        else if (!strncmp(line, "link_source ", 12)) snprintf(p->link_source, sizeof p->link_source, "%.127s", line + 12);
        else if (!strncmp(line, "rates ", 6))
            have_rates = sscanf(line + 6, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &p->gemm_rate[0], &p->gemm_rate[1],
                                &p->gemm_call_s, &p->attn_rate[0], &p->attn_rate[1], &p->loop_rate, &p->mem_bw, &p->call_s,
                                &p->link_bw, &p->link_s, &p->comm_overlap, &unused) == 12;
        else if (!strncmp(line, "timed ", 6)) {
            bad = sscanf(line + 6, "%d %d %d %d %d %d %d %d %d %lf", &t.kind, &t.key[0], &t.key[1], &t.key[2], &t.key[3], &t.key[4],
                         &t.key[5], &t.key[6], &t.key[7], &t.seconds) != 10 || t.seconds < 0 || add_timed(p, t.kind, t.key, t.seconds);
        } else if (line[0] && line[0] != '#') bad = 1;
    }
    fclose(f);
    if (bad || !have_rates || !(p->gemm_rate[0] > 0) || !(p->mem_bw > 0)) { kcost_profile_free(p); memset(p, 0, sizeof *p); return -1; }
    return 0;
}
