/* charts.c — see charts.h. Every chart is axes + bars/points/lines on tools/raster.c, with the
   category colours of tools/palette.c, so a category looks the same here as in the timelines. */
#include "charts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "palette.h"
#include "raster.h"
#include "timeline.h"
#include "units.h"

#define T2 2


/* A distinct colour per run (runs are not categories: a muted qualitative palette). */
static Rgb run_colour(int i) {
    static const Rgb t[] = { { 31, 119, 180 }, { 214, 39, 40 }, { 44, 160, 44 }, { 148, 103, 189 }, { 255, 127, 14 },
                             { 140, 86, 75 }, { 227, 119, 194 }, { 23, 190, 207 }, { 127, 127, 127 }, { 188, 189, 34 } };
    return t[i % 10];
}

static void centred(Image *im, int cx, int y, const char *s, int scale, Rgb c) {
    draw_text(im, cx - text_width(s, scale) / 2, y, s, scale, c);
}

/* A run's name under its bar: scale 2 when it fits the slot, else scale 1, else cut. */
static void bar_label(Image *im, int cx, int y, const char *s, int slot) {
    char b[64];
    snprintf(b, sizeof b, "%s", s);
    int scale = text_width(b, T2) <= slot - 4 ? T2 : 1;
    while (strlen(b) > 3 && text_width(b, scale) > slot - 4) { size_t l = strlen(b); b[l - 3] = '.'; b[l - 2] = '.'; b[l - 1] = 0; }
    centred(im, cx, y, b, scale, COLOUR_TEXT);
}

static int save(Image *im, const char *dir, const char *file, char *err, size_t errlen) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = image_write_png(im, path);
    if (rc) snprintf(err, errlen, "%s: cannot write the PNG", path);
    image_free(im);
    return rc;
}

static int chart_breakdown(RunStats **runs, int n, int base, const char **cats, int nc, const char *dir, char *err, size_t errlen) {
    int W = 1400, H = 640;
    Image im;
    if (image_new(&im, W, H, COLOUR_BG)) { snprintf(err, errlen, "out of memory"); return -1; }
    draw_text(&im, 20, 12, "Memory at the peak, by category", T2, COLOUR_TEXT);
    double maxv = 0;
    for (int i = 0; i < n; i++) if ((double)runs[i]->peak > maxv) maxv = (double)runs[i]->peak;
    Axes a = { .x0 = 130, .y0 = 80, .x1 = 760, .y1 = H - 70 };
    axes_scale(&a, maxv, 1);
    axes_draw_y(&im, &a);
    int slot = (a.x1 - a.x0) / n, bw = slot * 6 / 10;
    if (bw > 120) bw = 120;
    for (int i = 0; i < n; i++) {
        int cx = a.x0 + slot * i + slot / 2;
        double cum = 0;
        for (int c = 0; c < nc; c++) {
            double v = (double)runstats_at_peak(runs[i], cats[c]);
            if (v <= 0) continue;
            fill_rect(&im, cx - bw / 2, axes_y(&a, cum + v), cx + bw / 2, axes_y(&a, cum), category_colour(cats[c]));
            cum += v;
        }
        bar_label(&im, cx, a.y1 + 10, runs[i]->name, slot);
    }
    /* legend between the panels, top of the stack first */
    int lx = 780, ly = 80;
    for (int c = nc - 1; c >= 0; c--) {
        fill_rect(&im, lx, ly, lx + 14, ly + 14, category_colour(cats[c]));
        draw_text(&im, lx + 20, ly + 1, cats[c], T2, COLOUR_TEXT);
        ly += 22;
    }
    /* right panel: peak relative to the baseline */
    char b[96];
    snprintf(b, sizeof b, "Peak vs %.40s", runs[base]->name);
    draw_text(&im, 1010, 12, b, T2, COLOUR_TEXT);
    double maxr = 1;
    for (int i = 0; i < n; i++)
        if (runs[base]->peak && (double)runs[i]->peak / (double)runs[base]->peak > maxr) maxr = (double)runs[i]->peak / (double)runs[base]->peak;
    Axes r = { .x0 = 1060, .y0 = 80, .x1 = 1380, .y1 = H - 70 };
    axes_scale(&r, maxr, 0);
    axes_draw_y(&im, &r);
    int rslot = (r.x1 - r.x0) / n, rbw = rslot * 6 / 10;
    for (int i = 0; i < n; i++) {
        int cx = r.x0 + rslot * i + rslot / 2;
        double v = runs[base]->peak ? (double)runs[i]->peak / (double)runs[base]->peak : 0;
        fill_rect(&im, cx - rbw / 2, axes_y(&r, v), cx + rbw / 2, r.y1, i == base ? RGB(170, 170, 170) : run_colour(i));
        snprintf(b, sizeof b, "%.3fx", v);
        centred(&im, cx, axes_y(&r, v) - text_height(T2) - 6, b, rslot - 4 >= text_width(b, T2) ? T2 : 1, COLOUR_TEXT);
        bar_label(&im, cx, r.y1 + 10, runs[i]->name, rslot);
    }
    int y1 = axes_y(&r, 1.0);
    for (int x = r.x0; x < r.x1; x += 6) hline(&im, x, x + 2, y1, COLOUR_AXIS);   /* the 1x line */
    return save(&im, dir, "breakdown.png", err, errlen);
}

static int chart_tradeoff(RunStats **runs, int n, const char *dir, char *err, size_t errlen) {
    int W = 1000, H = 700;
    Image im;
    if (image_new(&im, W, H, COLOUR_BG)) { snprintf(err, errlen, "out of memory"); return -1; }
    draw_text(&im, 20, 12, "Peak memory vs mean step time", T2, COLOUR_TEXT);
    double maxm = 0, maxt = 0;
    for (int i = 0; i < n; i++) {
        if ((double)runs[i]->peak > maxm) maxm = (double)runs[i]->peak;
        double t = runstats_step_mean_ns(runs[i]);
        if (t > maxt) maxt = t;
    }
    Axes a = { .x0 = 130, .y0 = 70, .x1 = W - 40, .y1 = H - 80 };
    axes_scale(&a, maxm, 1);
    axes_draw_y(&im, &a);
    Unit tu = time_unit(maxt > 0 ? maxt : 1e6);
    double xm = (maxt > 0 ? maxt : 1e6) / tu.div, xs = nice_step(xm, 6), xmax = ceil(xm / xs * (1 + 1e-12)) * xs;
    if (xmax < xm * 1.08) xmax += xs;
    char b[64], c[96];
    for (double v = 0; v <= xmax * (1 + 1e-9); v += xs) {
        int x = a.x0 + px_clamp(v / xmax * (a.x1 - a.x0), 0, a.x1 - a.x0);
        if (v > 0) vline(&im, x, a.y0, a.y1 - 1, COLOUR_GRID);
        vline(&im, x, a.y1, a.y1 + 5, COLOUR_AXIS);
        fmt_tick(b, sizeof b, v, xs);
        centred(&im, x, a.y1 + 10, b, T2, COLOUR_TEXT);
    }
    snprintf(c, sizeof c, "mean step time (%s)", tu.name);
    draw_text(&im, a.x1 - text_width(c, T2), a.y1 + 34, c, T2, COLOUR_MUTED);
    vline(&im, a.x0 - 1, a.y0, a.y1, COLOUR_AXIS);
    int placed[64][4], np = 0;   /* label rectangles already drawn: a label that would touch one moves down */
    for (int i = 0; i < n; i++) {
        double t = runstats_step_mean_ns(runs[i]);
        int x = a.x0 + px_clamp(t / tu.div / xmax * (a.x1 - a.x0), 0, a.x1 - a.x0), y = axes_y(&a, (double)runs[i]->peak);
        fill_rect(&im, x - 5, y - 5, x + 6, y + 6, run_colour(i));
        snprintf(c, sizeof c, "%s%s", runs[i]->name, t <= 0 ? " (no step scope)" : "");
        int tw = text_width(c, T2), th = text_height(T2);
        int tx = x + 10 + tw < W - 4 ? x + 10 : x - 10 - tw, ty = y - 7;
        for (int k = 0; k < np; k++)
            if (tx < placed[k][2] && placed[k][0] < tx + tw && ty < placed[k][3] && placed[k][1] < ty + th + 2) {
                ty = placed[k][3] + 2;
                k = -1;   /* check again against all */
            }
        draw_text(&im, tx, ty, c, T2, run_colour(i));
        if (np < 64) { placed[np][0] = tx; placed[np][1] = ty; placed[np][2] = tx + tw; placed[np][3] = ty + th + 2; np++; }
    }
    return save(&im, dir, "tradeoff.png", err, errlen);
}

static int is_number(const char *s, double *v) {
    char *end;
    if (!s || !*s) return 0;
    *v = strtod(s, &end);
    return *end == 0 && isfinite(*v);
}

const char *charts_sweep_key(RunStats **runs, int n) {
    if (n < 2) return NULL;
    const char *found = NULL;
    const DpmemLog *L0 = runs[0]->log;
    /* every config key of every run: the one whose values differ */
    for (int i = 0; i < n; i++) {
        const DpmemLog *L = runs[i]->log;
        for (uint32_t m = 0; m < L->n_meta; m++) {
            const char *k = dpmem_log_string(L, L->meta[m].key);
            if (strncmp(k, "config.", 7) != 0) continue;
            const char *v0 = dpmem_log_meta(L0, k);
            int differs = 0;
            for (int j = 0; j < n && !differs; j++) {
                const char *vj = dpmem_log_meta(runs[j]->log, k);
                differs = !v0 || !vj || strcmp(v0, vj) != 0;
            }
            if (!differs || (found && strcmp(found, k) == 0)) continue;
            if (found) return NULL;   /* two keys differ: not a one-value sweep */
            found = k;
        }
    }
    if (!found) return NULL;
    for (int j = 0; j < n; j++) {
        double v;
        if (!is_number(dpmem_log_meta(runs[j]->log, found), &v)) return NULL;
    }
    return found;
}

static int chart_sweep(RunStats **runs, int n, const char *key, const char **scopes, int ns, const char *dir, char *err, size_t errlen) {
    /* phases with a memory delta in some run, at most 6 */
    const char *ph[6];
    int np = 0;
    for (int s = 0; s < ns && np < 6; s++) {
        int any = 0;
        for (int i = 0; i < n && !any; i++) {
            int32_t k = dpmem_log_find_string(runs[i]->log, scopes[s]);
            any = k >= 0 && runs[i]->scopes[k].count && runs[i]->scopes[k].mem_delta;
        }
        if (any) ph[np++] = scopes[s];
    }
    if (np == 0) return 0;
    int cols = np < 3 ? np : 3, rows = (np + cols - 1) / cols;
    int pw = 460, phh = 340, W = pw * cols + 20, H = phh * rows + 60;
    Image im;
    if (image_new(&im, W, H, COLOUR_BG)) { snprintf(err, errlen, "out of memory"); return -1; }
    char b[160], c[96];
    snprintf(b, sizeof b, "Memory delta of each phase vs %s", key + 7);
    draw_text(&im, 20, 12, b, T2, COLOUR_TEXT);
    double xs[64] = { 0 }, xmin = 0, xmax = 0;
    int order[64] = { 0 }, nn = n < 64 ? n : 64, log2x = 1;
    for (int i = 0; i < nn; i++) {
        is_number(dpmem_log_meta(runs[i]->log, key), &xs[i]);
        if (!(xs[i] > 0) || fabs(log2(xs[i]) - round(log2(xs[i]))) > 1e-9) log2x = 0;
        order[i] = i;
    }
    for (int i = 1; i < nn; i++)
        for (int j = i; j > 0 && xs[order[j - 1]] > xs[order[j]]; j--) { int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t; }
    xmin = xs[order[0]]; xmax = xs[order[nn - 1]];
    if (log2x) { xmin = log2(xmin); xmax = log2(xmax); }
    if (xmax <= xmin) xmax = xmin + 1;
    for (int p = 0; p < np; p++) {
        int ox = 10 + (p % cols) * pw, oy = 50 + (p / cols) * phh;
        double vals[64], maxv = 0;
        for (int i = 0; i < nn; i++) {
            int32_t k = dpmem_log_find_string(runs[i]->log, ph[p]);
            vals[i] = k >= 0 && runs[i]->scopes[k].count ? (double)runs[i]->scopes[k].mem_delta : 0;
            if (vals[i] > maxv) maxv = vals[i];
        }
        Axes a = { .x0 = ox + 120, .y0 = oy + 40, .x1 = ox + pw - 30, .y1 = oy + phh - 60 };
        axes_scale(&a, maxv, 1);
    axes_draw_y(&im, &a);
        centred(&im, (a.x0 + a.x1) / 2, oy + 10, ph[p], T2, scope_colour(ph[p]).r + scope_colour(ph[p]).g < 300 ? scope_colour(ph[p]) : COLOUR_TEXT);
        int px[64], py[64];
        for (int k = 0; k < nn; k++) {
            int i = order[k];
            double xv = log2x ? log2(xs[i]) : xs[i];
            px[k] = a.x0 + 10 + px_clamp((xv - xmin) / (xmax - xmin) * (a.x1 - a.x0 - 20), 0, a.x1 - a.x0 - 20);
            py[k] = axes_y(&a, vals[i]);
        }
        int last_end = -1000;
        for (int k = 0; k < nn; k++) {
            if (k) draw_line(&im, px[k - 1], py[k - 1], px[k], py[k], RGB(31, 119, 180));
            snprintf(c, sizeof c, "%g", xs[order[k]]);   /* each run's value; skipped where labels would touch */
            int tw = text_width(c, T2);
            vline(&im, px[k], a.y1, a.y1 + 5, COLOUR_AXIS);
            if (px[k] - tw / 2 > last_end + 6) { centred(&im, px[k], a.y1 + 10, c, T2, COLOUR_TEXT); last_end = px[k] + tw / 2; }
        }
        for (int k = 0; k < nn; k++) fill_rect(&im, px[k] - 4, py[k] - 4, px[k] + 5, py[k] + 5, RGB(31, 119, 180));
        snprintf(c, sizeof c, "%s%s", key + 7, log2x ? " (log2 scale)" : "");
        draw_text(&im, a.x1 - text_width(c, 1), a.y1 + 34, c, 1, COLOUR_MUTED);
    }
    return save(&im, dir, "sweep.png", err, errlen);
}

int charts_write(RunStats **runs, int n, int base, const char **cats, int nc, const char **scopes, int ns, const char *dir,
                 char *err, size_t errlen) {
    if (chart_breakdown(runs, n, base, cats, nc, dir, err, errlen)) return -1;
    if (chart_tradeoff(runs, n, dir, err, errlen)) return -1;
    int shown = n < 8 ? n : 8;   /* a timeline panel needs room: the first 8 runs */
    DpmemLog *logs = malloc((size_t)shown * sizeof *logs);
    if (!logs) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < shown; i++) logs[i] = *runs[i]->log;   /* shallow copies: timeline only reads */
    TimelineOptions o = { .width = 1400, .height = 420 * shown, .top_n = 8 };
    char path[1024];
    snprintf(path, sizeof path, "%s/timeline.png", dir);
    int rc = timeline_render(logs, shown, &o, path, err, errlen);
    free(logs);
    if (rc) return -1;
    const char *key = charts_sweep_key(runs, n);
    if (key && chart_sweep(runs, n, key, scopes, ns, dir, err, errlen)) return -1;
    return 0;
}
