/* profile_step.c — where a training step's time goes on the CPU: per phase (the trainer's scopes)
   and per op (every call through the backend's op table, timed), against the op's work and the
   machine's limits measured in the same run: the sgemm peak (OpenBLAS, the backend's own split of
   rows over its threads, best of several products of the model's largest GEMM class) and the
   memory bandwidth (a copy on the same threads). docs/PERFORMANCE.md is made from its tables.

     build/bench/profile_step METHOD [trainer and DP flags]     METHOD: vanilla|direct|ghost|flash|mixed
     e.g. build/bench/profile_step vanilla --model small --batch-size 4 --seq-len 256 --steps 4
     build/bench/profile_step METHOD --times [flags]   one JSON line: every measured step's time and its
                                                       phases, the model's flops (bench/torch_baseline.py)
     build/bench/profile_step --peak                   the limits alone, as JSON

   Phases are the scopes the loop and DP-SGD open (forward, loss, backward, optimizer_step, zero_grad;
   DP: "norms" = the hooks' scope clip inside the backward, "clip" = the factors and clipped sums
   after it, noise; recompute and norms are reported inside the backward, which includes them). Ops are timed
   by wrapping the backend's table after the model is built; the DP kernels (kernels/cpu/dp_*.c)
   call OpenBLAS themselves and show as the rest of "clip". Step 0 (first touch, OpenBLAS buffers)
   is left out. Each row: ms per step (wall, and the process's CPU time over the threads: on a
   shared machine the CPU figure shows what the op costs when it runs, the wall one what it waited
   too), the op's flops or bytes, and the fraction of the peak or the bandwidth it reached: wall
   rates against the peak on all threads, rates per busy core (flops over CPU time) against the
   1-thread peak (measured on the thread's own CPU time).
   Methods other than vanilla use book-keeping clipping, except ghost (two-pass, Opacus's).
   Not here: comparisons with other frameworks (bench/torch_baseline.py), the GPU. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"
#include "cpu/kernels_cpu.h"
#include "cpu/blas_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the machine's limits ------------------------------------------------------------------------ */

/* Best rate (flop/s) of C[M,N] = A[M,K] op(B) over `reps` products, on nt threads the backend's way. */
static double sgemm_peak(int nt, int M, int N, int K, int transB, int reps) {
    KBackend kb;
    kbackend_cpu_init(&kb, nt);
    float *a = kbuf_alloc(&kb, (size_t)M * K * 4, "bench/a"), *b = kbuf_alloc(&kb, (size_t)K * N * 4, "bench/b"),
          *c = kbuf_alloc(&kb, (size_t)M * N * 4, "bench/c");
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 5) * 0.1f;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {   /* one thread: its own CPU time, which other processes do not stretch */
        uint64_t t0 = dpmem_now_ns();
        const double c0 = nt == 1 ? thread_cpu_s() : 0;
        gemm_cpu(&kb, 0, transB, M, N, K, 1.0f, a, K, 0, b, transB ? K : N, 0, 0.0f, c, N, 0, 1);
        double s = nt == 1 ? thread_cpu_s() - c0 : (double)(dpmem_now_ns() - t0) * 1e-9;
        if (s < best) best = s;
    }
    kbackend_destroy(&kb);
    return 2.0 * M * N * K / best;
}

/* Best copy bandwidth (bytes read + written per second) of 256 MiB on nt threads. */
static double copy_bandwidth(int nt) {
    const size_t n = (size_t)64 << 20;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    if (!x || !y) { free(x); free(y); return 0; }
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t i = 0; i < n; i++) { x[i] = (float)i; y[i] = 0; }
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        uint64_t t0 = dpmem_now_ns();
        #pragma omp parallel for num_threads(nt) schedule(static)
        for (size_t i = 0; i < n; i++) y[i] = x[i];
        double s = (double)(dpmem_now_ns() - t0) * 1e-9;
        if (s < best) best = s;
    }
    volatile float sink = y[n / 2];
    (void)sink;
    free(x); free(y);
    return 2.0 * n * 4 / best;
}

/* ---- phases: the scopes, by name, on the main thread ------------------------------------------- */

enum { NPH = 16, DEPTH = 16 };
/* "norms": the DP hooks' scope "clip" inside the backward (per-sample norms, what bk keeps); "clip":
   the same scope after it (the factors and the clipped sums) */
static const char *PHASES[NPH] = { "forward", "loss", "backward", "recompute", "norms", "clip", "noise", "optimizer_step",
                                   "zero_grad", "data", NULL };
enum { PH_BACKWARD = 2, PH_NORMS = 4, PH_CLIP = 5 };
enum { MAXSTEPS = 256 };
typedef struct { int ph; uint64_t t0; double c0; } Open;
static struct {
    Open open[DEPTH];
    int depth, step;                       /* step: index of the step in progress (-1 before) */
    double wall[NPH], cpu[NPH], step_wall, step_cpu;
    int steps;                             /* steps measured (from step 1) */
    double per_step[MAXSTEPS], per_phase[NPH][MAXSTEPS];   /* wall seconds of each measured step */
    double per_step_cpu[MAXSTEPS];                         /* and the process's CPU seconds (all threads) */
} P = { .step = -1 };

static int phase_of(uint32_t id) {
    const char *s = dpmem_string(id);
    for (int i = 0; s && PHASES[i]; i++) if (!strcmp(s, PHASES[i])) return i;
    return s && !strcmp(s, "step") ? 100 : -1;
}

/* The innermost phase open now (-1: none). */
static int current_phase(void) {
    for (int i = P.depth - 1; i >= 0; i--) if (P.open[i].ph >= 0 && P.open[i].ph < NPH) return P.open[i].ph;
    return -1;
}

static uint32_t main_thread;

static void scope_hook(void *user, int begin, uint32_t id, uint64_t ts) {
    (void)user;
    if (dpmem_thread_index() != main_thread) return;
    if (begin) {
        int ph = phase_of(id);
        if (ph == PH_CLIP && current_phase() == PH_BACKWARD) ph = PH_NORMS;
        if (ph == 100) P.step++;
        if (P.depth < DEPTH) P.open[P.depth] = (Open){ ph, ts, cpu_s() };
        P.depth++;
        return;
    }
    if (--P.depth >= DEPTH || P.depth < 0) { if (P.depth < 0) P.depth = 0; return; }
    Open o = P.open[P.depth];
    if (P.step < 1) return;
    double w = (double)(ts - o.t0) * 1e-9, c = cpu_s() - o.c0;
    if (o.ph == 100) {
        if (P.steps < MAXSTEPS) { P.per_step[P.steps] = w; P.per_step_cpu[P.steps] = c; }
        P.step_wall += w; P.step_cpu += c; P.steps++;
    } else if (o.ph >= 0) {
        P.wall[o.ph] += w; P.cpu[o.ph] += c;
        if (P.steps < MAXSTEPS) P.per_phase[o.ph][P.steps] += w;
    }
}

/* ---- ops: the backend's table, wrapped ------------------------------------------------------------ */

enum { OP_GEMM, OP_FILL, OP_COPY, OP_ADD, OP_SCALE, OP_REDUCE, OP_EMB_F, OP_EMB_B, OP_RMS_F, OP_RMS_B, OP_ROPE_F,
       OP_ROPE_B, OP_ATT_F, OP_ATT_B, OP_SWI_F, OP_SWI_B, OP_CE_F, OP_CE_B, OP_ADAMW, OP_SGD, OP_CONVERT, OP_N };
static const char *OPNAMES[OP_N] = { "gemm", "fill", "copy", "add", "scale", "reduce", "embedding_forward",
    "embedding_backward", "rmsnorm_forward", "rmsnorm_backward", "rope_forward", "rope_backward", "attention_forward",
    "attention_backward", "swiglu_forward", "swiglu_backward", "crossentropy_forward", "crossentropy_backward",
    "adamw", "sgd", "bf16 convert/gemm_ex" };
typedef struct { double wall, cpu, flops, bytes; long calls; } Acc;
static Acc ACC[OP_N][NPH + 1];             /* [op][phase] (NPH: outside every phase) */
static KOps REAL, WRAPPED;
static uint64_t op_t0;
static double op_c0;

static void op_begin(void) { op_t0 = dpmem_now_ns(); op_c0 = cpu_s(); }
static void op_end(int op, double flops, double bytes) {
    double w = (double)(dpmem_now_ns() - op_t0) * 1e-9, c = cpu_s() - op_c0;
    if (P.step < 1) return;
    int ph = current_phase();
    Acc *a = &ACC[op][ph < 0 ? NPH : ph];
    a->wall += w; a->cpu += c; a->flops += flops; a->bytes += bytes; a->calls++;
}
#define F4 4.0   /* bytes per float */

/* GEMMs also by shape (transposes, M, N, K, and the phase): which products run below the peak */
typedef struct { int ta, tb, M, N, K, ph; double wall, cpu; long calls; } Shape;
static Shape SHAPES[96];
static int n_shapes;

static void w_gemm(KBackend *b, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, long long sA,
                   const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC, int batch) {
    op_begin();
    REAL.gemm(b, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
    const double w = (double)(dpmem_now_ns() - op_t0) * 1e-9, c = cpu_s() - op_c0;
    op_end(OP_GEMM, 2.0 * M * N * K * batch, F4 * batch * ((double)M * K + (double)K * N + (beta != 0 ? 2.0 : 1.0) * M * N));
    if (P.step < 1) return;
    const int ph = current_phase();
    int i = 0;
    while (i < n_shapes && !(SHAPES[i].ta == ta && SHAPES[i].tb == tb && SHAPES[i].M == M && SHAPES[i].N == N &&
                             SHAPES[i].K == K * batch && SHAPES[i].ph == ph)) i++;
    if (i == n_shapes && n_shapes < 96) SHAPES[n_shapes++] = (Shape){ ta, tb, M, N, K * batch, ph, 0, 0, 0 };
    if (i < n_shapes) { SHAPES[i].wall += w; SHAPES[i].cpu += c; SHAPES[i].calls++; }
}
static void w_fill(KBackend *b, float *x, float v, size_t n) { op_begin(); REAL.fill(b, x, v, n); op_end(OP_FILL, 0, F4 * n); }
static void w_copy(KBackend *b, float *d, const float *s, size_t n) { op_begin(); REAL.copy(b, d, s, n); op_end(OP_COPY, 0, 2 * F4 * n); }
static void w_add(KBackend *b, float *y, const float *x, size_t n) { op_begin(); REAL.add(b, y, x, n); op_end(OP_ADD, n, 3 * F4 * n); }
static void w_scale(KBackend *b, float *x, float s, size_t n) { op_begin(); REAL.scale(b, x, s, n); op_end(OP_SCALE, n, 2 * F4 * n); }
static double w_sum(KBackend *b, const float *x, size_t n, void *s) { op_begin(); double r = REAL.sum(b, x, n, s); op_end(OP_REDUCE, n, F4 * n); return r; }
static double w_sumsq(KBackend *b, const float *x, size_t n, void *s) { op_begin(); double r = REAL.sumsq(b, x, n, s); op_end(OP_REDUCE, 2.0 * n, F4 * n); return r; }
static size_t w_nonfinite(KBackend *b, const float *x, size_t n, void *s) { op_begin(); size_t r = REAL.count_nonfinite(b, x, n, s); op_end(OP_REDUCE, n, F4 * n); return r; }
static void w_emb_f(KBackend *b, float *o, const int *t, const float *w, int N, int C) {
    op_begin(); REAL.embedding_forward(b, o, t, w, N, C); op_end(OP_EMB_F, 0, 2 * F4 * N * C);
}
static void w_emb_b(KBackend *b, float *dw, const int *t, const float *d, int N, int C, int V, void *s) {
    op_begin(); REAL.embedding_backward(b, dw, t, d, N, C, V, s); op_end(OP_EMB_B, (double)N * C, 3 * F4 * N * C);
}
static void w_rms_f(KBackend *b, float *o, float *r, const float *x, const float *w, int N, int C, float eps) {
    op_begin(); REAL.rmsnorm_forward(b, o, r, x, w, N, C, eps); op_end(OP_RMS_F, 4.0 * N * C, 2 * F4 * N * C);
}
static void w_rms_b(KBackend *b, float *dx, float *dw, const float *d, const float *x, const float *w, const float *r,
                    int N, int C, void *s) {
    op_begin(); REAL.rmsnorm_backward(b, dx, dw, d, x, w, r, N, C, s); op_end(OP_RMS_B, 10.0 * N * C, (dw ? 6 : 4) * F4 * N * C);
}
static void w_rope_f(KBackend *b, float *x, int B, int T, int NH, int HS, KRope r) {
    op_begin(); REAL.rope_forward(b, x, B, T, NH, HS, r); op_end(OP_ROPE_F, 3.0 * B * T * NH * HS, 2 * F4 * B * T * NH * HS);
}
static void w_rope_b(KBackend *b, float *x, int B, int T, int NH, int HS, KRope r) {
    op_begin(); REAL.rope_backward(b, x, B, T, NH, HS, r); op_end(OP_ROPE_B, 3.0 * B * T * NH * HS, 2 * F4 * B * T * NH * HS);
}
/* causal: T(T+1)/2 scores per head; forward two products, backward five */
static double causal(int B, int T, int NH, int HS) { return (double)B * NH * HS * T * (T + 1.0) / 2; }
static void w_att_f(KBackend *b, float *o, float *lse, const float *q, const float *k, const float *v, int B, int T,
                    int NH, int NKV, int HS, void *s) {
    op_begin(); REAL.attention_forward(b, o, lse, q, k, v, B, T, NH, NKV, HS, s);
    op_end(OP_ATT_F, 4 * causal(B, T, NH, HS), F4 * B * T * (2.0 * NH + 2.0 * NKV) * HS);
}
static void w_att_b(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                    const float *v, const float *out, const float *lse, int B, int T, int NH, int NKV, int HS, void *s) {
    op_begin(); REAL.attention_backward(b, dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, s);
    op_end(OP_ATT_B, 10 * causal(B, T, NH, HS), F4 * B * T * (5.0 * NH + 4.0 * NKV) * HS);
}
static void w_swi_f(KBackend *b, float *h, const float *g, const float *u, size_t n) {
    op_begin(); REAL.swiglu_forward(b, h, g, u, n); op_end(OP_SWI_F, 0, 3 * F4 * n);
}
static void w_swi_b(KBackend *b, float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
    op_begin(); REAL.swiglu_backward(b, dg, du, dh, g, u, n); op_end(OP_SWI_B, 0, 5 * F4 * n);
}
static void w_ce_f(KBackend *b, float *l, const float *x, const int *t, int N, int V, void *s) {
    op_begin(); REAL.crossentropy_forward(b, l, x, t, N, V, s); op_end(OP_CE_F, 0, F4 * N * V);
}
static void w_ce_b(KBackend *b, float *x, const int *t, float sc, const float *w, int B, int T, int V, void *s) {
    op_begin(); REAL.crossentropy_backward(b, x, t, sc, w, B, T, V, s); op_end(OP_CE_B, 0, 2 * F4 * B * T * V);
}
static void w_adamw(KBackend *b, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                    float eps, float wd, int t) {
    op_begin(); REAL.adamw(b, p, g, m, v, n, lr, b1, b2, eps, wd, t); op_end(OP_ADAMW, 0, 7 * F4 * n);
}
static void w_sgd(KBackend *b, float *p, const float *g, size_t n, float lr, float wd) {
    op_begin(); REAL.sgd(b, p, g, n, lr, wd); op_end(OP_SGD, 0, 3 * F4 * n);
}
static void w_gemm_ex(KBackend *b, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, long long sA,
                      const void *B, int ldb, long long sB, float beta, void *C, int ldc, long long sC, int batch,
                      KDtype ab, KDtype c, void *s) {
    op_begin(); REAL.gemm_ex(b, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch, ab, c, s);
    op_end(OP_CONVERT, 2.0 * M * N * K * batch, 0);
}
static void w_widen(KBackend *b, float *d, const void *s, size_t n) { op_begin(); REAL.widen(b, d, s, n); op_end(OP_CONVERT, 0, 6.0 * n); }
static void w_narrow(KBackend *b, void *d, const float *s, size_t n) { op_begin(); REAL.narrow(b, d, s, n); op_end(OP_CONVERT, 0, 6.0 * n); }
static void w_narrow_in(KBackend *b, void *x, size_t n) { op_begin(); REAL.narrow_inplace(b, x, n); op_end(OP_CONVERT, 0, 6.0 * n); }

static void wrap_ops(KBackend *kb) {
    REAL = *kb->ops;
    WRAPPED = REAL;
    WRAPPED.gemm = w_gemm; WRAPPED.fill = w_fill; WRAPPED.copy = w_copy; WRAPPED.add = w_add; WRAPPED.scale = w_scale;
    WRAPPED.sum = w_sum; WRAPPED.sumsq = w_sumsq; WRAPPED.count_nonfinite = w_nonfinite;
    WRAPPED.embedding_forward = w_emb_f; WRAPPED.embedding_backward = w_emb_b;
    WRAPPED.rmsnorm_forward = w_rms_f; WRAPPED.rmsnorm_backward = w_rms_b;
    WRAPPED.rope_forward = w_rope_f; WRAPPED.rope_backward = w_rope_b;
    WRAPPED.attention_forward = w_att_f; WRAPPED.attention_backward = w_att_b;
    WRAPPED.swiglu_forward = w_swi_f; WRAPPED.swiglu_backward = w_swi_b;
    WRAPPED.crossentropy_forward = w_ce_f; WRAPPED.crossentropy_backward = w_ce_b;
    WRAPPED.adamw = w_adamw; WRAPPED.sgd = w_sgd;
    WRAPPED.gemm_ex = w_gemm_ex; WRAPPED.widen = w_widen; WRAPPED.narrow = w_narrow; WRAPPED.narrow_inplace = w_narrow_in;
    kb->ops = &WRAPPED;
}

/* ---- the run ------------------------------------------------------------------------------------- */

static TrainStrategy INNER;
static int WRAP = 1;
static int p_init(void *u, TrainState *s) { (void)u; if (WRAP) wrap_ops(s->kb); return INNER.init ? INNER.init(INNER.user, s) : 0; }
static size_t FRESH0, FRESH1;                /* host memory allocated anew, at step 1 and at the end */
static size_t fresh_now(TrainState *s) {
    size_t kept, live, high, fresh;
    kcpu_cache_stats(s->kb, &kept, &live, &high, &fresh);
    return fresh;
}
static int p_batch(void *u, TrainState *s) {
    (void)u;
    if (s->step == 1 && s->micro == 0) FRESH0 = fresh_now(s);
    if (INNER.physical_batch) return INNER.physical_batch(INNER.user, s);
    return train_forward(s) || train_backward(s, NULL) ? -1 : 0;
}
static int p_before(void *u, TrainState *s) { (void)u; return INNER.before_update ? INNER.before_update(INNER.user, s) : 0; }
static void p_destroy(void *u, TrainState *s) { (void)u; FRESH1 = fresh_now(s); if (INNER.destroy) INNER.destroy(INNER.user, s); }

/* Useful flops of one step (forward; the backward does twice as many): every linear layer and
   lm_head, 2 per weight per token, and causal attention's two products, T(T+1)/2 scores per head. */
static double forward_flops(const TrainConfig *c) {
    LlamaModel m;
    if (llama_describe(&m, &c->model, c->batch_size, c->seq_len) != 0) return 0;
    double w = 0;
    for (int i = 0; i < m.n_params; i++) if (m.params[i].kind == HOOK_LINEAR) w += (double)m.params[i].numel;
    const double N = (double)m.B * m.T, att = 4.0 * m.B * m.NH * m.HS * m.T * (m.T + 1.0) / 2 * m.L;
    llama_free(&m);
    return 2 * N * w + att;
}

static void json_array(const char *key, const double *x, int n) {
    printf(", \"%s\": [", key);
    for (int i = 0; i < n; i++) printf("%s%.6f", i ? ", " : "", x[i]);
    printf("]");
}

int main(int argc, char **argv) {
    train_prefer_passive_omp(argv);
    const int nt = kcpu_max_threads();
    if (argc > 1 && !strcmp(argv[1], "--peak")) {   /* the limits alone, as JSON */
        double p1 = sgemm_peak(1, 2048, 2048, 2048, 0, 5), p2 = sgemm_peak(nt, 2048, 2048, 2048, 0, 5), bw = copy_bandwidth(nt);
        char from[160];
        printf("{\"threads\": %d, \"sgemm_peak\": %.4g, \"sgemm_peak_1thread\": %.4g, \"copy_bandwidth\": %.4g, \"blas_core\": \"%s\", "
               "\"blas_core_from\": \"%s\"}\n", nt, p2, p1, bw, blas_core_name(), blas_core_source(from, sizeof from));
        return 0;
    }
    static const char *const methods[] = { "vanilla", "direct", "ghost", "flash", "mixed" };
    int method = -1;
    for (int i = 0; argc > 1 && i < 5; i++) if (!strcmp(argv[1], methods[i])) method = i;
    if (method < 0) {
        fprintf(stderr, "usage: %s vanilla|direct|ghost|flash|mixed [--times] [trainer and DP flags]\n"
                        "       %s --peak\n", argv[0], argv[0]);
        return 2;
    }
    int times = 0, k = 1;
    for (int i = 2; i < argc; i++) { if (!strcmp(argv[i], "--times")) times = 1; else argv[++k] = argv[i]; }
    argc = k + 1;
    WRAP = !times;
    TrainConfig cfg;
    DpConfig dp;
    DpSgd d;
    config_defaults(&cfg);
    cfg.run_name = "profile_step";
    static const DpNorm norms[] = { 0, DP_NORM_DIRECT, DP_NORM_GHOST, DP_NORM_FLASH, DP_NORM_MIXED };
    dp_config_defaults(&dp, norms[method], method == 2 ? DP_CLIP_TWOPASS : DP_CLIP_BK);
    argv[1] = argv[0];
    int r = config_parse(&cfg, argc - 1, argv + 1, dp_config_extra, &dp, DP_CONFIG_USAGE);
    if (r != 0) return r > 0 ? 0 : 1;
    snprintf(cfg.device, sizeof cfg.device, "cpu");
    cfg.quiet = 2;
    dp.quiet_dp = 1;
    if (cfg.steps < 2) cfg.steps = 2;
    memset(&INNER, 0, sizeof INNER);
    INNER.name = "vanilla";
    if (method > 0 && dp_sgd_prepare(&d, &INNER, &dp, &cfg, methods[method]) != 0) return 1;
    TrainStrategy st = { .name = INNER.name, .init = p_init, .physical_batch = p_batch, .before_update = p_before,
                         .update = INNER.update, .destroy = p_destroy, .frozen = INNER.frozen, .user = INNER.user };
    /* the limits first, on a quiet process: a big square product and the model's largest GEMM class */
    const int N = cfg.batch_size * cfg.seq_len;
    double peak1 = 0, peak = 0, shape = 0, bw = 0;
    if (!times) {
        peak1 = sgemm_peak(1, 2048, 2048, 2048, 0, 5); peak = sgemm_peak(nt, 2048, 2048, 2048, 0, 5);
        shape = sgemm_peak(nt, N, cfg.model.ffn_dim, cfg.model.dim, 1, 5); bw = copy_bandwidth(nt);
        if (shape > peak) peak = shape;
    }
    main_thread = dpmem_thread_index();
    dpmem_set_scope_hook(scope_hook, NULL);
    dpmem_reset_peak();
    uint64_t t0 = dpmem_now_ns();
    if (train_run(&cfg, &st) != 0) return 1;
    dpmem_set_scope_hook(NULL, NULL);
    const double run_s = (double)(dpmem_now_ns() - t0) * 1e-9;
    const int steps = P.steps > 0 ? P.steps : 1, ns = P.steps < MAXSTEPS ? P.steps : MAXSTEPS;
    if (times) {   /* one JSON line: each measured step (from step 1) and its phases, in seconds */
        const double f = forward_flops(&cfg);
        const LlamaConfig *m = &cfg.model;
        printf("{\"method\": \"%s\", \"model\": \"%s\", \"vocab\": %d, \"dim\": %d, \"layers\": %d, \"heads\": %d, "
               "\"kv_heads\": %d, \"ffn\": %d, \"norm_eps\": %.9g, \"rope_theta\": %.9g, \"tied\": %d, \"B\": %d, \"T\": %d, "
               "\"threads\": %d, \"peak_bytes\": %zu, \"flops_forward\": %.6g, \"flops_backward\": %.6g", methods[method],
               m->preset, m->vocab_size, m->dim, m->n_layers, m->n_heads, m->n_kv_heads, m->ffn_dim, m->norm_eps,
               m->rope_theta, m->tie_embeddings, cfg.batch_size, cfg.seq_len, nt, dpmem_peak_bytes(NULL), f, 2 * f);
        json_array("step", P.per_step, ns);
        json_array("step_cpu", P.per_step_cpu, ns);
        for (int i = 0; PHASES[i]; i++) if (P.wall[i] > 0) json_array(PHASES[i], P.per_phase[i], ns);
        printf("}\n");
        return 0;
    }
    char load[64] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (!fgets(load, sizeof load, f)) snprintf(load, sizeof load, "?"); fclose(f); load[strcspn(load, "\n")] = 0; }

    printf("profile_step %s: model %s (C=%d L=%d NH=%d F=%d V=%d), B=%d T=%d, %d threads, %d steps measured (of %d; %.1f s), load %s\n",
           methods[method], cfg.model.preset, cfg.model.dim, cfg.model.n_layers, cfg.model.n_heads, cfg.model.ffn_dim,
           cfg.model.vocab_size, cfg.batch_size, cfg.seq_len, nt, steps, cfg.steps, run_s, load);
    char from[160];
    printf("limits: sgemm peak %.1f GF/s on %d threads (1 thread: %.1f; the model's %dx%dx%d: %.1f), copy bandwidth %.1f GB/s; "
           "OpenBLAS core %s (%s)\n", peak * 1e-9, nt, peak1 * 1e-9, N, cfg.model.ffn_dim, cfg.model.dim, shape * 1e-9, bw * 1e-9,
           blas_core_name(), blas_core_source(from, sizeof from));
    printf("step: %.1f ms wall, %.1f ms CPU (%.2f threads busy on average); peak tagged memory %.1f MiB; "
           "host memory allocated anew per step after step 0: %.1f MiB\n\n",
           P.step_wall * 1e3 / steps, P.step_cpu * 1e3 / steps, P.step_cpu / (P.step_wall > 0 ? P.step_wall : 1),
           (double)dpmem_peak_bytes(NULL) / (1 << 20), (double)(FRESH1 - FRESH0) / steps / (1 << 20));
    printf("| phase | ms/step | %% of step | CPU ms/step | threads busy |\n|---|---|---|---|---|\n");
    for (int i = 0; PHASES[i]; i++) {
        if (P.wall[i] <= 0) continue;
        printf("| %s%s | %.1f | %.1f | %.1f | %.2f |\n", i == 3 || i == PH_NORMS ? "  in backward: " : "", PHASES[i],
               P.wall[i] * 1e3 / steps, 100 * P.wall[i] / P.step_wall, P.cpu[i] * 1e3 / steps, P.cpu[i] / P.wall[i]);
    }
    printf("\n| op | phase | calls/step | ms/step | CPU ms/step | %% of step CPU | GF/s | %% of sgemm peak | GF/s per busy core | %% of 1-thread peak | GB/s |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    double timed = 0, timed_cpu = 0;
    for (int op = 0; op < OP_N; op++)
        for (int ph = 0; ph <= NPH; ph++) {
            Acc *a = &ACC[op][ph];
            if (!a->calls) continue;
            timed += a->wall; timed_cpu += a->cpu;
            const double gf = a->flops / a->wall, gb = a->bytes / a->wall, gfc = a->flops / (a->cpu > 0 ? a->cpu : 1e-30);
            char gfs[32] = "-", pk[32] = "-", gfcs[32] = "-", pk1[32] = "-";
            if (a->flops > 0) {
                snprintf(gfs, sizeof gfs, "%.1f", gf * 1e-9); snprintf(pk, sizeof pk, "%.0f%%", 100 * gf / peak);
                snprintf(gfcs, sizeof gfcs, "%.1f", gfc * 1e-9); snprintf(pk1, sizeof pk1, "%.0f%%", 100 * gfc / peak1);
            }
            printf("| %s | %s | %.0f | %.2f | %.2f | %.1f | %s | %s | %s | %s | %.1f |\n", OPNAMES[op], ph < NPH ? PHASES[ph] : "-",
                   (double)a->calls / steps, a->wall * 1e3 / steps, a->cpu * 1e3 / steps, 100 * a->cpu / P.step_cpu, gfs, pk,
                   gfcs, pk1, gb * 1e-9);
        }
    printf("| (not in an op: DP kernels, the loop, allocation) | | | %.2f | %.2f | %.1f | | | | | |\n",
           (P.step_wall - timed) * 1e3 / steps, (P.step_cpu - timed_cpu) * 1e3 / steps, 100 * (P.step_cpu - timed_cpu) / P.step_cpu);
    printf("\nGEMMs by shape (C[M,N] = op(A)[M,K] op(B)[K,N]; T: transposed; batched products: K summed over the batch)\n"
           "| phase | op(A) op(B) | M | N | K | calls/step | ms/step | GF/s | %% of sgemm peak | GF/s per busy core | %% of 1-thread peak |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_shapes; i++) {
        const Shape *x = &SHAPES[i];
        const double fl = 2.0 * x->M * x->N * x->K * x->calls;
        printf("| %s | %s%s | %d | %d | %d | %.0f | %.2f | %.1f | %.0f%% | %.1f | %.0f%% |\n", x->ph >= 0 ? PHASES[x->ph] : "-",
               x->ta ? "T" : "N", x->tb ? "T" : "N", x->M, x->N, x->K, (double)x->calls / steps, x->wall * 1e3 / steps,
               fl / x->wall * 1e-9, 100 * fl / x->wall / peak, fl / x->cpu * 1e-9, 100 * fl / x->cpu / peak1);
    }
    return 0;
}
