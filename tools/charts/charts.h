/* charts.h — the charts of a set of runs (tools/charts/chartdata.h), each in PNG, SVG or PDF:
     breakdown   what was live at each run's peak by category, the peak relative to the baseline,
                 and each category's own peak (tools/charts/chart_breakdown.c);
     tradeoff    peak memory against step time, a point per run that has a time
                 (tools/charts/chart_tradeoff.c; not written when no run has one, e.g. plan runs);
     timeline    the runs' timelines one above the other, each on its own time axis (tools/charts/timeline.c;
                 the first 8);
     sweep       with a swept value (the suite's --sweep, or logs that differ in exactly one numeric
                 config.* value): the peak and each phase's memory against it, a line per method
                 (tools/charts/chart_sweep.c).
   Every chart colours and marks a run by its method's name (tools/charts/palette.c), so a method looks the
   same in every chart of every results folder. */
#ifndef CHARTS_H
#define CHARTS_H

#include <stddef.h>

#include "chartdata.h"
#include "figure.h"
#include "read/runstats.h"

typedef struct {
    FigSpec spec;             /* --size / --dpi / --font-scale for every chart */
    FigFormat formats[3];
    int n_formats;
    int quiet;                /* no "wrote ..." lines */
    unsigned only;            /* 0: every chart; else a mask of CHART_* */
} ChartOptions;

enum { CHART_BREAKDOWN = 1, CHART_TRADEOFF = 2, CHART_TIMELINE = 4, CHART_SWEEP = 8 };
/* "breakdown,sweep" -> a mask; 0 when a name is not a chart's. */
unsigned charts_mask(const char *list);

/* Writes DIR/<chart>.<ext> for each chart and format: every one it can, though another fails (a size
   too small for one chart may hold the others). 0, or -1 with the reasons in one line ("; " between). */
int charts_draw(const ChartSet *cs, const char *dir, const ChartOptions *o, char *err, size_t errlen);

/* dpmem-report --charts DIR: the PNGs of its runs (baseline: its --baseline run). */
int charts_write(RunStats **runs, int n, int baseline, const char **cats, int n_cats, const char **scopes, int n_scopes,
                 const char *dir, char *err, size_t errlen);

/* The single charts (path: the file; drawn: 0 when the chart had nothing to show and wrote nothing). */
int chart_breakdown(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, char *err, size_t errlen);
int chart_tradeoff(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, int *drawn, char *err, size_t errlen);
int chart_sweep(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, char *err, size_t errlen);

#endif
