/* plan_time.c — the plan's predicted step time (plan_time.h). */
#include "plan_time.h"

#include "mfu.h"

#include "plan/cost.h"

#include "dpmem.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static KCostLedger g_ledger;
static int g_on;

void plan_time_begin(KBackend *kb) {
    const char *off = getenv("DPMEM_PLAN_TIME");   /* 0: memory only, as before the prediction */
    if (kb->kind != KB_PLAN || (off && !strcmp(off, "0"))) return;
    kcost_ledger_init(&g_ledger);
    kb->cost = &g_ledger;
    g_on = 1;
}

void plan_time_end(KBackend *kb) {
    if (!g_on) return;
    kb->cost = NULL;
    kcost_ledger_free(&g_ledger);
    g_on = 0;
}

/* The collectives of one step, which a plan of one rank does not run (samples/llama/dist.c,
   grad_reduce.c, shard.c; docs/SCALING.md's "Traffic per step"): the trainable gradients (fp32) summed
   once (--zero 0, 1: an all-reduce) or reduce-scattered after each backward (--zero 2, 3) — inside
   the backward, overlapped, where the trainer does that (vanilla's units under DPMEM_COMM_OVERLAP; a
   DP strategy's sums exist only after clipping) — the updated slices all-gathered (--zero 1, 2: the
   GEMM weights at 2 bytes under bf16, the rest at 4), and under --zero 3 the GEMM weights and an
   untied embedding gathered for every forward, the GEMM weights for every backward (prefetched:
   overlapped). The passes are counted from the ledger: its attention calls per step over the layers. */
static void add_collectives(const TrainState *s, int world, int in_backward) {
    const TrainConfig *c = s->cfg;
    const LlamaModel *m = &s->model;
    double grads = 0, gemm = 0, all_gemm = 0, other = 0, emb = 0, fwd = 0, bwd = 0;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        if (p->kind == HOOK_LINEAR) all_gemm += (double)p->numel;   /* --zero 3 shards a frozen base too */
        if (!p->trainable) continue;
        grads += 4.0 * (double)p->numel;
        if (p->kind == HOOK_LINEAR) gemm += (double)p->numel;
        else other += (double)p->numel;
        if (p->kind == HOOK_EMBEDDING) emb += (double)p->numel;
    }
    const double e = c->model.precision ? 2 : 4, weights = e * gemm + 4 * other;
    const int steps = g_ledger.steps > 0 ? g_ledger.steps : 1, L = c->model.n_layers > 0 ? c->model.n_layers : 1;
    for (int i = 0; i < g_ledger.n; i++) {
        if (g_ledger.e[i].kind == KC_ATTN_F) fwd += g_ledger.e[i].calls;
        if (g_ledger.e[i].kind == KC_ATTN_B) bwd += g_ledger.e[i].calls;
    }
    fwd /= (double)steps * L; bwd /= (double)steps * L;
    const int ph = in_backward ? KC_PH_BACKWARD : KC_PH_ALLREDUCE;
    /* calls: a unit's (blocks, the head, the embedding) at a time, or bucket by bucket */
    const int units = L + 2;
    const double bucket = 4.0 * (double)s->dist.set.bucket_floats;
    const int by_bucket = bucket > 0 ? (int)ceil(grads / bucket) : 1, wb = bucket > 0 ? (int)ceil(weights / bucket) : 1;
    const int nb = (int)(bwd > 0 ? bwd + 0.5 : 1), nf = (int)(fwd > 0 ? fwd + 0.5 : 1);
    for (int k = 0; k < steps; k++) {
        if (c->zero <= 1) kcost_comm(&g_ledger, c->zero == 1 ? KC_PH_ALLREDUCE : ph, KC_ALLREDUCE, grads, world,
                                     in_backward && c->zero == 0 && units > by_bucket ? units : by_bucket);
        else kcost_comm(&g_ledger, ph, KC_REDUCE_SCATTER, grads * nb, world, units * nb);
        if (c->zero == 1 || c->zero == 2) kcost_comm(&g_ledger, KC_PH_ALLREDUCE, KC_ALLGATHER, weights, world, wb);
        if (c->zero >= 3) {
            kcost_comm(&g_ledger, KC_PH_FORWARD, KC_ALLGATHER, (e * all_gemm + 4 * emb) * nf, world, units * nf);
            kcost_comm(&g_ledger, KC_PH_BACKWARD, KC_ALLGATHER, e * all_gemm * nb, world, units * nb);
        }
    }
}

/* The CPU's link: plan_comm_probe beside the program under `mpirun -np 2`, once (cached with the
   profile); without mpirun or the probe, the estimate stays (a quarter of the copy bandwidth). */
static int measure_link(KCostProfile *p) {
    char exe[PATH_MAX], probe[PATH_MAX + 32], cmd[PATH_MAX + 160];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return 0;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(probe, sizeof probe, "%s/plan_comm_probe", exe);
    if (access(probe, X_OK) != 0 || strchr(probe, '\'')) return 0;
    snprintf(cmd, sizeof cmd, "mpirun --oversubscribe -np 2 %s '%s' 2>/dev/null", geteuid() == 0 ? "--allow-run-as-root" : "", probe);
    FILE *f = popen(cmd, "r");
    if (!f) return 0;
    char line[256];
    double bw = 0, lat = -1, skew = 1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "link %lf %lf %lf", &bw, &lat, &skew) == 3) break;
    const int rc = pclose(f);
    if (rc != 0 || !(bw > 0) || lat < 0) return 0;
    p->link_bw = bw; p->link_s = lat; p->rank_skew = skew >= 1 ? skew : 1;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    snprintf(p->link_source, sizeof p->link_source, "MPI all-reduce on this machine, 2 ranks, skew %.3f, measured %s", p->rank_skew, when);
    return 1;
}

/* The CPU profile's cache, one per thread count: in $DPMEM_PLAN_PROFILE_DIR, else beside the program (build/). */
static void cpu_profile_path(char *path, size_t n, int threads) {
    const char *env = getenv("DPMEM_PLAN_PROFILE_DIR");
    if (env && *env) { snprintf(path, n, "%s/plan_profile_cpu_t%d.txt", env, threads); return; }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) { snprintf(path, n, "plan_profile_cpu_t%d.txt", threads); return; }
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(path, n, "%s/plan_profile_cpu_t%d.txt", exe, threads);
}

/* The profile asked for: 0, or -1 having said why. *said: how it was found, for the output. */
static int get_profile(const TrainState *s, KCostProfile *p, char *said, size_t n) {
    const TrainConfig *c = s->cfg;
    const char *name = c->plan_profile[0] ? c->plan_profile : !strcmp(c->plan_for, "cuda") ? "h100" : "cpu";
    char err[160];
    if (strcmp(name, "cpu") != 0) {
        if (kcost_profile_preset(p, name, err, sizeof err)) { fprintf(stderr, "error: --plan-profile: %s\n", err); return -1; }
        snprintf(said, n, "%s", name);
        return 0;
    }
    char path[PATH_MAX + 64];
    cpu_profile_path(path, sizeof path, s->kb->nthreads);
    int fresh = 0;
    if (kcost_profile_load(p, path) != 0) {
        if (kcost_profile_cpu(p, s->kb->nthreads) != 0) { fprintf(stderr, "error: the CPU profile could not be measured (out of host memory)\n"); return -1; }
        fresh = 1;
    }
    const char *how = getenv("DPMEM_PLAN_MEASURE");   /* "scale": measure no shape a measured one scales to */
    const int added = kcost_profile_measure(p, &g_ledger, s->kb->nthreads, !(how && !strcmp(how, "scale")));
    /* (a plan of one rank without a launcher only: never an mpirun inside an MPI job) */
    const int linked = s->cfg->ranks > 1 && g_comm.planned && !g_comm.mpi && !p->link_source[0] && measure_link(p);
    if ((fresh || added || linked) && kcost_profile_save(p, path) != 0)
        fprintf(stderr, "note: could not write the CPU profile to %s (it is measured again next time)\n", path);
    snprintf(said, n, "cpu, %s %s%s%s", fresh ? "measured now," : "measured", p->measured, added ? " (+ new shapes now)" : "", "");
    snprintf(p->source + strlen(p->source), sizeof p->source - strlen(p->source), "; cache %s", path);
    return 0;
}

/* DPMEM_PLAN_COST=N: the N costliest entries of the ledger on stderr (where the predicted time goes) */
static void dump_top(const KCostProfile *p, int steps) {
    const char *e = getenv("DPMEM_PLAN_COST");
    const int top = e ? atoi(e) : 0;
    static const char *const kinds[KC_KINDS] = { "gemm", "attn_f", "attn_b", "loop", "mem", "comm", "dp" };
    char *shown = top > 0 ? calloc((size_t)g_ledger.n + 1, 1) : NULL;
    for (int k = 0; shown && k < top && k < g_ledger.n; k++) {
        int best = -1;
        double bs = -1;
        for (int i = 0; i < g_ledger.n; i++) {
            const double sec = kcost_entry_seconds(p, &g_ledger.e[i]);
            if (!shown[i] && sec > bs) { bs = sec; best = i; }
        }
        shown[best] = 1;
        const KCostEntry *x = &g_ledger.e[best];
        fprintf(stderr, "  %8.3f ms/step  %-14s %-6s x%-6g key %d %d %d %d %d %d %d %d  %.4g GFLOP %.4g MB a call\n", bs / steps * 1e3,
                kcost_phase_names[x->phase], kinds[x->kind], x->calls / steps, x->key[0], x->key[1], x->key[2], x->key[3], x->key[4],
                x->key[5], x->key[6], x->key[7], x->flops * 1e-9, x->bytes * 1e-6);
    }
    free(shown);
}

static void meta_double(const char *key, double v) {
    char b[64];
    snprintf(b, sizeof b, "%.6g", v);
    dpmem_meta(key, b);
}

int plan_time_report(const TrainState *s, int steps) {
    if (!g_on) return 0;
    const TrainConfig *c = s->cfg;
    g_ledger.steps = steps;
    if (steps <= 0) return 0;
    const int world = c->ranks > 1 ? c->ranks : 1;
    int clips = 0;   /* a DP strategy: its sums are reduced after clipping, not inside the backward */
    for (int i = 0; i < g_ledger.n; i++) clips |= g_ledger.e[i].phase == KC_PH_CLIP;
    if (world > 1) add_collectives(s, world, !clips && s->dist.set.overlap);
    KCostProfile p;
    char said[200];
    if (get_profile(s, &p, said, sizeof said) != 0) return -1;
    double ph[KC_PH_N], fl[KC_PH_N], by[KC_PH_N];
    const double total = kcost_predict(&p, &g_ledger, ph) / steps;
    kcost_totals(&g_ledger, fl, by);
    double flops = 0;
    for (int i = 0; i < KC_PH_N; i++) flops += fl[i] / steps;
    const double tokens = (double)c->batch_size * c->seq_len * c->grad_accum * world;
    printf("predicted step: %.3f ms, %.0f tokens/s (profile %s; %.4g GFLOP a step; kernels/plan/cost.h)\n", total * 1e3,
           tokens / total, said, flops * 1e-9);
    const double peak = p.peak[c->model.precision ? 1 : 0];   /* the MFU as samples/llama/mfu.h counts it */
    const double mfu = peak > 0 ? mfu_flops_per_token(&c->model, c->seq_len) * tokens / total / (world * peak) : 0;
    const int detail = !c->quiet;   /* --quiet: the predicted step alone, as the peak's total alone */
    if (detail && mfu > 0) printf("  MFU %.1f %% (mfu.h's FLOPs per token over %d x the %s peak of %.0f TFLOP/s)\n", 100 * mfu, world,
                        c->model.precision ? "bf16" : "tf32", peak * 1e-12);
    if (detail && world > 1)
        printf("  collectives over %s: %.3g GB/s a rank, %.3g ms a call%s\n", p.link_source[0] ? p.link_source : "an estimated link (a quarter of the copy bandwidth)",
               p.link_bw * 1e-9, p.link_s * 1e3, p.comm_overlap > 0 ? "; inside forward and backward partly hidden" : "");
    if (detail) {
        printf("  phase:");
        for (int i = 0; i < KC_PH_N; i++)
            if (ph[i] > 0) printf(" %s %.3f", kcost_phase_names[i], ph[i] / steps * 1e3);
        printf(" (ms)\n");
    }
    dpmem_meta("plan.profile", p.name);
    dpmem_meta("plan.profile_source", p.source);
    if (p.measured[0]) dpmem_meta("plan.profile_measured", p.measured);
    if (world > 1 && p.link_source[0]) dpmem_meta("plan.link", p.link_source);
    meta_double("plan.predicted_step_ms", total * 1e3);
    meta_double("plan.predicted_tokens_per_s", tokens / total);
    meta_double("plan.flops_per_step", flops);
    if (mfu > 0) meta_double("plan.predicted_mfu", mfu);
    for (int i = 0; i < KC_PH_N; i++) {
        char key[64];
        snprintf(key, sizeof key, "plan.predicted_ms.%s", kcost_phase_names[i]);
        meta_double(key, ph[i] / steps * 1e3);
    }
    dump_top(&p, steps);
    kcost_profile_free(&p);
    return 0;
}
