/* chart_breakdown.c — breakdown: three panels side by side.
     a. what was live at each run's peak: a bar per run stacked by category (an OOM run: what was live
        when its allocation failed, and hatching up to the memory limit, labelled OOM); the legend
        lists the categories tall enough to see, the note names the others;
     b. each peak relative to the baseline's (vanilla at the same value): a row per run, a bar from
        1x to its ratio in the method's colour, its marker and the ratio;
     c. each category's own peak (its high-water mark, whenever it happened: dpsgd's per-sample
        gradients peak outside the total's peak), a row per category (named, without a swatch: the
        markers are in the methods' colours), a marker per run, log scale when the values span a
        factor of 10, every decade or every k-th labelled.
   In a sweep each bar and row is named with its value ("vanilla 64"). */
#include "charts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "chartkit.h"
#include "palette.h"
#include "read/units.h"

#define MAX_CATS 64
#define MAX_RUNS 256
#define C_MARKER_MIN 4.5        /* c's markers, pt: 6, down to this in a small figure */

typedef struct {
    const ChartSet *cs;
    Figure *f;
    int idx[MAX_RUNS], n, n_oom;   /* the runs drawn in a and b: completed or out of memory */
    double maxok;                  /* the largest peak of a completed run */
    double py0, py1;               /* the plots' rows */
    double sw, g;                  /* swatch size, small gap */
    char lab[MAX_RUNS][200];       /* each drawn run's name, with its value in a sweep */
    int numbers;                   /* peaks written over a's bars */
    int misfit;                    /* something did not fit its place: the layout is refused (a smaller type or another layout next) */
} Bd;

/* Where an OOM run's bar ends: the limit when it is known and not far above the others, else NAN. */
static double oom_top(const ChartRun *r, double max_ok) {
    if (r->limit > 0 && (max_ok <= 0 || r->limit <= 3 * max_ok)) return r->limit;
    return NAN;
}

/* ---- a: the stacked bars and the categories' legend ---------------------------------------- */

static void panel_a(Bd *b, double x0, double x1, double leg_x, const char **cats, int nc, char *note, size_t nn) {
    Figure *f = b->f;
    const ChartSet *cs = b->cs;
    double top = b->maxok;
    for (int k = 0; k < b->n; k++) {
        const ChartRun *r = &cs->run[b->idx[k]];
        if (r->status != RUN_OOM) continue;
        double t = oom_top(r, b->maxok);
        if (isfinite(t) && t > top) top = t;
        if ((double)r->oom_live > top) top = (double)r->oom_live;
    }
    Scale sa;
    char title[96];
    scale_linear(&sa, VAL_BYTES, 0, top, 5, 1);
    scale_place(&sa, b->py1, b->py0);
    /* the rotated title no longer than the plot is tall: it never runs into the panel's title */
    static const char *const whats[2] = { "memory at the peak", "memory" };
    for (int k = 0; k < 2; k++) {
        scale_title(&sa, whats[k], title, sizeof title);
        if (fig_text_w(f, CK_TICK, FONT_REGULAR, title) <= b->py1 - b->py0) break;
    }
    if (fig_text_w(f, CK_TICK, FONT_REGULAR, title) > b->py1 - b->py0) snprintf(title, sizeof title, "%s", sa.u.name);
    axis_left(f, &sa, x0, x1, title, CK_TICK);
    double slot = b->n ? (x1 - x0) / b->n : x1 - x0, bw = slot * 0.62 < fig_pt(f, 60) ? slot * 0.62 : fig_pt(f, 60);
    const char *names[MAX_RUNS];
    double cx[MAX_RUNS];
    for (int k = 0; k < b->n; k++) {
        const ChartRun *r = &cs->run[b->idx[k]];
        names[k] = b->lab[k];
        cx[k] = x0 + slot * (k + 0.5);
        double bx0 = round(cx[k] - bw / 2), bx1 = round(cx[k] + bw / 2), cum = 0;   /* whole pixels: exact colours */
        for (int c = 0; c < nc; c++) {
            double v = (double)chartrun_at_peak(r, cats[c]);
            if (v <= 0) continue;
            fig_rect(f, bx0, round(scale_px(&sa, cum + v)), bx1, round(scale_px(&sa, cum)), category_colour(cats[c]));
            cum += v;
        }
        if (r->status == RUN_OOM) {
            double t = oom_top(r, b->maxok), yb = round(scale_px(&sa, cum));
            double yt = isfinite(t) && t > cum ? round(scale_px(&sa, t)) : !(cum > 0) ? b->py0 : yb - fig_pt(f, 12);
            ck_oom_bar(f, bx0, yt, bx1, yb, r->name);
        } else {
            char v[48];
            double pv = (double)r->rs->peak / sa.u.div;
            snprintf(v, sizeof v, pv < 100 ? "%.1f" : "%.0f", pv);
            if (fig_text_w(f, CK_NOTE, FONT_REGULAR, v) < slot) {
                fig_text(f, cx[k], scale_px(&sa, cum) - fig_pt(f, 1.5), TA_CENTER | TA_BOTTOM, CK_NOTE, FONT_REGULAR, COLOUR_MUTED, v);
                b->numbers++;
            }
        }
    }
    ck_slot_labels(f, names, cx, b->n, slot, b->py1, 1);
    /* the memory limit, when the OOM runs had one (a CPU run's --mem-limit, a device's size) */
    double limit = NAN;
    for (int k = 0; k < b->n; k++) {
        const ChartRun *r = &cs->run[b->idx[k]];
        double t = r->status == RUN_OOM ? oom_top(r, b->maxok) : NAN;
        if (isfinite(t)) limit = isfinite(limit) && limit != t ? INFINITY : t;
    }
    if (isfinite(limit)) fig_line(f, x0, round(scale_px(&sa, limit)) + 0.5, x1, round(scale_px(&sa, limit)) + 0.5, COLOUR_OOM, 0.7, 1);

    /* the legend: categories at least a pixel tall in some bar, top of the stack first */
    double rh = fig_text_h(f, CK_LABEL) + fig_pt(f, 2), ly = b->py0, min_px = 1.0;
    size_t q = strlen(note);
    int small = 0;
    fig_text(f, leg_x, ly - rh, TA_LEFT | TA_TOP, CK_LABEL, FONT_BOLD, COLOUR_TEXT, "categories");
    for (int c = nc - 1; c >= 0; c--) {
        double most = 0;
        for (int k = 0; k < b->n; k++) {
            double v = (double)chartrun_at_peak(&cs->run[b->idx[k]], cats[c]);
            if (v > most) most = v;
        }
        if (most / (sa.hi - sa.lo) * (b->py1 - b->py0) < min_px) {
            char v[48];
            if (q < nn) q += (size_t)snprintf(note + q, nn - q, "%s%s (at most %s)", small++ ? ", " : "Too small to see in a: ", cats[c],
                                              fmt_bytes(v, sizeof v, most));
            continue;
        }
        fig_rect(f, round(leg_x), round(ly + rh / 2 - b->sw / 2), round(leg_x + b->sw), round(ly + rh / 2 + b->sw / 2), category_colour(cats[c]));
        fig_text(f, leg_x + b->sw + b->g, ly, TA_LEFT | TA_TOP, CK_LABEL, FONT_REGULAR, COLOUR_TEXT, cats[c]);
        ly += rh;
    }
    if (small && q < nn) q += (size_t)snprintf(note + q, nn - q, ". ");
    if (b->n_oom) {
        ly += rh * 0.5;
        double hx0 = round(leg_x), hx1 = round(leg_x + b->sw), hy0 = ly + rh / 2 - b->sw / 2, hy1 = ly + rh / 2 + b->sw / 2;
        fig_hatch(f, hx0, hy0, hx1, hy1, COLOUR_OOM, 2.5, 0.7);
        fig_rect_outline(f, hx0, hy0, hx1, hy1, COLOUR_OOM, 0.8);
        fig_text(f, leg_x + b->sw + b->g, ly, TA_LEFT | TA_TOP, CK_LABEL, FONT_REGULAR, COLOUR_TEXT, "out of memory");
        if (isfinite(limit)) {
            char v[48], l[80];
            ly += rh;
            fig_line(f, leg_x, ly + rh / 2, leg_x + b->sw, ly + rh / 2, COLOUR_OOM, 0.7, 1);
            snprintf(l, sizeof l, "memory limit %s", fmt_bytes(v, sizeof v, limit));
            fig_text(f, leg_x + b->sw + b->g, ly, TA_LEFT | TA_TOP, CK_LABEL, FONT_REGULAR, COLOUR_TEXT, l);
        }
    }
}

/* ---- b: the ratio to the baseline ----------------------------------------------------------- */

static void panel_b(Bd *b, double lab_x, double x0, double x1, const char *base_name) {
    Figure *f = b->f;
    const ChartSet *cs = b->cs;
    double ratio[MAX_RUNS], rmin = 1, rmax = 1;
    for (int k = 0; k < b->n; k++) {
        const ChartRun *r = &cs->run[b->idx[k]];
        int base = chartset_baseline(cs, b->idx[k]);
        ratio[k] = NAN;
        if (base < 0 || !cs->run[base].rs->peak) continue;
        double bp = (double)cs->run[base].rs->peak;
        if (r->status == RUN_OK) ratio[k] = (double)r->rs->peak / bp;
        else { double t = oom_top(r, b->maxok); ratio[k] = isfinite(t) ? t / bp : NAN; }
        if (isfinite(ratio[k])) { if (ratio[k] < rmin) rmin = ratio[k]; if (ratio[k] > rmax) rmax = ratio[k]; }
    }
    Scale sb;
    char title[200];
    if (rmax - rmin < 0.05) { rmin -= 0.025; rmax += 0.025; }   /* all alike: a narrow axis around 1x, not 1x..2x */
    scale_linear(&sb, VAL_RATIO, rmin, rmax, 4, 0);
    scale_place(&sb, x0, x1);
    snprintf(title, sizeof title, "peak \xC3\xB7 %.60s's peak%s", base_name, cs->sweep_key[0] ? " (same value)" : "");
    axis_bottom(f, &sb, b->py1, b->py0, title, CK_TICK);
    fig_line(f, x0, b->py0, x0, b->py1, COLOUR_AXIS, 0.8, 0);
    double x1x = scale_px(&sb, 1.0), row = b->n ? (b->py1 - b->py0) / b->n : 1, bh = row * 0.5 < fig_pt(f, 12) ? row * 0.5 : fig_pt(f, 12);
    /* many rows (a sweep): names in a smaller type that fits a row, the ratios only where they fit */
    double fs = CK_LABEL;
    while (fs > 4.5 && fig_text_h(f, fs) > row * 1.05) fs -= 0.5;
    if (fs * f->font_scale < 6) b->misfit = 1;   /* names under 6 pt as printed: another layout gives the rows more room */
    int numbers = fig_text_h(f, CK_NOTE) <= row * 1.05;
    fig_line(f, x1x, b->py0, x1x, b->py1, COLOUR_AXIS, 0.8, 1);
    for (int k = 0; k < b->n; k++) {
        const ChartRun *r = &cs->run[b->idx[k]];
        MethodStyle st = method_style(r->method);
        double cy = b->py0 + row * (k + 0.5), y0 = round(cy - bh / 2), y1 = round(cy + bh / 2);
        char name[160];
        fig_fit_text(f, name, sizeof name, b->lab[k], fs, FONT_REGULAR, x0 - lab_x - fig_pt(f, 4));
        fig_text(f, x0 - fig_pt(f, 4), cy, TA_RIGHT | TA_MIDDLE, fs, FONT_REGULAR, COLOUR_TEXT, name);
        if (r->status == RUN_OOM) {
            double xe = isfinite(ratio[k]) ? scale_px(&sb, ratio[k]) : x1;
            ck_oom_bar(f, x1x, y0, xe, y1, r->name);
            continue;
        }
        if (!isfinite(ratio[k])) continue;
        double xe = scale_px(&sb, ratio[k]);
        fig_rect(f, round(xe < x1x ? xe : x1x), y0, round(xe < x1x ? x1x : xe), y1, st.colour);
        fig_marker(f, st.marker, xe, cy, fs < 7 ? fs : 7, st.colour, COLOUR_BG, 0, r->method);
        if (!numbers) continue;
        char v[32];
        snprintf(v, sizeof v, "%.3f\xC3\x97", ratio[k]);
        /* right of the bar, or right of the 1x line for a bar that goes left: clear of the names */
        fig_text(f, (xe > x1x ? xe : x1x) + fig_pt(f, 6), cy, TA_LEFT | TA_MIDDLE, CK_NOTE, FONT_REGULAR, COLOUR_TEXT, v);
    }
}

/* ---- c: each category's own peak ------------------------------------------------------------ */

static void panel_c(Bd *b, double lab_x, double x0, double x1, const char **own, int no) {
    Figure *f = b->f;
    const ChartSet *cs = b->cs;
    double vmin = INFINITY, vmax = 0;
    int m = 0;
    for (int i = 0; i < cs->n; i++) {
        if (cs->run[i].status != RUN_OK || !cs->run[i].rs) continue;
        m++;
        for (int c = 0; c < no; c++) {
            double v = (double)chartrun_own_peak(&cs->run[i], own[c]);
            if (v > 0 && v < vmin) vmin = v;
            if (v > vmax) vmax = v;
        }
    }
    if (!no || !m) return;
    Scale sc;
    char title[96];
    /* room beyond the extreme values: no marker on the axis or the figure's edge */
    double room = pow(vmax / vmin, 0.05) > 1.6 ? pow(vmax / vmin, 0.05) : 1.6;   /* 5% of the axis, at least x1.6 */
    if (vmax / vmin >= 10) scale_log(&sc, VAL_BYTES, vmin / room, vmax * room);
    else scale_linear(&sc, VAL_BYTES, 0, vmax * 1.08, 5, 1);
    scale_place(&sc, x0, x1);
    scale_title(&sc, "own peak", title, sizeof title);
    axis_bottom(f, &sc, b->py1, b->py0, title, CK_TICK);
    fig_line(f, x0, b->py0, x0, b->py1, COLOUR_AXIS, 0.8, 0);
    double row = (b->py1 - b->py0) / no;
    for (int c = 0; c < no; c++) {
        double ry = b->py0 + row * (c + 0.5);
        if (c) fig_line(f, x0, b->py0 + row * c, x1, b->py0 + row * c, COLOUR_GRID, 0.5, 0);
        /* the category's name alone: the markers' colours are the methods' (the legend at the top), not
           the categories' (a's legend) */
        fig_text(f, lab_x, ry, TA_LEFT | TA_MIDDLE, CK_LABEL, FONT_REGULAR, COLOUR_TEXT, own[c]);
    }
    /* the markers: on the row's line at their values; markers that would cover one another (the same
       peak in several runs: params, or ghost's under ghost+bk's) packed in a small grid around their
       mean, as many high as the row holds, so that each shows (its place off by at most a marker or two) */
    double ms = row / fig_pt(f, 2.3), mp, dx, dy;   /* 6 pt, smaller in low rows (a paper's size), never under C_MARKER_MIN */
    if (ms > 6) ms = 6;
    if (ms < C_MARKER_MIN) ms = C_MARKER_MIN;
    mp = fig_pt(f, ms); dx = mp * 0.72; dy = mp * 0.72;   /* neighbours cover at most 28% of each other: each shows */
    int rows_fit = 1 + (int)((row * 0.92 - mp) / dy);
    if (rows_fit < 1) rows_fit = 1;
    int *who = malloc((size_t)m * sizeof *who);
    double *xs = malloc((size_t)m * sizeof *xs), *px = malloc((size_t)m * sizeof *px), *py = malloc((size_t)m * sizeof *py);
    for (int c = 0; who && xs && px && py && c < no; c++) {
        int k = 0;
        for (int i = 0; i < cs->n; i++) {
            const ChartRun *r = &cs->run[i];
            if (r->status != RUN_OK || !r->rs || k == m) continue;
            double v = (double)chartrun_own_peak(r, own[c]);
            if (v > 0) { who[k] = i; xs[k++] = scale_px(&sc, v); }
        }
        for (int i = 1; i < k; i++)   /* by x, stable: a cluster keeps the runs' order */
            for (int j = i; j > 0 && xs[j] < xs[j - 1]; j--) {
                double t = xs[j]; xs[j] = xs[j - 1]; xs[j - 1] = t;
                int w = who[j]; who[j] = who[j - 1]; who[j - 1] = w;
            }
        double ry = b->py0 + row * (c + 0.5);
        int placed = 0;
        for (int i = 0; i < k;) {
            int e = i + 1;
            double sum = xs[i];
            while (e < k && xs[e] - xs[e - 1] < mp * 0.9) sum += xs[e++];
            int kk = e - i, hi = kk < rows_fit ? kk : rows_fit, cols = (kk + hi - 1) / hi;
            double xc = sum / kk;
            for (int j = 0; j < kk; j++) {
                const ChartRun *r = &cs->run[who[i + j]];
                MethodStyle st = method_style(r->method);
                int col = j / hi, in_col = col + 1 < cols ? hi : kk - col * hi;
                double x = kk > 1 ? xc + (col - (cols - 1) / 2.0) * dx : xs[i], y = ry + (j % hi - (in_col - 1) / 2.0) * dy;
                /* a neighbouring cluster's grid may reach this one: moved right until clear of every marker placed */
                for (int tries = 0, clear = 0; !clear && tries < 4 * m; tries++) {
                    clear = 1;
                    for (int q = 0; q < placed && clear; q++)
                        clear = !(fabs(px[q] - x) < dx * 0.999 && fabs(py[q] - y) < dy * 0.999);
                    if (!clear) x += dx * 0.5;
                }
                px[placed] = x; py[placed++] = y;
                fig_marker(f, st.marker, x, y, ms, st.colour, COLOUR_BG, 0, r->method);
            }
            i = e;
        }
    }
    free(who); free(xs); free(px); free(py);
}

/* ---- the whole chart ------------------------------------------------------------------------ */

/* The layouts, widest first: a, its legend, b and c side by side; c under a and b; a over b over c
   (a paper's column). */
enum { BD_SIDE, BD_TWO_ROWS, BD_STACKED, BD_LAYOUTS };

/* Draws the chart on f in one layout: 0, or 1 when something does not fit its place (a plot under
   40 pt, b's names or a's run names under 6 pt, c's rows too low for their markers). */
static int bd_draw(const ChartSet *cs, Figure *f, int mode) {
    Bd b = { .cs = cs, .f = f };
    char failed[400] = "", note[1200] = "";
    int n_failed = 0;
    for (int i = 0; i < cs->n; i++) {
        const ChartRun *r = &cs->run[i];
        if (((r->status == RUN_OK && r->rs) || r->status == RUN_OOM) && b.n < MAX_RUNS) {
            snprintf(b.lab[b.n], sizeof b.lab[b.n], "%s%s%s", r->name, *r->value ? " " : "", r->value);
            b.idx[b.n++] = i;
            b.n_oom += r->status == RUN_OOM;
            if (r->status == RUN_OK && (double)r->rs->peak > b.maxok) b.maxok = (double)r->rs->peak;
        } else {
            size_t k = strlen(failed);
            snprintf(failed + k, sizeof failed - k, "%s%s", n_failed++ ? ", " : "", r->name);
        }
    }
    const char *cats[MAX_CATS], *own[MAX_CATS];
    int nc = chartset_categories(cs, cats, MAX_CATS, 0), no = 0, m = 0;
    {   /* c's rows: the categories of the runs that completed */
        ChartSet ok = *cs;
        ChartRun *keep = malloc((size_t)(cs->n > 0 ? cs->n : 1) * sizeof *keep);
        ok.n = 0;
        for (int i = 0; keep && i < cs->n; i++) if (cs->run[i].status == RUN_OK) keep[ok.n++] = cs->run[i];
        ok.run = keep;
        no = keep ? chartset_categories(&ok, own, MAX_CATS, 1) : 0;
        for (int i = 0; i < cs->n; i++) m += cs->run[i].status == RUN_OK && cs->run[i].rs;
        free(keep);
    }
    int base = b.n ? chartset_baseline(cs, b.idx[0]) : -1;
    const char *base_name = base >= 0 ? cs->run[base].name : "the baseline";

    double y = ck_title(f, cs, "Memory at each run's peak, by category", NULL);
    double pad = fig_pt(f, 8), W = f->w;
    y = ck_method_legend(f, cs, pad, y, W - 2 * pad);
    /* columns: [axis][a][legend] [names][b] [names][c] */
    b.sw = fig_pt(f, 8);
    b.g = fig_pt(f, 4);
    double catw = 0, runw = 0, roww = 0;
    for (int c = 0; c < nc; c++) { double w = fig_text_w(f, CK_LABEL, FONT_REGULAR, cats[c]); if (w > catw) catw = w; }
    if (b.n_oom) {   /* the legend's OOM entries are as wide as "memory limit 999.99 MiB" */
        double w = fig_text_w(f, CK_LABEL, FONT_REGULAR, "memory limit 999.99 MiB");
        if (w > catw) catw = w;
    }
    for (int k = 0; k < b.n; k++) { double w = fig_text_w(f, CK_LABEL, FONT_REGULAR, b.lab[k]); if (w > runw) runw = w; }
    for (int c = 0; c < no; c++) { double w = fig_text_w(f, CK_LABEL, FONT_REGULAR, own[c]); if (w > roww) roww = w; }
    double cap = fig_pt(f, 90);
    if (runw > cap) runw = cap;
    catw += b.sw + b.g;
    runw += fig_pt(f, 6);
    roww += 2 * b.g;
    double axw = fig_text_h(f, CK_AXIS) + fig_text_w(f, CK_TICK, FONT_REGULAR, "1000.0") + fig_pt(f, 14), gap = fig_pt(f, 18);
    double rest = W - 2 * pad - axw - catw - runw - roww - 4 * gap, rest1 = W - 2 * pad - axw - catw - runw - 2 * gap,
           rest2 = W - 2 * pad - axw - catw - gap;
    if ((mode == BD_SIDE && rest < fig_pt(f, 260)) || (mode == BD_TWO_ROWS && rest1 < fig_pt(f, 150)) || rest2 < fig_pt(f, 60) ||
        W - 2 * pad - runw < fig_pt(f, 90) || W - 2 * pad - roww < fig_pt(f, 110))
        return 1;
    /* c's axis ends half a tick label short of the edge: its last label stays whole */
    double a_x0 = pad + axw, a_x1, leg_x, b_lab, b_x0, b_x1, c_lab, c_x0, c_x1 = W - pad - fig_text_w(f, CK_TICK, FONT_REGULAR, "100 GiB") / 2;
    if (mode == BD_SIDE) {
        a_x1 = a_x0 + rest * 0.42; leg_x = a_x1 + gap; b_lab = leg_x + catw + gap; b_x0 = b_lab + runw; b_x1 = b_x0 + rest * 0.24;
        c_lab = b_x1 + gap * 2;
    } else if (mode == BD_TWO_ROWS) {
        a_x1 = a_x0 + rest1 * 0.6; leg_x = a_x1 + gap; b_lab = leg_x + catw + gap; b_x0 = b_lab + runw;
        b_x1 = W - pad - fig_text_w(f, CK_NOTE, FONT_REGULAR, "1.000\xC3\x97");   /* room for the ratio right of the longest bar */
        c_lab = pad;
    } else {
        a_x1 = a_x0 + rest2; leg_x = a_x1 + gap; b_lab = pad; b_x0 = b_lab + runw; b_x1 = W - pad - fig_text_w(f, CK_NOTE, FONT_REGULAR, "1.000\xC3\x97");
        c_lab = pad;
    }
    c_x0 = c_lab + roww;
    /* rows: panel titles, plots, the names under a or the axes of b and c, the note */
    double th = fig_text_h(f, CK_PANEL), note_h = fig_text_h(f, CK_NOTE) + fig_pt(f, 2), sub_h = fig_text_h(f, CK_NOTE);
    const char *names[MAX_RUNS];
    double cx[MAX_RUNS], slot = b.n ? (a_x1 - a_x0) / b.n : 1;
    for (int k = 0; k < b.n; k++) { names[k] = b.lab[k]; cx[k] = a_x0 + slot * (k + 0.5); }
    double lab_h = ck_slot_labels(f, names, cx, b.n, slot, 0, 0), axis_h = 2 * fig_text_h(f, CK_TICK) + fig_pt(f, 14);
    if (ck_slot_fs(f, names, b.n, slot) * f->font_scale < 6) return 1;   /* a's run names under 6 pt as printed */
    /* the note's lines: measured by drawing it at the end; here two lines' room */
    double bottom = f->h - pad - 2 * note_h, below = lab_h > axis_h ? lab_h : axis_h;
    /* b's rows at least the names' height (8 pt type), c's rows two markers high (a cluster packs in two rows) */
    double b_need = b.n * fig_text_h(f, CK_LABEL) * 1.1, c_need = no * fig_pt(f, C_MARKER_MIN) * 2.3;
    double r1_top = y + fig_pt(f, 4), r1_py0 = r1_top + th + sub_h + fig_pt(f, 8), r1_py1 = bottom - below;
    /* b beside a has only its axis below it, not a's run names: its rows reach further down */
    double c_top = r1_top, c_py0 = r1_py0, c_py1 = r1_py1, b_top = r1_top, b_py0 = r1_py0, b_py1 = bottom - axis_h;
    if (mode == BD_TWO_ROWS) {
        double need_c = c_need + th + sub_h + fig_pt(f, 10) + axis_h, split = bottom - need_c;
        if (split < y + (bottom - y) * 0.35) split = y + (bottom - y) * 0.35;
        r1_py1 = split - below;
        b_py1 = split - axis_h;
        c_top = split + fig_pt(f, 4);
        c_py0 = c_top + th + sub_h + fig_pt(f, 6);
        c_py1 = bottom - axis_h;
    } else if (mode == BD_STACKED) {
        /* c and b their need, a the rest */
        double need_c = c_need + th + sub_h + fig_pt(f, 10) + axis_h, need_b = b_need + th + fig_pt(f, 10) + axis_h;
        c_top = bottom - need_c;
        c_py0 = c_top + th + sub_h + fig_pt(f, 6);
        c_py1 = bottom - axis_h;
        b_top = c_top - need_b;
        b_py0 = b_top + th + fig_pt(f, 6);
        b_py1 = c_top - axis_h - fig_pt(f, 4);
        r1_py1 = b_top - fig_pt(f, 4) - lab_h;
    }
    if (r1_py1 - r1_py0 < fig_pt(f, 40) || c_py1 - c_py0 < fig_pt(f, 24) || c_py1 - c_py0 < c_need * 0.999 || b_py1 - b_py0 < b_need * 0.999)
        return 1;
    char t[200], fitted[200];
    snprintf(t, sizeof t, "a. Live at the run's peak%s%s%s", cs->sweep_key[0] ? " (bars: method, " : "", cs->sweep_key, cs->sweep_key[0] ? ")" : "");
    fig_fit_text(f, fitted, sizeof fitted, t, CK_PANEL, FONT_BOLD, leg_x + catw - pad);
    fig_text(f, pad, r1_top, TA_LEFT | TA_TOP, CK_PANEL, FONT_BOLD, COLOUR_TEXT, fitted);
    snprintf(t, sizeof t, "b. Peak relative to %s", base_name);
    fig_fit_text(f, fitted, sizeof fitted, t, CK_PANEL, FONT_BOLD, b_x1 - b_lab);
    fig_text(f, b_lab, b_top, TA_LEFT | TA_TOP, CK_PANEL, FONT_BOLD, COLOUR_TEXT, fitted);
    fig_fit_text(f, fitted, sizeof fitted, "c. Each category's own peak", CK_PANEL, FONT_BOLD, c_x1 - c_lab);
    Box cb = fig_text(f, c_lab, c_top, TA_LEFT | TA_TOP, CK_PANEL, FONT_BOLD, COLOUR_TEXT, fitted);
    fig_fit_text(f, fitted, sizeof fitted, "its high-water mark, whenever it happened", CK_NOTE, FONT_REGULAR, c_x1 - c_lab);
    fig_text(f, c_lab, cb.y1, TA_LEFT | TA_TOP, CK_NOTE, FONT_REGULAR, COLOUR_MUTED, fitted);

    b.py0 = r1_py0;
    b.py1 = r1_py1;
    panel_a(&b, a_x0, a_x1, leg_x, cats, nc, note, sizeof note);
    b.py0 = b_py0;
    b.py1 = b_py1;
    if (base >= 0) panel_b(&b, b_lab, b_x0, b_x1, base_name);
    b.py0 = c_py0;
    b.py1 = c_py1;
    (void)m;
    panel_c(&b, c_lab, c_x0, c_x1, own, no);

    size_t q = strlen(note);
    if (b.n_oom && q < sizeof note)
        q += (size_t)snprintf(note + q, sizeof note - q, "OOM: what was live when the allocation failed, hatched up to the memory limit; not in c. ");
    if (n_failed && q < sizeof note) q += (size_t)snprintf(note + q, sizeof note - q, "Failed, not shown: %s. ", failed);
    if (b.numbers && q < sizeof note)
        snprintf(note + q, sizeof note - q, "Numbers over the bars: the peak%s.", b.numbers < b.n - b.n_oom ? " (where there is room)" : "");
    if (ck_note_lines(f, note) > 2) return 1;
    ck_note_wrapped(f, f->h - pad, note, 2);
    return b.misfit;
}

int chart_breakdown(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, char *err, size_t errlen) {
    int w, h;
    if (figspec_pixels(spec, 1800, 700, 1, 1, &w, &h, err, errlen)) return -1;
    double dpi = spec->dpi > 0 ? spec->dpi : FIG_DEFAULT_DPI, fs = spec->font_scale > 0 ? spec->font_scale : 1;
    /* the layouts in turn, then each in a type down to 70% of the asked: the first that fits is drawn */
    static const double shrink[4] = { 1, 0.9, 0.8, 0.7 };
    for (int k = 0; k < 4; k++)
        for (int mode = 0; mode < BD_LAYOUTS; mode++) {
            Figure scratch;
            if (fig_open(&scratch, NULL, FIG_PNG, w, h, dpi, fs * shrink[k], err, errlen)) return -1;
            int r = bd_draw(cs, &scratch, mode);
            fig_discard(&scratch);
            if (r) continue;
            Figure fig;
            if (fig_open(&fig, path, fmt, w, h, dpi, fs * shrink[k], err, errlen)) return -1;
            bd_draw(cs, &fig, mode);
            return fig_close(&fig, err, errlen);
        }
    /* none fits: the least height that does at this width (6 pt steps), else the least width at this
       height. Where no --size was given that size is the figure (the default grows with the runs: a
       40-run sweep is taller than 8 runs); an asked size is refused, naming it. */
    int step = (int)ceil(dpi / 12), asked = spec->w > 0 || spec->h > 0;
    for (int wide = 0; wide < 2; wide++)
        for (int k = 1; k <= 400; k++) {
            int ww = wide ? w + k * step : w, hh = wide ? h : h + k * step, fits = 0, fq = 0, fmode = 0;
            if (ww > 16384 || hh > 16384) break;
            for (int q = 0; q < 4 && !fits; q++)
                for (int mode = 0; mode < BD_LAYOUTS && !fits; mode++) {
                    Figure scratch;
                    if (fig_open(&scratch, NULL, FIG_PNG, ww, hh, dpi, fs * shrink[q], err, errlen)) return -1;
                    fits = bd_draw(cs, &scratch, mode) == 0;
                    fig_discard(&scratch);
                    if (fits) { fq = q; fmode = mode; }
                }
            if (!fits) continue;
            if (!asked) {
                Figure fig;
                if (fig_open(&fig, path, fmt, ww, hh, dpi, fs * shrink[fq], err, errlen)) return -1;
                bd_draw(cs, &fig, fmode);
                return fig_close(&fig, err, errlen);
            }
            const char *cats[MAX_CATS];
            snprintf(err, errlen, "breakdown: %dx%d px is too small for its panels (%d runs, %d categories): at least %dx%d px at %.0f dpi"
                     " (%.2fx%.2fin), or a smaller --font-scale (--size)", w, h, cs->n, chartset_categories(cs, cats, MAX_CATS, 0), ww, hh, dpi,
                     ww / dpi, hh / dpi);
            return -1;
        }
    snprintf(err, errlen, "breakdown: %dx%d px is too small for its panels (--size): at least twice as large", w, h);
    return -1;
}
