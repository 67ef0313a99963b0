/* charts.c — see charts.h: which charts a set gets, in which formats, and the timeline of its runs. */
#include "charts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"

#define TIMELINE_RUNS 8

/* The layouts a timeline of n panels tries at a size, in turn: one column at the type asked, then
   compact panels (titles on one line, lower lanes and plots) in one, two or three columns, each in a
   type down to 70% of the asked. */
typedef struct { int columns, compact; double shrink; } TlTry;
static int tl_tries(TlTry *t) {
    static const double shrink[4] = { 1, 0.9, 0.8, 0.7 };
    int n = 0;
    t[n++] = (TlTry){ 1, 0, 1 };
    for (int k = 0; k < 4; k++)
        for (int c = 1; c <= 3; c++) t[n++] = (TlTry){ c, 1, shrink[k] };
    return n;
}

static int draw_timeline(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, char *err, size_t errlen) {
    DpmemLog *logs = malloc((size_t)(cs->n > 0 ? cs->n : 1) * sizeof *logs);
    if (!logs) { snprintf(err, errlen, "out of memory"); return -1; }
    int shown = 0;
    for (int i = 0; i < cs->n && shown < TIMELINE_RUNS; i++)
        if (cs->run[i].log) logs[shown++] = *cs->run[i].log;   /* shallow copies: the timeline only reads */
    int rc = 0;
    if (shown) {
        /* one time axis for every panel (the longest run's span, in one unit): the runs compare by eye */
        double fs = spec->font_scale > 0 ? spec->font_scale : 1;
        TimelineOptions o = { .top_n = 8, .format = fmt, .dpi = spec->dpi, .shared_time = 1 };
        /* a size the user gave is the whole figure's, the panels sharing it (in columns and a smaller type
           when they must: a paper's page or column); by default 1400 px wide and 300 px a panel */
        FigSpec s = *spec;
        rc = figspec_pixels(&s, 1400, 300 * shown + 60, 1, 1, &o.width, &o.height, err, errlen);
        TlTry t[16];
        int nt = tl_tries(t), drawn = 0;
        for (int k = 0; rc == 0 && k < nt && !drawn; k++) {
            o.columns = t[k].columns; o.compact = t[k].compact; o.font_scale = fs * t[k].shrink;
            if (timeline_render(logs, shown, &o, NULL, err, errlen)) {   /* drawn only: does it fit? */
                if (strncmp(err, "image", 5)) { rc = -1; break; }        /* not a matter of size: said as it is */
                continue;
            }
            rc = timeline_render(logs, shown, &o, path, err, errlen);
            drawn = 1;
        }
        if (rc == 0 && !drawn) {   /* none fits: the least height that does at this width (12 pt steps) */
            double dpi = spec->dpi > 0 ? spec->dpi : FIG_DEFAULT_DPI;
            int w = o.width, h = o.height, least = 0;
            for (int hh = h + (int)ceil(dpi / 6); hh <= 16384 && hh <= 8 * h + 4000 && !least; hh += (int)ceil(dpi / 6))
                for (int k = 1; k < nt && !least; k++) {
                    o.height = hh; o.columns = t[k].columns; o.compact = 1; o.font_scale = fs * t[k].shrink;
                    if (timeline_render(logs, shown, &o, NULL, err, errlen) == 0) least = hh;
                }
            if (least)
                snprintf(err, errlen, "timeline of %d runs: %dx%d px is too small for its panels: at least %dx%d px at %.0f dpi (%.2fx%.2fin) (--size)",
                         shown, w, h, w, least, dpi, w / dpi, least / dpi);
            else snprintf(err, errlen, "timeline of %d runs: %dx%d px is too narrow for its panels (--size)", shown, w, h);
            rc = -1;
        }
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

/* A chart's error: the first into err, the later ones after it ("; "), so that one line says them all. */
static void keep_error(char *err, size_t errlen, const char *e, int *failed) {
    size_t k = strlen(err);
    if (!*failed) snprintf(err, errlen, "%s", e);
    else if (k + 2 < errlen) snprintf(err + k, errlen - k, "; %s", e);
    (*failed)++;
}

int charts_draw(const ChartSet *cs, const char *dir, const ChartOptions *o, char *err, size_t errlen) {
    /* every chart that can be drawn is, though another cannot (a size too small for one chart holds the
       others); the errors together at the end */
    unsigned only = o->only ? o->only : ~0u;
    int failed = 0;
    char e[1024];
    if (errlen) err[0] = 0;
    for (int k = 0; k < o->n_formats; k++) {
        const char *ext = fig_format_ext(o->formats[k]);
        char path[4096];
        int drawn = 1;
        snprintf(path, sizeof path, "%s/breakdown.%s", dir, ext);
        if (only & CHART_BREAKDOWN) {
            if (chart_breakdown(cs, path, o->formats[k], &o->spec, e, sizeof e)) keep_error(err, errlen, e, &failed);
            else if (!o->quiet) printf("wrote %s\n", path);
        }
        snprintf(path, sizeof path, "%s/tradeoff.%s", dir, ext);
        if (only & CHART_TRADEOFF) {
            if (chart_tradeoff(cs, path, o->formats[k], &o->spec, &drawn, e, sizeof e)) keep_error(err, errlen, e, &failed);
            else if (!o->quiet) printf(drawn ? "wrote %s\n" : "no %s: no run has a step time (plan runs)\n", path);
        }
        snprintf(path, sizeof path, "%s/timeline.%s", dir, ext);
        if (only & CHART_TIMELINE) {
            if (draw_timeline(cs, path, o->formats[k], &o->spec, e, sizeof e)) keep_error(err, errlen, e, &failed);
            else if (!o->quiet) printf("wrote %s\n", path);
        }
        if (cs->sweep_key[0] && (only & CHART_SWEEP)) {
            snprintf(path, sizeof path, "%s/sweep.%s", dir, ext);
            if (chart_sweep(cs, path, o->formats[k], &o->spec, e, sizeof e)) keep_error(err, errlen, e, &failed);
            else if (!o->quiet) printf("wrote %s\n", path);
        }
    }
    return failed ? -1 : 0;
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
