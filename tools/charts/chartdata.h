/* chartdata.h — the runs a set of charts shows, whatever they came from: the logs dpmem-report was
   given, or a results folder of tools/run_experiments (its results.csv and each run's log). Per run:
   its name and method (the key of its colour and marker), its sweep value, its status (ok, or OOM
   with the post-mortem of its log: live bytes by category at the failure, the request, the limit),
   its statistics (tools/read/runstats.c), what a reader must know (tools/read/runmeta.c), and its step time
   if it has one.

   A run has no time when it is a plan run (config.device = plan), or when results.csv leaves its step
   time empty or has no such column: the charts then draw no tradeoff point for it and put its
   timeline on an axis of allocation events. results.csv is read by column name, and any column may
   be missing: the log says the rest.

   Not here: drawing (tools/charts/charts.c and the chart_*.c files). */
#ifndef CHARTDATA_H
#define CHARTDATA_H

#include <stddef.h>
#include <stdint.h>

#include "read/dpmem_read.h"
#include "read/runmeta.h"
#include "read/runstats.h"

typedef enum { RUN_OK, RUN_OOM, RUN_FAILED } RunStatus;

typedef struct {
    char name[128];           /* the label: the experiment (results.csv) or the run's name */
    char method[64];          /* the palette's key */
    char value[64];           /* the sweep value ("" without a sweep) */
    RunStatus status;
    const DpmemLog *log;      /* NULL: no log (a run that failed before writing one) */
    const RunStats *rs;       /* NULL: none */
    RunMeta meta;
    double step_ms;           /* the step time shown (NAN: none) */
    double step_lo_ms, step_hi_ms;   /* its spread (NAN: none) */
    char step_what[24];       /* "median", "mean" */
    char step_spread[40];     /* what the spread is ("min..max over the rounds", "q1..q3 over the steps") */
    int repeats;              /* results.csv of --repeat N: N (the time the median of N rounds' medians,
                                 the spread their min..max), else 0 */
    char trust[64];           /* the time ratio's verdict (step_vs_baseline_trust): "ok", "below_vanilla",
                                 "spread_wide" (';' between two), "" when none was given */
    double trust_bound_pct;   /* spread_wide's bound: a spread wider than a factor 1 + this/100 (NAN: unknown) */
    /* OOM: from the first OOM event of the log */
    int have_oom;
    uint64_t oom_request, oom_live;
    uint64_t *oom_cat;        /* per log category: live bytes at the failure */
    double limit;             /* the memory limit in force (config.mem_limit, or the device's total), 0: unknown */
} ChartRun;

typedef struct {
    ChartRun *run;
    int n;
    char sweep_key[64];       /* "" without a sweep */
    int base;                 /* the baseline run (dpmem-report --baseline), or -1: vanilla at each value */
    /* owned by a set built from a results folder */
    DpmemLog *logs;
    RunStats *stats;
    int n_logs;
} ChartSet;

/* From logs already opened and reduced (dpmem-report): nothing is copied, the set points into them. */
int  chartset_from_stats(ChartSet *cs, RunStats **runs, int n, char *err, size_t errlen);
/* From a results folder: results.csv, then each run's log (the `file` column, else DIR/<run>.log,
   else DIR/<experiment>[-<key><value>].log). Several rows of one experiment and value (repeats):
   the first one that ran, with a log. 0, or -1 with a one-line reason. */
int  chartset_from_results(ChartSet *cs, const char *dir, char *err, size_t errlen);
/* From log paths (dpmem-charts a.log b.log): opened and reduced here. */
int  chartset_from_logs(ChartSet *cs, const char *const *paths, int n, char *err, size_t errlen);
void chartset_free(ChartSet *cs);

/* The baseline of run i: cs->base when set, else vanilla at the same sweep value, else the first run
   there that completed; -1 if none. */
int  chartset_baseline(const ChartSet *cs, int i);
/* Live bytes of a category at run i's peak (OOM: at its failure); 0 when it has none. */
uint64_t chartrun_at_peak(const ChartRun *r, const char *category);
/* Its own high-water mark; 0 when none. */
uint64_t chartrun_own_peak(const ChartRun *r, const char *category);
/* The categories of the set in the fixed order, those with bytes in some run (at its peak or its own
   peak): up to max names into out (pointers into the logs). */
int  chartset_categories(const ChartSet *cs, const char **out, int max, int own);

#endif
