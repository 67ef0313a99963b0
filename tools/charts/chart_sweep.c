/* chart_sweep.c — sweep: memory against the swept value (sequence length, batch, LoRA rank, physical
   batch, precision, checkpointing), one line per method in its colour and marker, one panel each
   for the peak, the peak over vanilla's at the same value, and every phase that adds memory
   (model_creation, forward, backward, clip, noise, optimizer_step, step, ...: the most the phase adds
   over what was live when it began).

   The x axis is log2 when every value is a power of two, the values themselves when they are not
   numbers (fp32, bf16; checkpointing off, on). A y axis is log when its values span a factor of 10
   (short sequences stay visible next to long ones; a 0 sits on the bottom edge, hollow). A method
   without the phase is left out of its panel and named under the title; a line that coincides with
   another everywhere is drawn dashed over it and named ("flash = mixed"). An OOM run is a cross at
   the memory limit, labelled OOM. */
#include "charts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "chartkit.h"
#include "palette.h"

#define MAX_VALUES 64
#define MAX_SERIES 24
#define MAX_PANELS 9
#define PANEL_PEAK -1
#define PANEL_RATIO -2

static const char *const phase_order[] = { "model_creation", "forward", "backward", "recompute", "per_sample_norms", "clip",
                                           "noise", "allreduce", "optimizer_step", "step" };
static int phase_rank(const char *s) {
    for (size_t i = 0; i < sizeof phase_order / sizeof phase_order[0]; i++) if (!strcmp(s, phase_order[i])) return (int)i;
    return 100;
}

typedef struct {
    const ChartSet *cs;
    const char *values[MAX_VALUES];
    double xt[MAX_VALUES];      /* each value's position, 0..1 */
    int nv;
    const char *series[MAX_SERIES];
    int ns;
    int log2x, numeric;
} Sweep;

static int value_index(const Sweep *s, const char *v) {
    for (int i = 0; i < s->nv; i++) if (!strcmp(s->values[i], v)) return i;
    return -1;
}
static int series_index(const Sweep *s, const char *m) {
    for (int i = 0; i < s->ns; i++) if (!strcmp(s->series[i], m)) return i;
    return -1;
}

static void sweep_axis(Sweep *s) {
    const ChartSet *cs = s->cs;
    for (int i = 0; i < cs->n; i++) {
        if (value_index(s, cs->run[i].value) < 0 && s->nv < MAX_VALUES) s->values[s->nv++] = cs->run[i].value;
        if (series_index(s, cs->run[i].method) < 0 && s->ns < MAX_SERIES) s->series[s->ns++] = cs->run[i].method;
    }
    double v[MAX_VALUES];
    s->numeric = 1;
    s->log2x = 1;
    for (int i = 0; i < s->nv; i++) {
        char *end;
        v[i] = strtod(s->values[i], &end);
        if (!*s->values[i] || *end || !isfinite(v[i])) s->numeric = 0;
        else if (!(v[i] > 0) || fabs(log2(v[i]) - round(log2(v[i]))) > 1e-9) s->log2x = 0;
    }
    if (!s->numeric) s->log2x = 0;
    if (s->numeric) {   /* in value order */
        for (int i = 1; i < s->nv; i++)
            for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
                double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
                const char *q = s->values[j]; s->values[j] = s->values[j - 1]; s->values[j - 1] = q;
            }
        double lo = s->log2x ? log2(v[0]) : v[0], hi = s->log2x ? log2(v[s->nv - 1]) : v[s->nv - 1];
        for (int i = 0; i < s->nv; i++) s->xt[i] = hi > lo ? ((s->log2x ? log2(v[i]) : v[i]) - lo) / (hi - lo) : 0.5;
    } else
        for (int i = 0; i < s->nv; i++) s->xt[i] = s->nv > 1 ? (double)i / (s->nv - 1) : 0.5;
}

/* The panel's value of run i; NAN when it has none (a phase the run lacks, a failed run). */
static double value_of(const ChartSet *cs, int i, int which, const char *phase) {
    const ChartRun *r = &cs->run[i];
    if (r->status != RUN_OK || !r->rs) return NAN;
    if (which == PANEL_PEAK) return (double)r->rs->peak;
    if (which == PANEL_RATIO) {
        int b = chartset_baseline(cs, i);
        if (b < 0 || strcmp(cs->run[b].method, "vanilla") || !cs->run[b].rs->peak) return NAN;
        return (double)r->rs->peak / (double)cs->run[b].rs->peak;
    }
    int32_t k = dpmem_log_find_string(r->log, phase);
    if (k < 0 || !r->rs->scopes[k].count) return NAN;
    return (double)r->rs->scopes[k].mem_rise;
}

static void label_value(const Sweep *s, int i, char *out, size_t n) {
    const char *v = s->values[i];
    if (!strcmp(s->cs->sweep_key, "checkpoint")) snprintf(out, n, "%s", !strcmp(v, "1") ? "on" : !strcmp(v, "0") ? "off" : v);
    else snprintf(out, n, "%s", v);
}

static void draw_panel(Figure *f, const Sweep *s, double px0, double py0, double pw, double ph, int which, const char *phase) {
    const ChartSet *cs = s->cs;
    double pad = fig_pt(f, 6);
    char title[96], note[400] = "", b[64];
    snprintf(title, sizeof title, "%s", which == PANEL_PEAK ? "peak (total)" : which == PANEL_RATIO ? "peak \xC3\xB7 vanilla's (same value)" : phase);
    Box tb = fig_text(f, px0 + pw / 2, py0, TA_CENTER | TA_TOP, CK_PANEL, FONT_BOLD, COLOUR_TEXT, title);
    /* the values: [series][value] */
    double val[MAX_SERIES][MAX_VALUES];
    int oom[MAX_SERIES][MAX_VALUES];
    double limit[MAX_SERIES][MAX_VALUES];
    double vmin = INFINITY, vmax = 0;
    int any_zero = 0, any_oom = 0;
    for (int a = 0; a < s->ns; a++)
        for (int v = 0; v < s->nv; v++) { val[a][v] = NAN; oom[a][v] = 0; limit[a][v] = 0; }
    for (int i = 0; i < cs->n; i++) {
        int a = series_index(s, cs->run[i].method), v = value_index(s, cs->run[i].value);
        if (a < 0 || v < 0) continue;
        if (cs->run[i].status == RUN_OOM && which == PANEL_PEAK) { oom[a][v] = 1; limit[a][v] = cs->run[i].limit; any_oom = 1; continue; }
        double x = value_of(cs, i, which, phase);
        if (!isfinite(x)) continue;
        val[a][v] = x;
        if (x > 0 && x < vmin) vmin = x;
        if (x > vmax) vmax = x;
        any_zero |= x == 0;
    }
    /* the limits of OOM runs, when not far above the rest, belong on the axis */
    for (int a = 0; a < s->ns; a++)
        for (int v = 0; v < s->nv; v++)
            if (oom[a][v] && limit[a][v] > vmax && (vmax == 0 || limit[a][v] < 3 * vmax)) vmax = limit[a][v];
    /* who is absent, who coincides */
    int coincide[MAX_SERIES];
    size_t q = 0;
    for (int a = 0; a < s->ns; a++) {
        int have = 0, had_runs = 0;
        for (int v = 0; v < s->nv; v++) have |= isfinite(val[a][v]);
        for (int i = 0; i < cs->n; i++) had_runs |= !strcmp(cs->run[i].method, s->series[a]) && cs->run[i].status == RUN_OK;
        if (!have && had_runs && which >= 0 && q < sizeof note)
            q += (size_t)snprintf(note + q, sizeof note - q, "%s%s: no %s phase", q ? "; " : "", s->series[a], phase);
        coincide[a] = -1;
        for (int e = 0; e < a && coincide[a] < 0 && have; e++) {
            /* equal wherever both have a value (one may have run out of memory where the other did not) */
            int same = 1, common = 0, own = 0;
            for (int v = 0; v < s->nv && same; v++) {
                own += isfinite(val[a][v]);
                if (!isfinite(val[a][v]) || !isfinite(val[e][v])) continue;
                same = fabs(val[a][v] - val[e][v]) <= 1e-9 * fabs(val[e][v]) + 1e-12;
                common++;
            }
            if (same && common && (common >= 2 || common == own)) coincide[a] = e;
        }
    }
    /* the coinciding lines, by the line they lie on: "= vanilla: dpsgd, ghost" ("all equal" for all) */
    int n_same = 0, n_have = 0;
    for (int a = 0; a < s->ns; a++) {
        int have = 0;
        for (int v = 0; v < s->nv; v++) have |= isfinite(val[a][v]);
        n_have += have;
        n_same += coincide[a] >= 0;
    }
    if (n_same && n_same == n_have - 1 && n_have > 2 && q < sizeof note)
        q += (size_t)snprintf(note + q, sizeof note - q, "%sall %d methods equal", q ? "; " : "", n_have);
    else
        for (int e = 0; e < s->ns; e++) {
            int first = 1;
            for (int a = 0; a < s->ns; a++) {
                if (coincide[a] != e || q >= sizeof note) continue;
                q += (size_t)snprintf(note + q, sizeof note - q, "%s%s", first ? (q ? "; " : "") : ", ", s->series[a]);
                first = 0;
            }
            if (!first && q < sizeof note) q += (size_t)snprintf(note + q, sizeof note - q, " = %s", s->series[e]);
        }
    double y = tb.y1;
    if (*note) {
        char fitted[400];
        fig_fit_text(f, fitted, sizeof fitted, note, CK_NOTE, FONT_REGULAR, pw - 2 * pad);
        Box nb = fig_text(f, px0 + pw / 2, y, TA_CENTER | TA_TOP, CK_NOTE, FONT_REGULAR, COLOUR_MUTED, fitted);
        y = nb.y1;
    }
    if (!(vmax > 0) && !any_oom) return;
    Scale sy;
    if (which == PANEL_RATIO) scale_linear(&sy, VAL_RATIO, vmin < 1 ? vmin : 1, vmax > 1 ? vmax : 1, 4, 0);
    else scale_auto(&sy, VAL_BYTES, vmin, vmax > 0 ? vmax : 1024, 10, 1);
    double axw = fig_text_h(f, CK_AXIS) + fig_text_w(f, CK_TICK, FONT_REGULAR, "100 KiB") + fig_pt(f, 12);
    if (!sy.log) axw = fig_text_h(f, CK_AXIS) + fig_text_w(f, CK_TICK, FONT_REGULAR, "1000.0") + fig_pt(f, 12);
    double x0 = px0 + axw, x1 = px0 + pw - pad, y0 = y + fig_pt(f, 8), y1 = py0 + ph - 2 * fig_text_h(f, CK_TICK) - fig_pt(f, 16);
    scale_place(&sy, y1, y0);
    char yt[96];
    scale_title(&sy, which == PANEL_RATIO ? "peak \xC3\xB7 vanilla's" : which == PANEL_PEAK ? "peak memory" : "memory added", yt, sizeof yt);
    axis_left(f, &sy, x0, x1, yt, CK_TICK);
    /* x: every value labelled where it fits */
    double m = fig_pt(f, 12), xs[MAX_VALUES], last_right = -1e30;
    for (int v = 0; v < s->nv; v++) {
        xs[v] = x0 + m + s->xt[v] * (x1 - x0 - 2 * m);
        fig_line(f, xs[v], y1, xs[v], y1 + fig_pt(f, 3.5), COLOUR_AXIS, 0.6, 0);
        label_value(s, v, b, sizeof b);
        double w = fig_text_w(f, CK_TICK, FONT_REGULAR, b);
        if (xs[v] - w / 2 < last_right + fig_pt(f, 5)) continue;
        Box lb = fig_text(f, xs[v], y1 + fig_pt(f, 5.5), TA_CENTER | TA_TOP, CK_TICK, FONT_REGULAR, COLOUR_TEXT, b);
        last_right = lb.x1;
    }
    fig_line(f, x0, y1, x1, y1, COLOUR_AXIS, 0.8, 0);
    char xt[96];
    snprintf(xt, sizeof xt, "%s%s", !strcmp(cs->sweep_key, "checkpoint") ? "activation checkpointing" : cs->sweep_key,
             s->log2x ? " (log2 scale)" : "");
    fig_text(f, (x0 + x1) / 2, y1 + fig_pt(f, 7) + fig_text_h(f, CK_TICK), TA_CENTER | TA_TOP, CK_TICK, FONT_REGULAR, COLOUR_TEXT, xt);
    if (which == PANEL_RATIO) fig_line(f, x0, scale_px(&sy, 1), x1, scale_px(&sy, 1), COLOUR_AXIS, 0.6, 1);
    /* lines, then markers; a series that coincides with an earlier one: dashed, hollow markers */
    fig_clip(f, x0 - fig_pt(f, 6), y0 - fig_pt(f, 6), x1 + fig_pt(f, 6), y1 + fig_pt(f, 6));
    for (int a = 0; a < s->ns; a++) {
        MethodStyle st = method_style(s->series[a]);
        double xy[2 * MAX_VALUES];
        int n = 0;
        for (int v = 0; v < s->nv; v++) {
            if (!isfinite(val[a][v])) continue;
            xy[2 * n] = xs[v];
            xy[2 * n + 1] = val[a][v] > 0 || !sy.log ? scale_px(&sy, val[a][v]) : y1;
            n++;
        }
        fig_polyline(f, xy, n, st.colour, coincide[a] >= 0 ? 1.6 : 1.2, coincide[a] >= 0 ? 1 : 0);
    }
    fig_unclip(f);
    for (int a = 0; a < s->ns; a++) {
        MethodStyle st = method_style(s->series[a]);
        for (int v = 0; v < s->nv; v++) {
            if (oom[a][v]) {
                double l = limit[a][v], yy = l > 0 && l <= sy.hi ? scale_px(&sy, l) : y0;
                char what[96];
                snprintf(what, sizeof what, "oom %s", s->series[a]);
                fig_marker(f, MK_CROSS, xs[v], yy, 8, COLOUR_OOM, COLOUR_BG, 0, what);
                Box ob = { xs[v] + fig_pt(f, 5), yy - fig_text_h(f, CK_NOTE) / 2, xs[v] + fig_pt(f, 5) + fig_text_w(f, CK_NOTE, FONT_BOLD, "OOM"),
                           yy + fig_text_h(f, CK_NOTE) / 2 };
                if (fig_box_free(f, ob, (Box){ x0, y0 - fig_pt(f, 8), x1 + pad, y1 }))
                    fig_text(f, ob.x0, ob.y0, TA_LEFT | TA_TOP, CK_NOTE, FONT_BOLD, COLOUR_OOM, "OOM");
                continue;
            }
            if (!isfinite(val[a][v])) continue;
            int zero = sy.log && !(val[a][v] > 0);
            fig_marker(f, st.marker, xs[v], zero ? y1 : scale_px(&sy, val[a][v]), coincide[a] >= 0 ? 9 : 6.5, st.colour, COLOUR_BG,
                       coincide[a] >= 0 || zero, s->series[a]);
        }
    }
    if (any_zero && sy.log)
        fig_text(f, x1, y1 - fig_pt(f, 2), TA_RIGHT | TA_BOTTOM, CK_NOTE, FONT_REGULAR, COLOUR_MUTED, "hollow on the axis: 0 B");
}

int chart_sweep(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, char *err, size_t errlen) {
    Sweep s = { .cs = cs };
    sweep_axis(&s);
    /* panels: the peak, the ratio to vanilla, then each phase that adds memory somewhere */
    int which[MAX_PANELS], np = 0, have_vanilla = series_index(&s, "vanilla") >= 0, dropped = 0;
    const char *phase[MAX_PANELS] = { 0 };
    which[np++] = PANEL_PEAK;
    if (have_vanilla && s.ns > 1) which[np++] = PANEL_RATIO;
    /* the phases: the usual DP-SGD ones wherever they occur (one that adds nothing says so), any
       other that adds at least 1% of the largest peak somewhere */
    const char *ph[64], *small[64];
    int nph = 0, nsmall = 0;
    double maxpeak = 0;
    for (int i = 0; i < cs->n; i++)
        if (cs->run[i].status == RUN_OK && cs->run[i].rs && (double)cs->run[i].rs->peak > maxpeak) maxpeak = (double)cs->run[i].rs->peak;
    for (int i = 0; i < cs->n; i++) {
        const ChartRun *r = &cs->run[i];
        if (r->status != RUN_OK || !r->rs) continue;
        for (uint32_t k = 0; k < r->log->n_strings; k++) {
            if (!r->rs->scopes[k].count) continue;
            const char *name = r->log->strings[k];
            int seen = 0, big = phase_rank(name) < 100 || (double)r->rs->scopes[k].mem_rise >= 0.01 * maxpeak;
            for (int j = 0; j < nph && !seen; j++) seen = !strcmp(ph[j], name);
            if (seen) continue;
            int seen_small = -1;
            for (int j = 0; j < nsmall && seen_small < 0; j++) if (!strcmp(small[j], name)) seen_small = j;
            if (big) {
                if (seen_small >= 0) small[seen_small] = small[--nsmall];
                if (nph < 64) ph[nph++] = name;
            } else if (seen_small < 0 && nsmall < 64) small[nsmall++] = name;
        }
    }
    for (int i = 1; i < nph; i++)
        for (int j = i; j > 0; j--) {
            int a = phase_rank(ph[j - 1]), c = phase_rank(ph[j]);
            if (a < c || (a == c && strcmp(ph[j - 1], ph[j]) <= 0)) break;
            const char *t = ph[j]; ph[j] = ph[j - 1]; ph[j - 1] = t;
        }
    const char *zero[64];
    int nzero = 0;
    for (int j = 0; j < nph; j++) {
        double most = 0;
        for (int i = 0; i < cs->n; i++) {
            double v = value_of(cs, i, 0, ph[j]);
            if (isfinite(v) && v > most) most = v;
        }
        if (most <= 0) { zero[nzero++] = ph[j]; continue; }
        if (np == MAX_PANELS) { dropped++; continue; }
        phase[np] = ph[j];
        which[np++] = j;
    }
    int cols = np < 3 ? np : 3, rows = (np + cols - 1) / cols, w, h;
    if (figspec_pixels(spec, 560 * cols + 30, 400 * rows + 150, 1, 1, &w, &h, err, errlen)) return -1;
    /* the panels at least 150x120 pt at the type asked, or in a type down to 70% (a paper's size: the
       panels shrink with it), in 3 columns, fewer where that is too narrow, or 4 where it is too low */
    double dpi = spec->dpi > 0 ? spec->dpi : FIG_DEFAULT_DPI, fs = spec->font_scale > 0 ? spec->font_scale : 1, px = dpi / 72, shrink = 0;
    static const double shrinks[4] = { 1, 0.9, 0.8, 0.7 };
    int cand[4], nc = 0, c0 = cols;   /* the columns to try: as many as usual, fewer (a column's width), then 4 */
    for (int c = c0; c >= 1; c--) cand[nc++] = c;
    for (int c = c0 + 1; c <= (np < 4 ? np : 4); c++) cand[nc++] = c;
    for (int k = 0; k < 4 && !shrink; k++)
        for (int j = 0; j < nc && !shrink; j++) {
            int c = cand[j], rr = (np + c - 1) / c;
            double head = (CK_TITLE + 2 * CK_SUB + 2 * CK_LABEL + 3 * CK_NOTE) * 1.2 * fs * shrinks[k] * px + 40 * px;
            if ((w - 16 * px) / c >= 150 * px * shrinks[k] && (h - head) / rr >= 120 * px * shrinks[k]) { cols = c; rows = rr; shrink = shrinks[k]; }
        }
    if (!shrink) {
        double least_h = 0;
        for (int j = 0; j < nc; j++) {
            int c = cand[j], rr = (np + c - 1) / c;
            double need = rr * 120 * px * 0.7 + (CK_TITLE + 2 * CK_SUB + 2 * CK_LABEL + 3 * CK_NOTE) * 1.2 * fs * 0.7 * px + 40 * px;
            if ((w - 16 * px) / c >= 150 * px * 0.7 && (!least_h || need < least_h)) least_h = need;
        }
        if (least_h > 0)
            snprintf(err, errlen, "sweep: %dx%d px is too small for its %d panels: at least %dx%d px at %.0f dpi (%.2fx%.2fin) (--size)", w, h, np, w,
                     (int)ceil(least_h), dpi, w / dpi, ceil(least_h) / dpi);
        else snprintf(err, errlen, "sweep: %dx%d px is too narrow for its %d panels: at least %d px wide at %.0f dpi (--size)", w, h, np,
                      (int)ceil(150 * px * 0.7 + 16 * px), dpi);
        return -1;
    }
    Figure fig, *f = &fig;
    if (fig_open(f, path, fmt, w, h, dpi, fs * shrink, err, errlen)) return -1;
    char title[160];
    snprintf(title, sizeof title, "Memory vs %s: the peak, and what each phase adds over what was live when it began",
             !strcmp(cs->sweep_key, "checkpoint") ? "activation checkpointing" : cs->sweep_key);
    double y = ck_title(f, cs, title, NULL), pad = fig_pt(f, 8);
    y = ck_method_legend(f, cs, pad, y, f->w - 2 * pad);
    double note_h = fig_text_h(f, CK_NOTE) + fig_pt(f, 4);
    double pw = (f->w - 2 * pad) / cols, ph_ = (f->h - y - pad - note_h) / rows;
    for (int p = 0; p < np; p++)
        draw_panel(f, &s, pad + (p % cols) * pw, y + (p / cols) * ph_, pw, ph_, which[p] < 0 ? which[p] : 0, phase[p]);
    char note[600];
    size_t q = (size_t)snprintf(note, sizeof note, "Memory added by a phase: the most the live total rises inside one instance of it.%s",
                                dropped ? " More phases than fit: the first are shown." : "");
    for (int j = 0; j < nzero && q < sizeof note; j++)
        q += (size_t)snprintf(note + q, sizeof note - q, "%s%s%s", j ? ", " : " Adding no memory in any run: ", zero[j], j == nzero - 1 ? "." : "");
    for (int j = 0; j < nsmall && q < sizeof note; j++)
        q += (size_t)snprintf(note + q, sizeof note - q, "%s%s%s", j ? ", " : " Adding under 1% of the peak, not shown: ", small[j], j == nsmall - 1 ? "." : "");
    ck_note(f, f->h - pad, note);
    return fig_close(f, err, errlen);
}
