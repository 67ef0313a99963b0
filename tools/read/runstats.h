/* runstats.h — the numbers of one run, computed in one streaming pass over its log: peak and the
   breakdown at the peak, per-scope times (host and device) and memory (largest rise, net change), snapshots, the largest
   buffers, and the health checks (a leak across steps, untracked device memory that keeps growing).
   dpmem-report prints, exports and charts them; this file only computes.

   Times. Every time comes with its median, min, quartiles and max (timestats.h), over the timed
   steps: the first `warmup` steps are left out (META timing.warmup_steps, which the sample trainers
   write; else 1 when the run has at least 2 steps; runstats_compute_ex can set it). A scope that
   runs inside the step scope ("step") is timed per step: the sum of its instances in each step
   (0 in a step where it did not run), nested scopes included in their parents. A scope outside
   every step is timed per instance. A plan-backend run (META config.device or config.backend
   "plan") computed nothing, so it has no time at all: no_time is set and every time is left out.

   Memory is bounded by the number of distinct strings, threads, snapshots (at most RS_MAX_SNAPS, each
   with the categories it lists) and steps (at most RS_MAX_STEPS; per-step times of at most
   RS_MAX_PHASES scopes over the first RS_MAX_PHASE_STEPS steps; RS_MAX_INSTANCES instance times of
   the first RS_MAX_PHASES other scopes), never by the number of events; time is linear in the events
   (a scope's largest rise is a search in a monotone stack of totals, not an update of every open
   scope at every allocation). */
#ifndef RUNSTATS_H
#define RUNSTATS_H

#include <stdint.h>

#include "dpmem_read.h"
#include "common/timestats.h"

#define RS_MAX_SNAPS 4096
#define RS_MAX_STEPS 1000000
#define RS_TOP 10
#define RS_MAX_PHASES 64
#define RS_MAX_PHASE_STEPS 100000
#define RS_MAX_INSTANCES 1024
#define RS_MAX_GREW 8

typedef struct {
    uint64_t count, total_ns, max_ns, min_ns;
    uint64_t gpu_count, gpu_total_ns, gpu_max_ns, gpu_min_ns;
    uint64_t mem_rise;        /* max over instances of (peak live inside it - live at its begin): 0 for a scope that only frees */
    int64_t mem_net;          /* sum over instances of (live at its end - live at its begin): negative when it frees more */
    int per_step;             /* times is per timed step (the scope runs inside the step scope), else per instance */
    TimeStats times;          /* ns; n = 0: not known (a scope past the bounds above, or no_time) */
} ScopeStats;

typedef struct {              /* one distinct WARN message */
    int32_t msg;              /* string index */
    uint64_t count, first_ts, first_value;   /* first_ts relative to t0 */
} WarnStats;

typedef struct {              /* a tag whose live bytes grew from the leak check's reference step to the last step */
    int32_t tag;              /* string index */
    uint64_t from, to;        /* live bytes then and there */
    uint64_t allocs, frees;   /* between those two moments */
} TagGrowth;

typedef struct {
    const char *label;
    uint64_t ts;              /* relative to t0 */
    uint32_t n;               /* categories the snapshot lists (of the log's: others are dropped) */
    uint32_t *cat;            /* their log category indexes */
    uint64_t *live;           /* and live bytes */
    uint64_t device_used, device_total, device_tracked;
} SnapStats;

typedef struct {
    int32_t tag;              /* string index */
    uint64_t bytes;           /* its largest single allocation */
    uint64_t allocs;
    uint32_t space;
} BufferStats;

typedef struct {
    const DpmemLog *log;
    char name_buf[128];
    const char *name;         /* META run, else the file name */
    uint64_t span_ns;
    uint64_t peak, peak_ts;   /* total over all categories, and when */
    uint64_t *at_peak;        /* per log category: live bytes when the total peaked (index n_cats: tags
                                 whose STRING the log lacks, "?") */
    uint64_t *cat_peak;       /* per log category: its own high-water mark (n_cats: "?") */
    uint64_t end_live;        /* total at the last event */
    ScopeStats *scopes;       /* per string index (count 0: not a scope) */
    const char *step_scope;   /* the repeated scope the step checks use ("step"), or NULL */
    uint64_t n_steps;
    uint64_t *step_end_live;  /* live total at the end of each step (the first RS_MAX_STEPS) */
    uint32_t n_snaps;
    SnapStats snaps[RS_MAX_SNAPS];
    BufferStats top[RS_TOP];
    uint32_t n_top;
    uint64_t n_warn, n_oom, n_device_samples, unbalanced_frees;
    WarnStats *warns;         /* the distinct WARN messages in order of their first time */
    uint32_t n_warns;
    uint64_t too_large;       /* ALLOCs left out: they would carry the total past 2^64 bytes */
    uint64_t unnamed_events;  /* ALLOC/FREE events whose tag id has no STRING in the log */
    uint8_t *oom[4];          /* copies of the first OOM events (head, id, ts, payload), printed in full */
    uint32_t oom_bytes[4];
    /* health */
    int leak;                 /* the live bytes at the step ends rise on to the end (runstats.c says how judged) */
    uint64_t leak_from_step, leak_steps;   /* from the end of that step (1-based) to the end of the last one */
    uint64_t leak_growth, leak_per_step;   /* the live bytes' rise between those two, and per step */
    TagGrowth grew[RS_MAX_GREW]; /* with a leak: the tags that grew most, largest growth first */
    uint32_t n_grew;
    int untracked_growth;     /* untracked device memory keeps growing across snapshots */
    uint64_t untracked_first, untracked_last;
    int has_device;
    /* time */
    int no_time;              /* a plan-backend run: no time at all */
    int warmup;               /* steps left out of every time statistic */
    const char *warmup_from;  /* "META timing.warmup_steps", "default", "asked" */
    double *step_ns;          /* each step's duration (the first min(n_steps, RS_MAX_STEPS)), warm-up included */
    TimeStats step;           /* over the timed steps (ns); n = 0: none */
} RunStats;

/* 0, or -1: out of memory, or dpmem_log_error(log) says why the log could not be read to its end. */
int  runstats_compute(RunStats *r, const DpmemLog *log);
/* The same with the warm-up steps to leave out (-1: the log's META timing.warmup_steps, else 1). */
int  runstats_compute_ex(RunStats *r, const DpmemLog *log, int warmup);
void runstats_free(RunStats *r);
/* Bytes of a category (by name) at the run's peak; 0 when the run has no such category. */
uint64_t runstats_at_peak(const RunStats *r, const char *category);
/* A copy of the i-th OOM event kept by runstats_compute, as an event. */
void runstats_oom_event(const RunStats *r, uint32_t i, DpmemEvent *e);
/* Mean of the step scope over the timed steps in ns (0 when there is none, or no_time). */
double runstats_step_mean_ns(const RunStats *r);
/* Median of the step scope over the timed steps in ns (0 when there is none, or no_time). */
double runstats_step_median_ns(const RunStats *r);

#endif
