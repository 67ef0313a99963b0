/* dp_plan_bench.c — the DP kernels timed at a plan's shapes, for the CPU profile (kernels/plan/cost.h:
   the plan's ledger asks KCostLedger.bench_dp for each KC_DP entry it has no time for). Each linear
   layer's norms (direct, ghost, flash) and book-keeping's clipped sum are the kernels dp_device.c runs on
   the CPU (kernels/cpu/dp_*.c, with their own OpenBLAS calls and threads, which the backend's GEMM
   timings do not stand for), at the entry's B, T, IC, OC and tile, on fresh copies of their operands
   (kcost_time_call), fp32, and the fused noise + AdamW (kernels/cpu/dp_update.c); bf16 as the CPU runs it, a sample at a time on its widened rows (the widening
   itself is the plan's widen entries). */
#include "dp_sgd_impl.h"
#include "dp_kernels.h"
#include "kernels.h"
#include "plan/cost.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const int *key; int nt, set; float *a, *g, *out, *c, *norm2; size_t la, lg, lo; } DpBench;

/* the fused noise + AdamW (kcost's noisy_adamw): p, g, m, v, each a copy of n floats per set */
typedef struct { int nt, set; size_t n; float *x[4]; } UpdateBench;

static void run_update(void *v) {
    UpdateBench *u = v;
    float *x[4];
    for (int i = 0; i < 4; i++) x[i] = u->x[i] + (size_t)u->set * u->n;
    const DpNoise nz = { .sigma = 1.0, .max_grad_norm = 1.0, .logical_batch = 8, .seed = 1, .step = 1 };
    const DpAdamW opt = { .lr = 1e-6f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f, .t = 2 };
    dp_noisy_adamw(x[0], x[1], x[2], x[3], u->n, 0, &nz, &opt, 0, u->nt);
}

static void run(void *v) {
    DpBench *x = v;
    const int B = x->key[1], T = x->key[2], IC = x->key[3], OC = x->key[4], R = x->key[5];
    const float *a = x->a + (size_t)x->set * x->la, *g = x->g + (size_t)x->set * x->lg;
    float *out = x->out + (size_t)x->set * x->lo;
    DpIO io = { 0, 0 };
    switch (x->key[0]) {
        case KCD_DIRECT: dp_linear_norms_direct(x->norm2, out, a, g, B, T, IC, OC, &io); break;
        case KCD_GHOST:  dp_linear_norms_ghost(x->norm2, out, a, g, B, T, IC, OC, &io); break;
        case KCD_FLASH:  dp_linear_norms_flash(x->norm2, out, a, g, B, T, IC, OC, R, x->nt, &io); break;
        default:         dp_linear_clipped_grad_bk(out, a, g, x->c, B, T, IC, OC); break;
    }
}

/* the widening of n bf16 values (the CPU backend's, as dp_widen_sample runs it) */
typedef struct { KBackend *b; int set; size_t n; uint16_t *src; float *dst; } WidenBench;
static void run_widen(void *v) {
    WidenBench *w = v;
    w->b->ops->widen(w->b, w->dst, w->src + (size_t)w->set * w->n, w->n);
}

static double bench_widen(size_t n, int nthreads) {
    KBackend b;
    kbackend_cpu_init(&b, nthreads);
    WidenBench w = { .b = &b, .n = n };
    const int sets = kcost_cold_sets(2.0 * (double)n);
    double s = -1;
    w.src = malloc(n * sets * sizeof *w.src);
    w.dst = malloc(n * sizeof *w.dst);
    for (size_t i = 0; w.src && i < n * sets; i++) w.src[i] = 0x3f80;   /* 1.0 */
    if (w.src && w.dst) s = kcost_time_call(run_widen, &w, &w.set, sets);
    free(w.src); free(w.dst);
    kbackend_destroy(&b);
    return s;
}

static double bench_update(size_t n, int nthreads) {
    UpdateBench u = { .nt = nthreads > 0 ? nthreads : 1, .n = n };
    const int sets = kcost_cold_sets(16.0 * (double)n);
    double s = -1;
    int ok = 1;
    for (int i = 0; i < 4; i++) ok = ok && (u.x[i] = kcost_filled(n * sets)) != NULL;   /* values in [0, 1): moments in range */
    if (ok) s = kcost_time_call(run_update, &u, &u.set, sets);
    for (int i = 0; i < 4; i++) free(u.x[i]);
    return s;
}

double dp_plan_bench(const KCostEntry *e, int nthreads) {
    if (e->kind == KC_LOOP && e->key[0] == KCO_NOISY_ADAMW && e->key[3] == 1 && e->key[2] > 0)
        return bench_update((size_t)e->key[2], nthreads);
    const int way = e->key[0], B = e->key[1], T = e->key[2], IC = e->key[3], OC = e->key[4], R = e->key[5];
    if (e->kind != KC_DP || B <= 0 || T <= 0 || IC <= 0 || OC <= 0) return -1;
    if (e->key[6] == 2) {   /* bf16: the CPU widens one sample's rows at a time and runs the fp32 kernel on them (dp_device.c) */
        KCostEntry one = *e;
        one.key[1] = 1; one.key[6] = 4;
        const double t = dp_plan_bench(&one, nthreads), wa = bench_widen((size_t)T * IC, nthreads), wg = bench_widen((size_t)T * OC, nthreads);
        return t < 0 || wa < 0 || wg < 0 ? -1 : (t + wa + wg) * B;
    }
    DpBench x = { .key = e->key, .nt = nthreads > 0 ? nthreads : 1 };
    x.la = (size_t)B * T * IC;
    x.lg = (size_t)B * T * OC;
    x.lo = way == KCD_DIRECT ? dp_linear_direct_floats(B, IC, OC) : way == KCD_GHOST ? dp_linear_ghost_floats(B, T)
         : way == KCD_FLASH ? dp_linear_flash_floats(B, T, R, x.nt) : (size_t)IC * OC;
    const int sets = kcost_cold_sets(4.0 * (double)(x.la + x.lg + x.lo));
    double s = -1;
    x.a = kcost_filled(x.la * sets); x.g = kcost_filled(x.lg * sets);
    x.out = kcost_filled(x.lo * sets);   /* (touched: no page faults inside the timed calls) */
    x.c = malloc((size_t)B * sizeof *x.c); x.norm2 = calloc((size_t)B, sizeof *x.norm2);
    for (int b = 0; x.c && b < B; b++) x.c[b] = 0.5f;   /* (a factor of 0 skips its sample) */
    if (x.a && x.g && x.out && x.c && x.norm2) s = kcost_time_call(run, &x, &x.set, sets);
    free(x.a); free(x.g); free(x.out); free(x.c); free(x.norm2);
    return s;
}
