/* test_plan_cost.c — the plan's time ledger and its formulas (kernels/plan/cost.h), exactly:
   1. Each op's FLOPs and bytes at known shapes: a GEMM, a batched bf16 GEMM, causal attention
      forward and backward, an element-wise pass, the named ops (kcost_op_info), the DP norms (direct,
      ghost, flash) and book-keeping's clipped sum (one KC_DP entry each), the ring collectives' bytes
      (2(N-1)/N·S, (N-1)/N·S).
   2. Phases: a record goes to the innermost open phase scope (reduce_scatter counts as allreduce,
      recompute as backward), none outside a "step"; equal records merge into one entry with a count.
   3. The roofline: an entry's seconds are calls × (max(flops/rate, bytes/bandwidth) + the call's
      cost), a measured shape's time wins, the backward's collectives hide behind it by comm_overlap,
      ranks wait for the slowest (rank_skew); a DP kernel's parts each by its roofline, a named op (kcost_op)
      at its measured time an element or a timed size scaled.
   4. The plan backend records a real forward: the GEMM FLOPs of tiny's forward at B×T tokens are
      2·B·T·N (samples/llama/mfu.h's N, written out here), all in phase "forward".
   5. The profile cache: saved and loaded back field for field; a file that is not one, or of the first
      version, is refused; the CPU's measurement times each new shape once (named ops too; the DP kernels
      by the ledger's bench_dp), and scales a shape from one differing in one size.
   Not here: how close a prediction comes to a measured step (bench/plan_time.sh: a benchmark). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "llama/train.h"
#include "plan/cost.h"
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHECK_NEAR(a, b) CHECK(fabs((double)(a) - (double)(b)) <= 1e-9 * fabs((double)(b)) + 1e-12)

static const KCostEntry *only(const KCostLedger *l, int n) {
    CHECK_EQ_U(l->n, n);
    return l->n ? &l->e[l->n - 1] : NULL;
}

static void formulas(void) {
    KCostLedger l;
    kcost_ledger_init(&l);
    {
        DPMEM_SCOPE("step");
        DPMEM_SCOPE("forward");
        kcost_gemm(&l, 0, 1, 64, 32, 16, 1, 4, 4, 0);   /* 2·64·32·16 flops; (64·16 + 16·32)·4 + 64·32·4 bytes */
        const KCostEntry *e = only(&l, 1);
        CHECK_NEAR(e->flops, 65536.0);
        CHECK_NEAR(e->bytes, (64.0 * 16 + 16 * 32) * 4 + 64.0 * 32 * 4);
        CHECK_EQ_U(e->phase, KC_PH_FORWARD);
        kcost_gemm(&l, 0, 1, 64, 32, 16, 1, 4, 4, 0);   /* the same call: merged */
        CHECK_NEAR(only(&l, 1)->calls, 2.0);
        kcost_gemm(&l, 1, 0, 8, 8, 4, 3, 2, 4, 1);      /* batched, bf16 operands, C read too */
        e = only(&l, 2);
        CHECK_NEAR(e->flops, 2.0 * 8 * 8 * 4 * 3);
        CHECK_NEAR(e->bytes, 3 * ((8.0 * 4 + 4 * 8) * 2 + 8.0 * 8 * 4 * 2));
        kcost_attention(&l, 0, 2, 8, 4, 2, 16, 4);      /* pairs 2·4·8·9/2 = 288 */
        e = only(&l, 3);
        CHECK_NEAR(e->flops, 288.0 * (4 * 16 + 2));
        CHECK_NEAR(e->bytes, (2.0 * 8 * 4 * 16 + 2 * 2.0 * 8 * 2 * 16) * 4 + 2.0 * 8 * 4 * 16 * 4 + 2.0 * 4 * 8 * 4);
        CHECK_EQ_U(e->kind, KC_ATTN_F);
        kcost_attention(&l, 1, 2, 8, 4, 2, 16, 2);
        e = only(&l, 4);
        CHECK_NEAR(e->flops, 288.0 * (10 * 16 + 3));
        const double q = 2.0 * 8 * 4 * 16, kv = 2.0 * 8 * 2 * 16;
        CHECK_NEAR(e->bytes, (3 * q + 2 * kv) * 2 + (q + 2 * kv) * 2 + 2.0 * 4 * 8 * 4);
        kcost_elementwise(&l, 1000, 2, 1, 4, 5);
        e = only(&l, 5);
        CHECK_NEAR(e->flops, 5000.0);
        CHECK_NEAR(e->bytes, 12000.0);
        CHECK_EQ_U(e->kind, KC_MEM);
    }
    kcost_gemm(&l, 0, 0, 4, 4, 4, 1, 4, 4, 0);          /* outside a step: not recorded */
    CHECK_EQ_U(l.n, 5);
    kcost_ledger_free(&l);

    /* the DP kernels: B=2 samples of T=8 rows, IC=4, OC=6, fp32 */
    kcost_ledger_init(&l);
    {
        DPMEM_SCOPE("step");
        DPMEM_SCOPE("backward");
        DPMEM_SCOPE("clip");
        kcost_dp_linear_norms(&l, 0, 2, 8, 4, 6, 0, 4);   /* direct: the per-sample GEMMs, then Σ psg² */
        CHECK_EQ_U(l.n, 1);
        CHECK_EQ_U(l.e[0].kind, KC_DP);
        CHECK(l.e[0].key[0] == KCD_DIRECT && l.e[0].key[1] == 2 && l.e[0].key[2] == 8 && l.e[0].key[3] == 4 && l.e[0].key[4] == 6);
        CHECK_NEAR(l.e[0].flops, 2.0 * 2 * 8 * 4 * 6 + 2.0 * 2 * 4 * 6);
        CHECK_NEAR(l.e[0].bytes, 2 * ((6.0 * 8 + 8 * 4) * 4 + 6.0 * 4 * 4) + 2.0 * 4 * 6 * 4);
        CHECK_EQ_U(l.e[0].phase, KC_PH_CLIP);
        kcost_dp_linear_norms(&l, 1, 2, 8, 4, 6, 0, 4);   /* ghost: syrk of A and of G (T²·K each), the dot */
        CHECK_EQ_U(l.n, 2);
        CHECK_NEAR(l.e[1].flops, 2.0 * 8 * 8 * 4 + 2.0 * 8 * 8 * 6 + 2 * 2.0 * 8 * 8);
        CHECK_NEAR(l.e[1].bytes, (2.0 * 8 * 4 * 4 + 2.0 * 8 * 8 * 4) + (2.0 * 8 * 6 * 4 + 2.0 * 8 * 8 * 4) + 2.0 * 8 * 8 * 2 * 4);
        kcost_dp_linear_norms(&l, 2, 2, 8, 4, 6, 4, 4);   /* flash, R=4: 2 tiles, 3 pairs j ≤ i */
        CHECK_EQ_U(l.n, 3);
        CHECK_EQ_U(l.e[2].key[5], 4);
        CHECK_NEAR(l.e[2].flops, 2.0 * 3 * (2.0 * 4 * 4 * 10 + 2.0 * 4 * 4));
        CHECK_NEAR(l.e[2].bytes, 2.0 * 8 * 10 * 4 * 2);
        kcost_dp_clipped_bk(&l, 2, 8, 4, 6, 2);          /* Σ_b c_b G_bᵀA_b, bf16 A and G, dW read and written */
        CHECK_EQ_U(l.e[3].key[6], 2);
        CHECK_NEAR(l.e[3].flops, 2.0 * 2 * 8 * 4 * 6);
        CHECK_NEAR(l.e[3].bytes, 2 * ((6.0 * 8 + 8 * 4) * 2 + 6.0 * 4 * 4 * 2));
        /* without a measured time (a GPU profile): each part by its roofline, the GEMM's call and the pass's */
        KCostProfile p;
        memset(&p, 0, sizeof p);
        p.gemm_rate[0] = 1e6; p.gemm_rate[1] = 1e9; p.mem_bw = 1e3; p.call_s = 1e-3; p.gemm_call_s = 2e-3;
        const double gemm_f = 2.0 * 2 * 8 * 4 * 6, gemm_b = 2 * ((6.0 * 8 + 8 * 4) * 4 + 6.0 * 4 * 4), pass_b = 2.0 * 4 * 6 * 4;
        CHECK_NEAR(kcost_entry_seconds(&p, &l.e[0]), (gemm_f / 1e6 > gemm_b / 1e3 ? gemm_f / 1e6 : gemm_b / 1e3) + 2e-3 + pass_b / 1e3 + 1e-3);
        /* a measured call wins, and scales with the samples */
        KCostTimed t = { KC_DP, { KCD_DIRECT, 1, 8, 4, 6, 0, 4, 0 }, 0.25 };
        p.timed = &t; p.n_timed = 1;
        CHECK_NEAR(kcost_entry_seconds(&p, &l.e[0]), 0.5);
    }
    kcost_ledger_free(&l);

    /* the named ops: each one's traffic and flops an element from kcost_op_info, at fp32 or bf16 storage */
    kcost_ledger_init(&l);
    {
        DPMEM_SCOPE("step");
        DPMEM_SCOPE("forward");
        kcost_op(&l, KCO_RMS_F, 4, 16, 128, 0);             /* 16 rows of 128: 8 bytes, 4 flops an element */
        CHECK_EQ_U(l.n, 1);
        CHECK(l.e[0].kind == KC_MEM && l.e[0].key[0] == KCO_RMS_F && l.e[0].key[2] == 16 && l.e[0].key[3] == 128);
        CHECK_NEAR(l.e[0].bytes, 16.0 * 128 * 8);
        CHECK_NEAR(l.e[0].flops, 16.0 * 128 * 4);
        CHECK_NEAR(kcost_op_elements(&l.e[0]), 16.0 * 128);
        kcost_op(&l, KCO_RMS_F, 2, 16, 128, 0);             /* bf16 storage: half the bytes */
        CHECK_NEAR(l.e[1].bytes, 16.0 * 128 * 4);
        CHECK_NEAR(kcost_op_elements(&l.e[1]), 16.0 * 128);
        kcost_op(&l, KCO_WIDEN, 4, 1000, 1, 0);             /* 2 bytes read, 4 written */
        CHECK_NEAR(l.e[2].bytes, 6000.0);
        kcost_op(&l, KCO_CE_F, 4, 3, 50, 0);                /* a loop: one logit an element */
        CHECK(l.e[3].kind == KC_LOOP && l.e[3].flops == 3.0 * 150 && l.e[3].bytes == 4.0 * 150);
        kcost_op(&l, KCO_NOISY_ADAMW, 4, ((size_t)1 << 32) + 6, 1, 0);   /* rows past INT_MAX: the key says so, the bytes are exact */
        CHECK(l.e[4].key[2] == 2147483647 && kcost_op_elements(&l.e[4]) == 4294967302.0);
        CHECK_EQ_U(kcost_op_elements(&(KCostEntry){ .kind = KC_GEMM, .bytes = 8 }) == 0, 1);
        /* the CPU profile: a timed size wins (scaled by the elements from the nearest rows), else op_s an element */
        KCostProfile p;
        memset(&p, 0, sizeof p);
        p.mem_bw = 1e9; p.call_s = 1e-6; p.op_s[KCO_RMS_F] = 1e-9;
        CHECK_NEAR(kcost_entry_seconds(&p, &l.e[0]), 1e-6 + 2048e-9);
        KCostTimed t = { KC_MEM, { KCO_RMS_F, 4, 8, 128, 0, 0, 0, 0 }, 0.125 };
        p.timed = &t; p.n_timed = 1;
        CHECK_NEAR(kcost_entry_seconds(&p, &l.e[0]), 0.25);     /* 16 rows from 8 */
        t.key[3] = 64;                                           /* another row length: not this op's shape */
        CHECK_NEAR(kcost_entry_seconds(&p, &l.e[0]), 1e-6 + 2048e-9);
    }
    kcost_ledger_free(&l);
    CHECK_NEAR(kcost_comm_bytes(KC_ALLREDUCE, 800, 8), 2.0 * 7 / 8 * 800);
    CHECK_NEAR(kcost_comm_bytes(KC_REDUCE_SCATTER, 800, 8), 7.0 / 8 * 800);
    CHECK_NEAR(kcost_comm_bytes(KC_ALLGATHER, 800, 2), 400.0);
    CHECK_NEAR(kcost_comm_bytes(KC_ALLREDUCE, 800, 1), 0.0);
}

static void phases_and_roofline(void) {
    KCostLedger l;
    kcost_ledger_init(&l);
    {
        DPMEM_SCOPE("step");
        {
            DPMEM_SCOPE("backward");
            DPMEM_SCOPE("recompute");
            kcost_elementwise(&l, 100, 1, 1, 4, 0);
        }
        {
            DPMEM_SCOPE("backward");
            DPMEM_SCOPE("reduce_scatter");
            CHECK_EQ_U(kcost_phase_now(&l), KC_PH_ALLREDUCE);
        }
        { DPMEM_SCOPE("optimizer_step"); CHECK_EQ_U(kcost_phase_now(&l), KC_PH_OPTIMIZER); }
        CHECK_EQ_U(kcost_phase_now(&l), KC_PH_OTHER);
    }
    CHECK(kcost_phase_now(&l) == -1);
    CHECK_EQ_U(l.n, 1);
    CHECK_EQ_U(l.e[0].phase, KC_PH_BACKWARD);
    KCostProfile p;
    memset(&p, 0, sizeof p);
    p.gemm_rate[0] = 1e9; p.gemm_rate[1] = 2e9; p.attn_rate[0] = p.attn_rate[1] = 1e8; p.loop_rate = 1e7;
    p.mem_bw = 1e6; p.call_s = 1e-6; p.gemm_call_s = 2e-6; p.link_bw = 1e3; p.link_s = 1e-3; p.comm_overlap = 0.5;
    /* memory bound: 800 bytes at 1e6 B/s + 1 µs */
    CHECK_NEAR(kcost_entry_seconds(&p, &l.e[0]), 800e-6 + 1e-6);
    KCostEntry g = { .kind = KC_GEMM, .key = { 0, 1, 64, 64, 64, 1, 2, 0 }, .flops = 4e6, .bytes = 100, .calls = 3 };
    CHECK_NEAR(kcost_entry_seconds(&p, &g), 3 * (4e6 / 2e9 + 2e-6));   /* bf16 rate: compute bound */
    KCostTimed t = { KC_GEMM, { 0, 1, 64, 64, 64, 1, 2, 0 }, 0.5 };
    p.timed = &t; p.n_timed = 1;
    CHECK_NEAR(kcost_entry_seconds(&p, &g), 1.5);                       /* the measured shape wins */
    p.timed = NULL; p.n_timed = 0;
    kcost_comm(&l, KC_PH_BACKWARD, KC_ALLREDUCE, 1000, 2, 1);           /* 1000 bytes on the ring, 1 s + 1 ms */
    double ph[KC_PH_N];
    const double total = kcost_predict(&p, &l, ph);
    const double comm = 1e-3 + 1000 / 1e3, own = 801e-6;
    CHECK_NEAR(ph[KC_PH_BACKWARD], own + comm - own);                   /* half would hide: no more than the compute */
    CHECK_NEAR(total, ph[KC_PH_BACKWARD]);
    /* ranks wait for the slowest at their collectives: (skew - 1) of the compute, in the allreduce phase */
    p.rank_skew = 1.25;
    CHECK_NEAR(kcost_predict(&p, &l, ph), total + 0.25 * own);
    CHECK_NEAR(ph[KC_PH_ALLREDUCE], 0.25 * own);
    kcost_ledger_free(&l);
}

static void plan_forward(void) {
    TrainConfig c;
    config_defaults(&c);
    config_preset(&c, "tiny");
    const LlamaConfig *mc = &c.model;
    const int B = 2, T = 16;
    KBackend kb;
    kbackend_plan_init(&kb, &kops_cpu, 2);
    KCostLedger l;
    kcost_ledger_init(&l);
    kb.cost = &l;
    LlamaModel m;
    CHECK(llama_build(&m, &kb, mc, B, T, "adamw", 1, NULL, NULL) == 0);
    CHECK_EQ_U(l.n, 0);   /* building is outside a step */
    {
        DPMEM_SCOPE("step");
        DPMEM_SCOPE("forward");
        CHECK(llama_forward(&m) == 0);
    }
    const double C = mc->dim, HS = C / mc->n_heads, F = mc->ffn_dim;
    const double N = mc->n_layers * (2 * C * C + 2 * HS * mc->n_kv_heads * C + 3 * F * C) + (double)mc->vocab_size * C;
    double gemm = 0, attn = 0;
    int elsewhere = 0;
    for (int i = 0; i < l.n; i++) {
        if (l.e[i].kind == KC_GEMM) gemm += l.e[i].flops * l.e[i].calls;
        if (l.e[i].kind == KC_ATTN_F) attn += l.e[i].calls;
        elsewhere += l.e[i].phase != KC_PH_FORWARD;
    }
    CHECK_NEAR(gemm, 2.0 * B * T * N);
    CHECK_NEAR(attn, mc->n_layers);
    CHECK_EQ_U(elsewhere, 0);
    kb.cost = NULL;
    llama_free(&m);
    kbackend_destroy(&kb);
    kcost_ledger_free(&l);
}

static void cache(void) {
    char path[512];
    test_path(path, sizeof path, "plan_profile_test.txt");
    KCostProfile p, q;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "cpu");
    snprintf(p.measured, sizeof p.measured, "2026-11-29 07:00 UTC");
    snprintf(p.source, sizeof p.source, "a test");
    p.gemm_rate[0] = 1.5e10; p.gemm_rate[1] = 2.5e10; p.gemm_call_s = 1e-6; p.attn_rate[0] = 3e9; p.attn_rate[1] = 4e9;
    p.loop_rate = 5e8; p.mem_bw = 6e9; p.call_s = 7e-7; p.link_bw = 8e8; p.link_s = 2e-5; p.comm_overlap = 0.25; p.rank_skew = 1.0625;
    for (int i = 0; i < KCO_N; i++) p.op_s[i] = 1e-10 * (i + 1);
    KCostTimed t[2] = { { KC_GEMM, { 0, 1, 2048, 128, 128, 1, 4, 0 }, 6e-4 }, { KC_ATTN_B, { 4, 512, 4, 4, 32, 4, 0, 0 }, 0.031 } };
    p.timed = t; p.n_timed = 2;
    CHECK(kcost_profile_save(&p, path) == 0);
    CHECK(kcost_profile_load(&q, path) == 0);
    CHECK(!strcmp(q.name, "cpu") && !strcmp(q.measured, p.measured) && !strcmp(q.source, "a test"));
    CHECK(q.gemm_rate[1] == 2.5e10 && q.mem_bw == 6e9 && q.link_s == 2e-5 && q.comm_overlap == 0.25 && q.rank_skew == 1.0625);
    CHECK_EQ_U(q.n_timed, 2);
    CHECK(q.op_s[KCO_ADAMW] == 1e-10 * (KCO_ADAMW + 1) && q.op_s[KCO_N - 1] == 1e-10 * KCO_N);
    CHECK(q.n_timed == 2 && q.timed[1].kind == KC_ATTN_B && q.timed[1].key[1] == 512 && q.timed[1].seconds == 0.031);
    kcost_profile_free(&q);
    /* a file of the first version (GEMMs timed on warm operands, no named ops): measured again */
    char text[4096] = "";
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = 0;
    char *v = strstr(text, "version 2\n");
    CHECK(v != NULL);
    if (v) v[8] = '1';
    f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
    CHECK(kcost_profile_load(&q, path) == -1);
    f = fopen(path, "w");
    if (f) { fputs("name cpu\nthis is not a profile\n", f); fclose(f); }
    CHECK(kcost_profile_load(&q, path) == -1);
    remove(path);
    char err[160];
    CHECK(kcost_profile_preset(&q, "h100", err, sizeof err) == 0 && q.gemm_rate[1] > q.gemm_rate[0] && q.mem_bw > 1e12);
    CHECK(kcost_profile_preset(&q, "h200", err, sizeof err) == 0 && q.mem_bw > 3.35e12 * 0.7);
    CHECK(kcost_profile_preset(&q, "v100", err, sizeof err) == -1 && strstr(err, "v100"));
}

/* a DP layer's bench (KCostLedger.bench_dp): counts its calls */
static int bench_calls;
static double fake_bench(const KCostEntry *e, int nthreads) {
    (void)nthreads;
    bench_calls++;
    return e->kind == KC_DP ? 1e-3 * e->key[1] : -1;
}

/* The CPU's measurement: each new shape timed once (exact), a sibling scaled when asked to (scale); the
   named ops timed too, the DP kernels by the ledger's bench. */
static void measured(void) {
    KCostLedger l;
    kcost_ledger_init(&l);
    {
        DPMEM_SCOPE("step");
        DPMEM_SCOPE("forward");
        kcost_gemm(&l, 0, 1, 64, 32, 16, 1, 4, 4, 0);
        kcost_attention(&l, 0, 1, 32, 2, 2, 16, 4);
        kcost_attention(&l, 1, 1, 32, 2, 2, 16, 4);
        kcost_op(&l, KCO_ADAMW, 4, 5000, 1, 0);
        kcost_op(&l, KCO_RMS_B, 4, 64, 32, 0);
        kcost_dp_linear_norms(&l, 2, 3, 32, 16, 8, 8, 4);
    }
    KCostProfile p;
    memset(&p, 0, sizeof p);
    CHECK_EQ_U(kcost_profile_measure(&p, &l, 1, 1), 5);                    /* no bench: the DP entry untimed */
    CHECK(p.n_timed == 5 && p.timed[0].seconds > 0 && p.timed[1].seconds > 0 && p.timed[2].seconds > 0);
    CHECK(p.timed[3].kind == KC_MEM && p.timed[3].key[0] == KCO_ADAMW && p.timed[3].seconds > 0 && p.timed[4].seconds > 0);
    l.bench_dp = fake_bench;
    CHECK_EQ_U(kcost_profile_measure(&p, &l, 1, 1), 1);                    /* the DP entry, by the bench, once */
    CHECK_EQ_U(bench_calls, 1);
    CHECK_NEAR(kcost_entry_seconds(&p, &l.e[5]), 3e-3);
    CHECK_EQ_U(kcost_profile_measure(&p, &l, 1, 1), 0);                    /* cached */
    CHECK_EQ_U(bench_calls, 1);
    KCostEntry twice = l.e[0];
    twice.key[2] = 128;                                                  /* M doubled: twice the measured time */
    CHECK_NEAR(kcost_timed_seconds(&p, &twice), 2 * p.timed[0].seconds);
    twice.key[3] = 64;                                                   /* two sizes differ: nothing to scale */
    CHECK(kcost_timed_seconds(&p, &twice) < 0);
    kcost_profile_free(&p);
    kcost_ledger_free(&l);
}

int main(void) {
    measured();
    formulas();
    phases_and_roofline();
    plan_forward();
    cache();
    return check_exit("test_plan_cost");
}
