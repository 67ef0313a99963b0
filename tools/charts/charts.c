/* charts.c — see charts.h: which charts a set gets, in which formats, and the timeline of its runs. */
#include "charts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"

#define TIMELINE_RUNS 8

static int draw_timeline(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, char *err, size_t errlen) {
    DpmemLog *logs = malloc((size_t)(cs->n > 0 ? cs->n : 1) * sizeof *logs);
    if (!logs) { snprintf(err, errlen, "out of memory"); return -1; }
    int shown = 0;
    for (int i = 0; i < cs->n && shown < TIMELINE_RUNS; i++)
        if (cs->run[i].log) logs[shown++] = *cs->run[i].log;   /* shallow copies: the timeline only reads */
    int rc = 0;
    if (shown) {
        /* one time axis for every panel (the longest run's span, in one unit): the runs compare by eye */
        TimelineOptions o = { .top_n = 8, .format = fmt, .dpi = spec->dpi, .font_scale = spec->font_scale, .shared_time = 1 };
        /* a size the user gave is the whole figure's, the panels sharing its height (too small for
           them: refused, with the least that fits); by default 1400 px wide and 300 px a panel */
        FigSpec s = *spec;
        rc = figspec_pixels(&s, 1400, 300 * shown + 60, TIMELINE_MIN_W, TIMELINE_MIN_H * shown, &o.width, &o.height, err, errlen);
        if (rc) {
            char why[200];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "timeline of %d runs: %s", shown, why);
        }
        if (rc == 0) rc = timeline_render(logs, shown, &o, path, err, errlen);
    }
    free(logs);
    return rc;
}

unsigned charts_mask(const char *list) {
    static const char *const names[4] = { "breakdown", "tradeoff", "timeline", "sweep" };
    unsigned m = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ","), k = 0;
        while (k < 4 && !(strlen(names[k]) == len && !strncmp(p, names[k], len))) k++;
        if (k == 4) return 0;
        m |= 1u << k;
        p += len + (p[len] == ',');
    }
    return m;
}

int charts_draw(const ChartSet *cs, const char *dir, const ChartOptions *o, char *err, size_t errlen) {
    unsigned only = o->only ? o->only : ~0u;
    for (int k = 0; k < o->n_formats; k++) {
        const char *ext = fig_format_ext(o->formats[k]);
        char path[4096];
        int drawn = 1;
        snprintf(path, sizeof path, "%s/breakdown.%s", dir, ext);
        if ((only & CHART_BREAKDOWN) && chart_breakdown(cs, path, o->formats[k], &o->spec, err, errlen)) return -1;
        if ((only & CHART_BREAKDOWN) && !o->quiet) printf("wrote %s\n", path);
        snprintf(path, sizeof path, "%s/tradeoff.%s", dir, ext);
        if ((only & CHART_TRADEOFF) && chart_tradeoff(cs, path, o->formats[k], &o->spec, &drawn, err, errlen)) return -1;
        if ((only & CHART_TRADEOFF) && !o->quiet) printf(drawn ? "wrote %s\n" : "no %s: no run has a step time (plan runs)\n", path);
        snprintf(path, sizeof path, "%s/timeline.%s", dir, ext);
        if ((only & CHART_TIMELINE) && draw_timeline(cs, path, o->formats[k], &o->spec, err, errlen)) return -1;
        if ((only & CHART_TIMELINE) && !o->quiet) printf("wrote %s\n", path);
        if (cs->sweep_key[0] && (only & CHART_SWEEP)) {
            snprintf(path, sizeof path, "%s/sweep.%s", dir, ext);
            if (chart_sweep(cs, path, o->formats[k], &o->spec, err, errlen)) return -1;
            if (!o->quiet) printf("wrote %s\n", path);
        }
    }
    return 0;
}

int charts_write(RunStats **runs, int n, int baseline, const char **cats, int n_cats, const char **scopes, int n_scopes,
                 const char *dir, char *err, size_t errlen) {
    (void)cats; (void)n_cats; (void)scopes; (void)n_scopes;   /* the charts find their own, per chart */
    ChartSet cs;
    if (chartset_from_stats(&cs, runs, n, err, errlen)) return -1;
    cs.base = baseline;
    ChartOptions o = { .formats = { FIG_PNG }, .n_formats = 1, .quiet = 1 };
    int rc = charts_draw(&cs, dir, &o, err, errlen);
    chartset_free(&cs);
    return rc;
}
