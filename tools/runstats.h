/* runstats.h — the numbers of one run, computed in one streaming pass over its log: peak and the
   breakdown at the peak, per-scope times (host and device) and memory deltas, snapshots, the largest
   buffers, and the health checks (a leak across steps, untracked device memory that keeps growing).
   dpmem-report prints, exports and charts them; this file only computes.

   Memory is bounded by the number of distinct strings, threads, snapshots (at most RS_MAX_SNAPS, each
   with the categories it lists) and steps (at most RS_MAX_STEPS), never by the number of events;
   time is linear in the events (a scope's memory delta is a search in a monotone stack of totals,
   not an update of every open scope at every allocation). */
#ifndef RUNSTATS_H
#define RUNSTATS_H

#include <stdint.h>

#include "dpmem_read.h"

#define RS_MAX_SNAPS 4096
#define RS_MAX_STEPS 1000000
#define RS_TOP 10
#define RS_WARN_KINDS 4

typedef struct {
    uint64_t count, total_ns, max_ns;
    uint64_t gpu_count, gpu_total_ns, gpu_max_ns;
    uint64_t mem_delta;       /* max over instances of (peak live inside it - live at its begin) */
} ScopeStats;

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
    struct { uint32_t id; uint64_t count; } warn_kinds[RS_WARN_KINDS];   /* the first distinct WARN messages */
    uint32_t n_warn_kinds;
    uint64_t too_large;       /* ALLOCs left out: they would carry the total past 2^64 bytes */
    uint64_t unnamed_events;  /* ALLOC/FREE events whose tag id has no STRING in the log */
    uint8_t *oom[4];          /* copies of the first OOM events (head, id, ts, payload), printed in full */
    uint32_t oom_bytes[4];
    /* health */
    int leak;                 /* live at the end of each step keeps growing */
    uint64_t leak_per_step;
    int untracked_growth;     /* untracked device memory keeps growing across snapshots */
    uint64_t untracked_first, untracked_last;
    int has_device;
} RunStats;

/* 0, or -1: out of memory, or dpmem_log_error(log) says why the log could not be read to its end. */
int  runstats_compute(RunStats *r, const DpmemLog *log);
void runstats_free(RunStats *r);
/* Bytes of a category (by name) at the run's peak; 0 when the run has no such category. */
uint64_t runstats_at_peak(const RunStats *r, const char *category);
/* A copy of the i-th OOM event kept by runstats_compute, as an event. */
void runstats_oom_event(const RunStats *r, uint32_t i, DpmemEvent *e);
/* Mean of the step scope in ns (0 when there is none). */
double runstats_step_mean_ns(const RunStats *r);

#endif
