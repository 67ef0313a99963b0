/* axes.c — see axes.h. */
#include "axes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "palette.h"

#define MAX_TICKS 256   /* a log axis over 12 decades has 9 ticks in each */

static Unit unit_of(ValueKind k, double max) {
    if (k == VAL_BYTES) return byte_unit(max > 0 ? max : 1024);
    if (k == VAL_TIME) return time_unit(max > 0 ? max : 1e6);
    if (k == VAL_RATIO) return (Unit){ 1, "\xC3\x97" };   /* × */
    return (Unit){ 1, "" };
}

void scale_linear(Scale *s, ValueKind k, double min, double max, int ticks, int from_zero) {
    memset(s, 0, sizeof *s);
    s->kind = k;
    if (!isfinite(min) || !isfinite(max)) min = max = 0;
    /* one value (a single run, or runs alike): from zero to it, not a hair's breadth around it */
    if (!(max > min) && max > 0) { min = 0; from_zero = 1; }
    if (from_zero || min < 0) min = min < 0 ? min : 0;
    if (!(max > min)) max = min + (k == VAL_BYTES ? 1024 : k == VAL_TIME ? 1e6 : 1);
    s->u = unit_of(k, fabs(max) > fabs(min) ? fabs(max) : fabs(min));
    double lo = min / s->u.div, hi = max / s->u.div, span = hi - lo;
    if (!from_zero) { lo -= span * 0.08; hi += span * 0.08; }
    s->step = nice_step(hi - lo, ticks);
    double top = ceil(hi / s->step * (1 + 1e-12)) * s->step;
    if (from_zero && top < hi * 1.04) top += s->step;   /* headroom: the maximum never touches the frame */
    double bottom = from_zero ? (min < 0 ? floor(lo / s->step) * s->step : 0) : floor(lo / s->step * (1 + 1e-12)) * s->step;
    if (!from_zero && min >= 0 && bottom < 0) bottom = 0;
    s->lo = bottom * s->u.div;
    s->hi = top * s->u.div;
}

/* The decade steps of a log axis in display units: 1, 10, 100 of each unit. */
static double log_floor(ValueKind k, double v) {
    Unit u = unit_of(k, v);
    double m = v / u.div, d = pow(10, floor(log10(m) + 1e-9));
    return d * u.div;
}

void scale_log(Scale *s, ValueKind k, double min, double max) {
    memset(s, 0, sizeof *s);
    s->kind = k;
    s->log = 1;
    if (!(min > 0)) min = max > 0 ? max / 100 : 1;
    if (!(max > min)) max = min * 10;
    s->u = unit_of(k, max);
    /* a little room at both ends, and whole decades when they are close */
    double lo = min / 1.25, hi = max * 1.25;
    double dlo = log_floor(k, lo);
    if (log10(lo / dlo) < 0.15) lo = dlo;
    double dhi = log_floor(k, hi) * 10;
    if (log10(dhi / hi) < 0.15) hi = dhi;
    s->lo = lo;
    s->hi = hi;
}

void scale_auto(Scale *s, ValueKind k, double min, double max, double ratio, int from_zero) {
    if (min > 0 && max / min >= ratio) scale_log(s, k, min, max);
    else scale_linear(s, k, min, max, 5, from_zero);
}

void scale_place(Scale *s, double p0, double p1) { s->p0 = p0; s->p1 = p1; }

double scale_px(const Scale *s, double v) {
    double t;
    if (s->log) t = v > 0 ? (log10(v) - log10(s->lo)) / (log10(s->hi) - log10(s->lo)) : -0.05;
    else t = (v - s->lo) / (s->hi - s->lo);
    if (!(t >= -0.05)) t = -0.05;   /* also NaN */
    if (t > 1.05) t = 1.05;
    return s->p0 + t * (s->p1 - s->p0);
}

void scale_title(const Scale *s, const char *what, char *out, size_t n) {
    if (s->log) snprintf(out, n, "%s (log scale)", what);
    else if (s->kind == VAL_BYTES || s->kind == VAL_TIME) snprintf(out, n, "%s (%s)", what, s->u.name);
    else snprintf(out, n, "%s", what);
}

static void fmt_log(ValueKind k, double v, char *out, size_t n) {
    if (k == VAL_PLAIN || k == VAL_RATIO) {
        snprintf(out, n, "%g%s", v, k == VAL_RATIO ? "\xC3\x97" : "");
        return;
    }
    Unit u = unit_of(k, v * 1.0000001);
    snprintf(out, n, "%g %s", v / u.div, u.name);
}

/* Major ticks (labelled, with grid) and minor ones (a short mark). Returns the count. */
typedef struct { double v; int major; } Tick;
static int ticks_of(const Scale *s, Tick *t, int max) {
    int n = 0;
    if (!s->log) {
        double first = ceil(s->lo / s->u.div / s->step - 1e-9);
        for (double k = first; n < max; k += 1) {
            double v = k * s->step * s->u.div;
            if (v > s->hi * (1 + 1e-9) + 1e-300) break;
            t[n++] = (Tick){ v, 1 };
        }
        return n;
    }
    /* decades of the display units; labels at 2 and 5 too when there are fewer than two decades */
    double decades = log10(s->hi / s->lo);
    double d = log_floor(s->kind, s->lo);
    for (int guard = 0; guard < 200 && n < max && d <= s->hi * 1.0000001; guard++) {
        for (int m = 1; m <= 9 && n < max; m++) {
            double v = d * m;
            if (v < s->lo * 0.9999999 || v > s->hi * 1.0000001) continue;
            int major = m == 1 || (decades < 2 && (m == 2 || m == 5));
            t[n++] = (Tick){ v, major };
        }
        /* the next decade: 10x, or the next unit where 1000 of this one is one of the next */
        Unit u = unit_of(s->kind, d * 1.0000001);
        double m = d / u.div;
        if (m >= 99.9 && (s->kind == VAL_BYTES || s->kind == VAL_TIME)) {
            Unit nu = unit_of(s->kind, u.div * (s->kind == VAL_BYTES ? 1024 : 1000) * 1.0000001);
            d = nu.div > u.div ? nu.div : d * 10;
        } else d *= 10;
    }
    return n;
}

static void tick_label(const Scale *s, double v, char *out, size_t n) {
    if (s->log) { fmt_log(s->kind, v, out, n); return; }
    char b[48];
    fmt_tick(b, sizeof b, v / s->u.div, s->step);
    snprintf(out, n, "%s%s", b, s->kind == VAL_RATIO ? "\xC3\x97" : "");
}

/* Which major ticks of a log axis get a label: every one when they fit, else every k-th for the
   smallest k whose labels keep apart (never an irregular run of skipped decades), starting where the
   most labels fall on a whole unit (1 B, 1 KiB, 1 MiB ...). label[i] is set for the chosen ticks. */
static void log_labels(Figure *f, const Scale *s, const Tick *t, int n, double size_pt, int horizontal, int *label) {
    int maj[MAX_TICKS], nm = 0;
    double pos[MAX_TICKS], ext[MAX_TICKS];
    char b[64];
    for (int i = 0; i < n; i++) {
        label[i] = 0;
        if (!t[i].major) continue;
        tick_label(s, t[i].v, b, sizeof b);
        pos[nm] = scale_px(s, t[i].v);
        ext[nm] = horizontal ? fig_text_w(f, size_pt, FONT_REGULAR, b) : fig_text_h(f, size_pt);
        maj[nm++] = i;
    }
    double gap = fig_pt(f, horizontal ? 6 : 2);
    for (int k = 1; k <= (nm > 0 ? nm : 1); k++) {
        int best = -1, best_units = -1;
        for (int o = 0; o < k && o < nm; o++) {
            int fits = 1, units = 0, prev = -1;
            for (int j = o; j < nm && fits; j += k) {
                if (prev >= 0 && fabs(pos[j] - pos[prev]) < (ext[j] + ext[prev]) / 2 + gap) fits = 0;
                if (horizontal && (pos[j] - ext[j] / 2 < 0 || pos[j] + ext[j] / 2 > f->w)) fits = 0;   /* inside the figure */
                Unit u = unit_of(s->kind, t[maj[j]].v * 1.0000001);
                units += fabs(t[maj[j]].v / u.div - 1) < 1e-6;
                prev = j;
            }
            int last = (nm - 1 - o) % k == 0;   /* a tie goes to the labels that reach the largest values */
            if (fits && (units > best_units || (units == best_units && last))) { best = o; best_units = units; }
        }
        if (best >= 0) {
            for (int j = best; j < nm; j += k) label[maj[j]] = 1;
            return;
        }
    }
}

/* A thin line's position on a pixel's centre: it covers that row (or column) alone. */
static double crisp(double v) { return floor(v + 0.5) + 0.5; }

void axis_left(Figure *f, const Scale *s, double x, double grid_x1, const char *title, double size_pt) {
    Tick t[MAX_TICKS];
    int n = ticks_of(s, t, MAX_TICKS);
    double tl = fig_pt(f, 3.5), gap = fig_pt(f, 2), maxw = 0, last_top = 1e30, lw = fig_pt(f, 0.8);
    char b[64];
    for (int i = 0; i < n; i++) {
        double y = crisp(scale_px(s, t[i].v));
        if (t[i].major) fig_line(f, x, y, grid_x1, y, COLOUR_GRID, 0.5, 0);
    }
    int lab[MAX_TICKS];
    if (s->log) log_labels(f, s, t, n, size_pt, 0, lab);
    for (int i = 0; i < n; i++) {
        double y = crisp(scale_px(s, t[i].v));
        fig_line(f, x - (t[i].major ? tl : tl / 2), y, x, y, COLOUR_AXIS, 0.6, 0);
        if (!t[i].major || (s->log && !lab[i])) continue;
        tick_label(s, t[i].v, b, sizeof b);
        double h = fig_text_h(f, size_pt);
        if (!s->log && y + h / 2 > last_top - gap) continue;   /* would touch the label below: skipped */
        Box bx = fig_text(f, x - tl - gap, y, TA_RIGHT | TA_MIDDLE, size_pt, FONT_REGULAR, COLOUR_TEXT, b);
        last_top = bx.y0;
        if (bx.x1 - bx.x0 > maxw) maxw = bx.x1 - bx.x0;
    }
    fig_line(f, x - lw / 2, s->p0, x - lw / 2, s->p1, COLOUR_AXIS, 0.8, 0);   /* outside the plot's columns */
    if (title) {
        double tx = x - tl - gap - maxw - fig_pt(f, 4);
        fig_text_rot(f, tx, (s->p0 + s->p1) / 2, TA_RIGHT | TA_MIDDLE, size_pt, FONT_REGULAR, COLOUR_TEXT, title);
    }
}

void axis_bottom(Figure *f, const Scale *s, double y, double grid_y0, const char *title, double size_pt) {
    Tick t[MAX_TICKS];
    int n = ticks_of(s, t, MAX_TICKS);
    double tl = fig_pt(f, 3.5), gap = fig_pt(f, 2), last_right = -1e30, lh = 0, lw = fig_pt(f, 0.8);
    char b[64];
    for (int i = 0; i < n; i++) {
        double x = crisp(scale_px(s, t[i].v));
        if (t[i].major) fig_line(f, x, y, x, grid_y0, COLOUR_GRID, 0.5, 0);
    }
    int lab[MAX_TICKS];
    if (s->log) log_labels(f, s, t, n, size_pt, 1, lab);
    for (int i = 0; i < n; i++) {
        double x = crisp(scale_px(s, t[i].v));
        fig_line(f, x, y, x, y + (t[i].major ? tl : tl / 2), COLOUR_AXIS, 0.6, 0);
        if (!t[i].major || (s->log && !lab[i])) continue;
        tick_label(s, t[i].v, b, sizeof b);
        double w = fig_text_w(f, size_pt, FONT_REGULAR, b);
        if (!s->log && x - w / 2 < last_right + fig_pt(f, 6)) continue;
        Box bx = fig_text(f, x, y + tl + gap, TA_CENTER | TA_TOP, size_pt, FONT_REGULAR, COLOUR_TEXT, b);
        last_right = bx.x1;
        lh = bx.y1 - bx.y0;
    }
    double lo = s->p0 < s->p1 ? s->p0 : s->p1, hi = s->p0 < s->p1 ? s->p1 : s->p0;
    fig_line(f, lo - lw, y + lw / 2, hi, y + lw / 2, COLOUR_AXIS, 0.8, 0);   /* outside the plot's rows */
    if (title) fig_text(f, (lo + hi) / 2, y + tl + gap + (lh > 0 ? lh : fig_text_h(f, size_pt)) + fig_pt(f, 3), TA_CENTER | TA_TOP, size_pt,
                        FONT_REGULAR, COLOUR_TEXT, title);
}

/* ---- the timeline's whole-pixel memory axis --------------------------------------------------- */

void axes_scale(Axes *a, double max) {
    scale_linear(&a->s, VAL_BYTES, 0, max > 0 ? max : 1024, 5, 1);
    a->ymax = a->s.hi;
}

int axes_h(const Axes *a, double v) {
    double h = v / a->ymax * (a->y1 - a->y0) + 0.5;
    if (!(h >= 0)) return 0;
    return h > a->y1 - a->y0 ? a->y1 - a->y0 : (int)h;
}
int axes_y(const Axes *a, double v) { return a->y1 - axes_h(a, v); }
