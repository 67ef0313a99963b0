/* chart_tradeoff.c — tradeoff: peak memory against step time, a point per run in its method's
   colour and marker, with the spread of the step time as a bar when the results give one, its name
   beside it (moved with a leader line where it would cover another label or point), the baseline's
   values as dashed lines. Both axes are zoomed on the data (log when they span a factor of 10 or
   more). A run without a time (a plan run, an OOM) has no point: the note under the plot names it. */
#include "charts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "chartkit.h"
#include "palette.h"
#include "read/units.h"

/* The chart in the type of spec times shrink; path NULL: drawn only. *crowded: the labels that found no
   room clear of the others and the points (drawn beside their point all the same). */
static int tradeoff_at(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec_in, double shrink, int *drawn, int *crowded,
                       char *err, size_t errlen) {
    *drawn = 0;
    *crowded = 0;
    FigSpec sp = *spec_in, *spec = &sp;
    sp.font_scale = (sp.font_scale > 0 ? sp.font_scale : 1) * shrink;
    double tmin = INFINITY, tmax = 0, mmin = INFINITY, mmax = 0;
    int np = 0, repeats = 0, flagged = 0;
    const char *what = "mean", *spread = "";
    double bound = NAN;
    for (int i = 0; i < cs->n; i++) {
        const ChartRun *r = &cs->run[i];
        if (r->status != RUN_OK || !r->rs || !isfinite(r->step_ms)) continue;
        double lo = isfinite(r->step_lo_ms) ? r->step_lo_ms : r->step_ms, hi = isfinite(r->step_hi_ms) ? r->step_hi_ms : r->step_ms;
        if (lo < tmin) tmin = lo;
        if (hi > tmax) tmax = hi;
        if ((double)r->rs->peak < mmin) mmin = (double)r->rs->peak;
        if ((double)r->rs->peak > mmax) mmax = (double)r->rs->peak;
        what = r->step_what;
        if (*r->step_spread) spread = r->step_spread;
        if (r->repeats > repeats) repeats = r->repeats;
        if (*r->trust && strcmp(r->trust, "ok")) { flagged++; if (isfinite(r->trust_bound_pct)) bound = r->trust_bound_pct; }
        np++;
    }
    if (np == 0) return 0;   /* nothing has a time (plan runs): no chart rather than an empty one */
    Figure fig, *f = &fig;
    if (ck_open(f, path, fmt, spec, 1150, 780, 400, 300, err, errlen)) return -1;
    char sub[200];
    if (repeats) snprintf(sub, sizeof sub, "step time: the median of %d rounds' %ss%s%s", repeats, what, *spread ? "; bars: " : "", spread);
    else snprintf(sub, sizeof sub, "step time: the %s over the timed steps%s%s", what, *spread ? "; bars: " : "", spread);
    double y = ck_title(f, cs, "Peak memory vs step time", sub);
    double pad = fig_pt(f, 8);
    /* the runs that ran out of memory: no time, so no point; named with their markers over the plot */
    int n_oom = 0;
    for (int i = 0; i < cs->n; i++) n_oom += cs->run[i].status == RUN_OOM;
    if (n_oom) {
        double h = fig_text_h(f, CK_LABEL), x = pad;
        Box hb = fig_text(f, x, y + fig_pt(f, 2), TA_LEFT | TA_TOP, CK_LABEL, FONT_BOLD, COLOUR_OOM, "Out of memory (no step time, no point):");
        x = hb.x1 + fig_pt(f, 8);
        for (int i = 0; i < cs->n; i++) {
            const ChartRun *r = &cs->run[i];
            if (r->status != RUN_OOM) continue;
            MethodStyle st = method_style(r->method);
            char what[160], lim[48] = "", text[200];
            snprintf(what, sizeof what, "oom %s", r->name);
            fig_marker(f, st.marker, x + fig_pt(f, 4), hb.y0 + h / 2, 7, st.colour, COLOUR_BG, 0, what);
            if (r->limit > 0) fmt_bytes(lim, sizeof lim, r->limit);
            snprintf(text, sizeof text, "%s%s%s%s", r->name, *lim ? " (limit " : "", lim, *lim ? ")" : "");
            Box tb = fig_text(f, x + fig_pt(f, 10), hb.y0, TA_LEFT | TA_TOP, CK_LABEL, FONT_REGULAR, COLOUR_TEXT, text);
            x = tb.x1 + fig_pt(f, 12);
        }
        y = hb.y1 + fig_pt(f, 2);
    }
    /* the OOM runs' limit, when they share one near the points, as a line */
    double limit = NAN;
    for (int i = 0; i < cs->n; i++)
        if (cs->run[i].status == RUN_OOM && cs->run[i].limit > 0)
            limit = isnan(limit) || limit == cs->run[i].limit ? cs->run[i].limit : INFINITY;
    if (isfinite(limit) && limit <= 1.5 * mmax && limit > mmax) mmax = limit;
    Scale sx, sy;
    scale_auto(&sx, VAL_TIME, tmin * 1e6, tmax * 1e6, 10, 0);
    scale_auto(&sy, VAL_BYTES, mmin, mmax, 10, 0);
    double axw = fig_text_h(f, CK_AXIS) + fig_text_w(f, CK_TICK, FONT_REGULAR, "1000.0") + fig_pt(f, 14);
    double x0 = pad + axw, x1 = f->w - pad - fig_pt(f, 10);
    double y0 = y + fig_pt(f, 10), y1 = f->h - pad - 2 * (fig_text_h(f, CK_NOTE) + fig_pt(f, 2)) - 2 * fig_text_h(f, CK_TICK) - fig_pt(f, 14);
    scale_place(&sx, x0, x1);
    scale_place(&sy, y1, y0);
    char tx[96], ty[96];
    scale_title(&sx, "step time", tx, sizeof tx);
    scale_title(&sy, "peak memory", ty, sizeof ty);
    axis_left(f, &sy, x0, x1, ty, CK_TICK);
    axis_bottom(f, &sx, y1, y0, tx, CK_TICK);
    fig_line(f, x0, y0, x1, y0, COLOUR_GRID, 0.5, 0);
    fig_line(f, x1, y0, x1, y1, COLOUR_GRID, 0.5, 0);
    Box plot = { x0 + 1, y0 + 1, x1 - 1, y1 - 1 };
    if (isfinite(limit) && limit <= sy.hi && limit >= sy.lo) {
        double ly = scale_px(&sy, limit);
        char v[48], l[80];
        fig_line(f, x0, ly, x1, ly, COLOUR_OOM, 0.7, 1);
        snprintf(l, sizeof l, "memory limit %s", fmt_bytes(v, sizeof v, limit));
        fig_text(f, x1 - fig_pt(f, 3), ly - fig_pt(f, 1), TA_RIGHT | TA_BOTTOM, CK_NOTE, FONT_REGULAR, COLOUR_OOM, l);
    }
    /* the baseline's values, dashed: left of it is faster, below it smaller */
    int b = chartset_baseline(cs, 0);
    if (b >= 0 && isfinite(cs->run[b].step_ms)) {
        double bx = scale_px(&sx, cs->run[b].step_ms * 1e6), by = scale_px(&sy, (double)cs->run[b].rs->peak);
        fig_line(f, bx, y0, bx, y1, COLOUR_MUTED, 0.6, 1);
        fig_line(f, x0, by, x1, by, COLOUR_MUTED, 0.6, 1);
    }
    /* every point first (labels must keep clear of all of them), then the labels */
    for (int i = 0; i < cs->n; i++) {
        const ChartRun *r = &cs->run[i];
        if (r->status != RUN_OK || !r->rs || !isfinite(r->step_ms)) continue;
        MethodStyle st = method_style(r->method);
        double px = scale_px(&sx, r->step_ms * 1e6), py = scale_px(&sy, (double)r->rs->peak);
        if (isfinite(r->step_lo_ms) && isfinite(r->step_hi_ms)) {
            double a = scale_px(&sx, r->step_lo_ms * 1e6), c = scale_px(&sx, r->step_hi_ms * 1e6), e = fig_pt(f, 3);
            fig_line(f, a, py, c, py, st.colour, 1.0, 0);
            fig_line(f, a, py - e, a, py + e, st.colour, 1.0, 0);
            fig_line(f, c, py - e, c, py + e, st.colour, 1.0, 0);
            char sw[96];
            snprintf(sw, sizeof sw, "spread %s", r->method);
            fig_record(f, (Box){ a - 1, py - e, c + 1, py + e }, BOX_MARK, sw);   /* labels keep off the bar */
        }
        /* a time ratio the suite does not trust: a ring in the warning colour around the point */
        if (*r->trust && strcmp(r->trust, "ok")) {   /* a thin ring, clear of the marker */
            char fw[96];
            double ring[2 * 33], rr = fig_pt(f, 7.5);
            for (int k = 0; k <= 32; k++) { ring[2 * k] = px + rr * cos(k * M_PI / 16); ring[2 * k + 1] = py + rr * sin(k * M_PI / 16); }
            fig_polyline(f, ring, 33, COLOUR_OOM, 1.3, 0);
            snprintf(fw, sizeof fw, "hollow untrusted %s", r->method);
            fig_record(f, (Box){ px - rr, py - rr, px + rr, py + rr }, BOX_MARK, fw);
        }
        /* on or against an earlier run's point (closer than a marker): hollow and larger, so both show */
        int on_other = 0;
        for (int k = 0; k < i && !on_other; k++) {
            const ChartRun *q = &cs->run[k];
            if (q->status != RUN_OK || !q->rs || !isfinite(q->step_ms)) continue;
            on_other = fabs(scale_px(&sx, q->step_ms * 1e6) - px) < fig_pt(f, 8) && fabs(scale_px(&sy, (double)q->rs->peak) - py) < fig_pt(f, 8);
        }
        fig_marker(f, st.marker, px, py, on_other ? 13 : 9, st.colour, COLOUR_BG, on_other, r->method);
    }
    for (int i = 0; i < cs->n; i++) {
        const ChartRun *r = &cs->run[i];
        if (r->status != RUN_OK || !r->rs || !isfinite(r->step_ms)) continue;
        MethodStyle st = method_style(r->method);
        char label[200];
        snprintf(label, sizeof label, "%s%s%s%s", r->name, *r->value ? " " : "", r->value, *r->trust && strcmp(r->trust, "ok") ? " (?)" : "");
        *crowded += fig_label_near(f, scale_px(&sx, r->step_ms * 1e6), scale_px(&sy, (double)r->rs->peak), fig_pt(f, 7), plot, CK_LABEL,
                                   FONT_REGULAR, st.colour, label) < 0;
    }
    /* who has no point, and why */
    char note[800] = "";
    size_t q = 0;
    int k = 0;
    for (int i = 0; i < cs->n; i++) {
        const ChartRun *r = &cs->run[i];
        if (r->status == RUN_OK && r->rs && isfinite(r->step_ms)) continue;
        if (r->status == RUN_OOM) continue;   /* named over the plot */
        const char *why = r->status != RUN_OK ? "failed" : r->meta.plan ? "a plan run: no time" : "no step time";
        if (q < sizeof note) q += (size_t)snprintf(note + q, sizeof note - q, "%s%s (%s)", k++ ? ", " : "No point: ", r->name, why);
    }
    if (b >= 0 && q < sizeof note)
        q += (size_t)snprintf(note + q, sizeof note - q, "%sDashed: %s's values.", k ? ". " : "", cs->run[b].name);
    ck_note(f, f->h - pad, note);
    if (flagged) {   /* a line of its own, above the other */
        char bw[48] = "beyond the bound", tn[300];
        if (isfinite(bound)) snprintf(bw, sizeof bw, "apart by over x%.2f", 1 + bound / 100);
        snprintf(tn, sizeof tn, "Ringed (?): %d ratio%s to vanilla not to trust: DP timed below vanilla, or its steps' ratios to vanilla's %s (summary.txt).",
                 flagged, flagged == 1 ? "" : "s", bw);
        ck_note(f, f->h - pad - fig_text_h(f, CK_NOTE) - fig_pt(f, 2), tn);
    }
    *drawn = 1;
    return fig_close(f, err, errlen);
}

int chart_tradeoff(const ChartSet *cs, const char *path, FigFormat fmt, const FigSpec *spec, int *drawn, char *err, size_t errlen) {
    /* the type asked, else smaller (to 70%: a paper's column) until every name finds room clear of the
       points, the bars and the other names; none does: the smallest */
    static const double shrink[4] = { 1, 0.9, 0.8, 0.7 };
    for (int k = 0; k < 3; k++) {
        int crowded;
        if (tradeoff_at(cs, NULL, fmt, spec, shrink[k], drawn, &crowded, err, errlen)) return -1;
        if (!*drawn) return 0;
        if (!crowded) return tradeoff_at(cs, path, fmt, spec, shrink[k], drawn, &crowded, err, errlen);
    }
    int crowded;
    return tradeoff_at(cs, path, fmt, spec, shrink[3], drawn, &crowded, err, errlen);
}
