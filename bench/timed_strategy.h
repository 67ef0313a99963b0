/* timed_strategy.h — a TrainStrategy wrapped around another (DP-SGD's, or none: vanilla) that stamps
   the wall clock and the process's CPU time at the start of every step's first physical batch and at
   the end of the run, for the CPU benchmarks of whole steps (bench_levers.c, dp_bench_train.c).
   Header-only (static functions): each benchmark is one translation unit.
   Not here: what is measured from the stamps (each benchmark's own rule). */
#ifndef BENCH_TIMED_STRATEGY_H
#define BENCH_TIMED_STRATEGY_H

#include "dpmem.h"
#include "dp/dp_sgd.h"
#include "llama/train.h"

#include <string.h>
#include <time.h>

enum { TIMED_MAX = 16 };   /* stamps kept: steps + 1 */

typedef struct {
    TrainStrategy inner;   /* the wrapped strategy (its callbacks may be NULL: the plain loop) */
    uint64_t t[TIMED_MAX];
    double cpu[TIMED_MAX];
    int n;
} Timed;

/* CPU seconds of the whole process (all threads): robust to other jobs on a shared machine. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void timed_stamp(Timed *w) {
    if (w->n < TIMED_MAX) { w->cpu[w->n] = cpu_now(); w->t[w->n++] = dpmem_now_ns(); }
}

static int timed_physical(void *user, TrainState *s) {
    Timed *w = user;
    if (s->micro == 0) timed_stamp(w);
    if (w->inner.physical_batch) return w->inner.physical_batch(w->inner.user, s);
    return train_forward(s) || train_backward(s, NULL) ? -1 : 0;
}
static int timed_init(void *user, TrainState *s) { Timed *w = user; return w->inner.init ? w->inner.init(w->inner.user, s) : 0; }
static int timed_before(void *user, TrainState *s) { Timed *w = user; return w->inner.before_update ? w->inner.before_update(w->inner.user, s) : 0; }
static void timed_destroy(void *user, TrainState *s) {
    Timed *w = user;
    timed_stamp(w);
    if (w->inner.destroy) w->inner.destroy(w->inner.user, s);
}
static int timed_frozen(void *user, const ParamInfo *p) { Timed *w = user; return w->inner.frozen(w->inner.user, p); }

/* The loop's strategy: w->inner (set by the caller) with the stamps around it. */
static TrainStrategy timed_strategy(Timed *w) {
    TrainStrategy st = { .name = w->inner.name, .user = w, .init = timed_init, .physical_batch = timed_physical,
                         .before_update = timed_before, .destroy = timed_destroy,
                         .frozen = w->inner.frozen ? timed_frozen : NULL };
    return st;
}

/* Runs cfg once, vanilla (dp == NULL) or DP-SGD with *dp (quietly), stamping into w; the run's peak of
   tagged bytes above what was live before it into *peak. 0, or -1 (the error is in the trainer's
   output). */
static int timed_run(Timed *w, TrainConfig *cfg, DpConfig *dp, size_t *peak) {
    DpSgd d;
    memset(w, 0, sizeof *w);
    if (dp) {
        dp->quiet_dp = 1;
        if (dp_sgd_prepare(&d, &w->inner, dp, cfg, "bench")) return -1;
    } else {
        w->inner.name = "vanilla";
    }
    TrainStrategy st = timed_strategy(w);
    dpmem_reset_peak();
    size_t base = dpmem_live_bytes(NULL);
    if (train_run(cfg, &st) != 0) return -1;
    *peak = dpmem_peak_bytes(NULL) - base;
    return 0;
}

#endif
