/* threadsteps.h — the step times of each thread that ran steps. runstats.c times the step scope over
   every instance in the order they ended, whichever thread ran them: right for the usual trainer (one
   thread runs the steps), pooled when several threads each run their own steps (two workers one after
   the other: "steps 2..8" for 4 steps each, the second worker's warm-up among the timed). Here each
   OS thread (read/threadtracks.h) has its own steps, its own warm-up left out, its own statistics. */
#ifndef THREADSTEPS_H
#define THREADSTEPS_H

#include <stdint.h>

#include "common/timestats.h"
#include "dpmem_read.h"
#include "threadtracks.h"

#define TS_MAX_STEPS 1000000   /* per thread: the statistics are over the first this many */

typedef struct {
    uint32_t track;           /* in ThreadSteps.tracks */
    uint64_t n_steps;         /* instances of the step scope that ended on this thread */
    TimeStats step;           /* over its timed steps (its first `warmup` left out), ns; n = 0: none */
} ThreadStepStats;

typedef struct {
    ThreadTracks tracks;
    ThreadStepStats *th;      /* the threads that ran the step scope, in the order of their first step */
    uint32_t n;
    int warmup;
} ThreadSteps;

/* The steps of each thread: instances of the scope named step_scope (at any depth) on each track.
   warmup: the first steps of each thread left out. 0, or -1 (out of memory, or the log unreadable). */
int  threadsteps_compute(ThreadSteps *T, const DpmemLog *L, const char *step_scope, int warmup);
void threadsteps_free(ThreadSteps *T);

#endif
