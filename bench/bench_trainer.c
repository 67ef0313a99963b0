/* bench_trainer.c — `make bench` for the trainer core.
   Table 1: step time and tokens/s of the vanilla loop (train_run, CPU backend) for tiny and small at
   T = 128 and 512, against a floor measured in the same run: the step's matrix-multiply work at the
   sgemm rate this machine gives right now on the model's own FFN shape. Work = 6·N·P_linear flops for
   the linear layers and LM head (forward, input and weight gradients) + 7·B·NH·T²·HS for causal
   attention (forward QKᵀ and PV; backward recomputes QKᵀ and does four more, each half of T×T).
   ratio = step time / floor (1.0 would be a step made of nothing but GEMMs at full speed; softmax,
   norms, RoPE, SwiGLU, the loss and the optimizer come on top).
   Table 2: the plan backend for the 3b preset at T = 16384 (one step: model creation, forward,
   backward, optimizer), against the same number of bare dpmem_tag_alloc/free pairs timed in this run.
   Not here: correctness (the tests), GPU figures (the CUDA bench). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "llama/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t t[16]; int n; } Stamps;

static int stamp_batch(void *user, TrainState *s) {
    Stamps *st = user;
    if (st->n < 16) st->t[st->n++] = dpmem_now_ns();
    return train_forward(s) || train_backward(s, NULL);
}

static int count_events(void *user, TrainState *s) { (void)user; (void)s; return 0; }
static void count_trace(void *user, const char *tag, size_t bytes, int is_alloc) { (void)tag; (void)bytes; (void)is_alloc; ++*(long *)user; }

/* Best-of-3 sgemm rate (flop/s) for y[N,F] = x[N,C] W[F,C]ᵀ on the CPU backend. */
static double sgemm_rate(int N, int C, int F) {
    KBackend kb;
    kbackend_cpu_init(&kb, 0);
    float *x = kbuf_alloc(&kb, (size_t)N * C * 4, "bench/x"), *w = kbuf_alloc(&kb, (size_t)F * C * 4, "bench/w"),
          *y = kbuf_alloc(&kb, (size_t)N * F * 4, "bench/y");
    for (size_t i = 0; i < (size_t)N * C; i++) x[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)F * C; i++) w[i] = (float)(i % 5) * 0.1f;
    double best = 1e30, total = 0;
    for (int r = 0; r < 3 || (total < 0.2 && r < 1000); r++) {   /* best of >= 3 and >= 0.2 s */
        uint64_t t0 = dpmem_now_ns();
        matmul_forward(&kb, y, x, w, N, C, F, 0.0f);
        double s = (double)(dpmem_now_ns() - t0) * 1e-9;
        total += s;
        if (s < best) best = s;
    }
    kbackend_destroy(&kb);
    return 2.0 * N * C * F / best;
}

static void bench_config(const char *preset, int B, int T, int steps) {
    TrainConfig c;
    config_defaults(&c);
    config_preset(&c, preset);
    c.batch_size = B; c.seq_len = T; c.steps = steps; c.quiet = 2; c.run_name = "bench_trainer";
    snprintf(c.device, sizeof c.device, "cpu");
    Stamps st = { .n = 0 };
    TrainStrategy s = { .name = "vanilla", .user = &st, .physical_batch = stamp_batch };
    dpmem_reset_peak();
    uint64_t t0 = dpmem_now_ns();
    int rc = train_run(&c, &s);
    uint64_t t1 = dpmem_now_ns();
    if (rc != 0 || st.n != steps) { printf("| %-6s | %d | %4d | failed (exit %d) |\n", preset, B, T, rc); return; }
    /* steady state: from the 2nd step's start to the run's end (no model creation, no first-touch) */
    double step_s = (double)(t1 - st.t[1]) * 1e-9 / (steps - 1);
    LlamaConfig *m = &c.model;
    double HS = (double)m->dim / m->n_heads;
    double p_linear = (double)m->n_layers * (2.0 * m->dim * m->dim + 2.0 * m->n_kv_heads * HS * m->dim + 3.0 * m->dim * m->ffn_dim)
                    + (double)m->vocab_size * m->dim;
    double N = (double)B * T, rate = sgemm_rate(B * T, m->dim, m->ffn_dim);
    double attn_flops = 7.0 * B * m->n_heads * (double)T * T * HS;
    double floor_s = (6.0 * N * p_linear + attn_flops) / rate;
    printf("| %-6s | %d | %4d | %9.1f | %9.0f | %7.1f | %9.1f | %5.2fx | %8.1f |\n", preset, B, T, step_s * 1e3, N / step_s,
           rate * 1e-9, floor_s * 1e3, step_s / floor_s, (double)dpmem_peak_bytes(NULL) / (1 << 20));
    (void)t0;
}

static void bench_plan(void) {
    TrainConfig c;
    config_defaults(&c);
    config_preset(&c, "3b");
    c.seq_len = 16384; c.batch_size = 1; c.steps = 1; c.quiet = 2; c.run_name = "bench_trainer_plan";
    snprintf(c.device, sizeof c.device, "plan");
    long events = 0;
    TrainStrategy s = { .name = "vanilla", .before_update = count_events, .trace = count_trace, .trace_user = &events };
    dpmem_reset_peak();
    uint64_t t0 = dpmem_now_ns();
    int rc = train_run(&c, &s);
    double plan_s = (double)(dpmem_now_ns() - t0) * 1e-9;
    size_t peak = dpmem_peak_bytes(NULL);
    /* baseline: the same number of bare tag/free pairs (events counts allocations and frees) */
    static char dummy[1];
    uint64_t t1 = dpmem_now_ns();
    for (long i = 0; i < events / 2; i++) { dpmem_tag_alloc(dummy, 4096, "bench/bare"); dpmem_tag_free(dummy); }
    double bare_s = (double)(dpmem_now_ns() - t1) * 1e-9;
    printf("| 3b T=16384 B=1, 1 step | %s | %ld | %8.2f | %8.3f | %6.1fx | %.1f GiB |\n", rc ? "FAILED" : "ok", events,
           plan_s * 1e3, bare_s * 1e3, plan_s / (bare_s > 0 ? bare_s : 1e-9), (double)peak / (1u << 30));
}

int main(int argc, char **argv) {
    train_prefer_passive_omp(argv);
    int quick = (argc > 1 && !strcmp(argv[1], "--quick")) || (getenv("DPMEM_BENCH_QUICK") && !strcmp(getenv("DPMEM_BENCH_QUICK"), "1"));
    printf("Vanilla trainer on this machine's CPU (%d OpenMP threads, OpenBLAS single-threaded per thread)\n",
           kcpu_max_threads());
    printf("| model  | B |    T | step (ms) | tokens/s | sgemm GF/s | GEMM floor (ms) | ratio | peak MiB |\n");
    printf("|--------|---|------|-----------|----------|---------|-----------|-------|----------|\n");
    bench_config("tiny", 4, 128, quick ? 3 : 8);
    bench_config("tiny", 4, 512, quick ? 3 : 5);
    bench_config("small", 2, 128, 3);
    if (!quick) bench_config("small", 2, 512, 3);
    printf("\nPlan backend (nothing computed; every allocation tagged as on the CPU target)\n");
    printf("| run | status | alloc+free events | plan (ms) | same number of bare tag/free (ms) | ratio | peak |\n");
    printf("|-----|--------|-------------------|-----------|-----------------------------------|-------|------|\n");
    bench_plan();
    return 0;
}
