/* timeline.c — see timeline.h. The data of each panel comes from tools/charts/timeline_replay.c; this file
   lays out and draws. Areas, bands and the device line sit on whole pixels of the PNG (their
   corners are integers), so their colours are exact and a test can predict every row. */
#include "timeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "palette.h"
#include "read/runmeta.h"
#include "read/shown.h"
#include "timeline_replay.h"
#include "read/units.h"

/* Font sizes, points. */
#define FS_TITLE 10.0
#define FS_SUB 8.0
#define FS_TICK 7.5
#define FS_AXIS 8.0
#define FS_LEGEND 7.5
#define FS_LANE 6.5
#define FS_NOTE 7.0

typedef struct {
    Figure *f;
    const TimelineOptions *o;
    int x0, left, W, legend_x, right;   /* pixel columns: the panel's cell from x0 */
    double lane_fs;                 /* the lanes' type: FS_LANE, smaller in lanes squeezed by a small --size */
} Layout;

/* ---- titles --------------------------------------------------------------------------------- */

#define SEP " \xC2\xB7 "   /* " · " between the items of a title line */

/* The line under a panel's name: what a reader must know of the run (runmeta_summary), and for a run
   without time (a plan) that its axis is of events. */
static void title_summary(const DpmemLog *L, const Panel *p, char *sum, size_t n) {
    RunMeta m;
    runmeta_of(&m, L);
    runmeta_summary(&m, 1, sum, n);
    if (p->events) {
        char line[640];
        snprintf(line, sizeof line, "%.560s%sno time (a plan run): drawn against allocation events", sum, *sum ? SEP : "");
        snprintf(sum, n, "%s", line);
    }
}

/* A summary wider than avail breaks onto a second line after its last whole item that fits (no item
   is cut); the byte offset of that break, or 0 when it fits whole (or no item does). */
static size_t summary_break(Figure *f, const char *sum, double avail) {
    if (fig_text_w(f, FS_SUB, FONT_REGULAR, sum) <= avail) return 0;
    size_t at = 0;
    char part[640];
    for (const char *q = strstr(sum, SEP); q; q = strstr(q + 1, SEP)) {
        snprintf(part, sizeof part, "%.*s", (int)(q - sum), sum);
        if (fig_text_w(f, FS_SUB, FONT_REGULAR, part) > avail) break;
        at = (size_t)(q - sum);
    }
    return at;
}

static void draw_title(const Layout *ly, const DpmemLog *L, const Panel *p, double *y) {
    Figure *f = ly->f;
    char buf[128], method[64], sum[640];
    const char *name = dpmem_log_run_name(L, buf, sizeof buf);
    method_of_log(L, name, method, sizeof method);
    title_summary(L, p, sum, sizeof sum);
    double x = ly->x0 + fig_pt(f, 6), th = fig_text_h(f, FS_TITLE);
    MethodStyle st = method_style(method);
    if (st.known) {   /* the method's marker, as in every chart */
        fig_marker(f, st.marker, x + fig_pt(f, 4), *y + th / 2, 7, st.colour, COLOUR_BG, 0, method);
        x += fig_pt(f, 11);
    }
    char fitted[640];
    fig_fit_text(f, fitted, sizeof fitted, name, FS_TITLE, FONT_BOLD, ly->right - x);
    Box b = fig_text(f, x, *y, TA_LEFT | TA_TOP, FS_TITLE, FONT_BOLD, COLOUR_TEXT, fitted);
    double room = ly->right - b.x1 - fig_pt(f, 8);
    if (fig_text_w(f, FS_SUB, FONT_REGULAR, sum) <= room) {
        fig_text(f, b.x1 + fig_pt(f, 8), b.y1 - fig_pt(f, 1), TA_LEFT | TA_BOTTOM, FS_SUB, FONT_REGULAR, COLOUR_MUTED, sum);
        *y = b.y1;
    } else if (ly->o->compact) *y = b.y1;   /* a small figure: the name alone (what the runs share is in the caption) */
    else {   /* a second line, never cut while it fits the width; wider, a third from its last whole item */
        const double avail = ly->right - ly->x0 - fig_pt(f, 6);
        const size_t at = summary_break(f, sum, avail);
        double yy = b.y1 + fig_pt(f, 1);
        for (int k = 0; k < (at ? 2 : 1); k++) {
            char part[640];
            if (at) snprintf(part, sizeof part, "%.*s", (int)at, sum);
            fig_fit_text(f, fitted, sizeof fitted, !at ? sum : k == 0 ? part : sum + at + strlen(SEP), FS_SUB, FONT_REGULAR, avail);
            Box s = fig_text(f, ly->x0 + fig_pt(f, 6), yy, TA_LEFT | TA_TOP, FS_SUB, FONT_REGULAR, COLOUR_MUTED, fitted);
            *y = s.y1;
            yy = s.y1 + fig_pt(f, 1);
        }
    }
}

/* The lines under a panel's name in the non-compact layout: 1, or 2 when its summary breaks. */
static int title_sub_lines(Figure *f, const Layout *ly, const DpmemLog *L, const Panel *p) {
    char sum[640];
    title_summary(L, p, sum, sizeof sum);
    return summary_break(f, sum, ly->right - ly->x0 - fig_pt(f, 6)) ? 2 : 1;
}

/* ---- scope lanes ---------------------------------------------------------------------------- */

/* Instances of one scope closer than this (columns) are one group, named once ("clip x22"). */
static int group_gap(const Panel *p) { return p->W / 150 > 2 ? p->W / 150 : 2; }

/* The widest label a lane of L can have ("T3 worker-1"), at size fs: the threads' names, each OS
   thread its own (a pass over the events only when an index was reused or a thread renamed). */
static double lane_label_w(Figure *f, const DpmemLog *L, double fs) {
    if (L->n_threads <= 1 && L->count[DPMEM_EV_THREAD] <= 1) return fig_text_w(f, fs, FONT_REGULAR, "scopes");
    ThreadTracks T;
    if (tracks_init(&T, L)) return 0;
    if (L->count[DPMEM_EV_THREAD] > L->n_threads) {
        DpmemIter it;
        DpmemEvent e;
        if (dpmem_iter_begin(&it, L) == 0) {
            while (dpmem_iter_next(&it, &e))
                if (e.type == DPMEM_EV_THREAD && tracks_event(&T, &e) == UINT32_MAX) break;
            dpmem_iter_end(&it);
        }
    } else
        for (uint32_t s = 0; s < T.n; s++) snprintf(T.t[s].name, sizeof T.t[s].name, "%s", L->threads[s].name);
    double w = 0;
    char lab[96];
    for (uint32_t k = 0; k < T.n; k++) {
        double x = fig_text_w(f, fs, FONT_REGULAR, tracks_label(&T, k, lab, sizeof lab));
        if (x > w) w = x;
    }
    tracks_free(&T);
    return w;
}

static void draw_lanes(const Layout *ly, const DpmemLog *L, const Panel *p, int panel, int lanes_y, int lane_h) {
    Figure *f = ly->f;
    int W = p->W, left = ly->left;
    for (int l = 0; l < p->n_lanes; l++) {
        int y0 = lanes_y + l * lane_h, y1 = y0 + lane_h - (int)fig_pt(f, 1.5);
        uint32_t track = p->lane_key[l] >> 8;
        char lab[96], fitted[96];
        if (p->tracks.n > 1) tracks_label(&p->tracks, track, lab, sizeof lab);
        else snprintf(lab, sizeof lab, "scopes");
        if (!(l > 0 && p->lane_key[l - 1] >> 8 == track)) {   /* a deeper lane of the same thread: no label */
            fig_fit_text(f, fitted, sizeof fitted, lab, ly->lane_fs, FONT_REGULAR, left - ly->x0 - fig_pt(f, 8));
            fig_text(f, left - fig_pt(f, 3), (y0 + y1) / 2.0, TA_RIGHT | TA_MIDDLE, ly->lane_fs, FONT_REGULAR, COLOUR_MUTED, fitted);
        }
        const int32_t *nm = p->lane_name + (size_t)l * W;
        const uint8_t *bg = p->lane_begin + (size_t)l * W;
        for (int x = 0; x < W;) {   /* the bands, one per instance, a white notch where one begins */
            int x1 = x + 1;
            while (x1 < W && nm[x1] == nm[x] && !bg[x1]) x1++;
            if (nm[x] >= 0) {
                fig_rect(f, left + x, y0, left + x1, y1, scope_colour(L->strings[nm[x]]));
                if (x1 - x >= 3 && bg[x]) fig_rect(f, left + x, y0, left + x + 1, y1, COLOUR_BG);
            }
            x = x1;
        }
        for (int x = 0; x < W;) {   /* the names, one per group of instances */
            if (nm[x] < 0) { x++; continue; }
            int32_t name = nm[x];
            int end = x + 1, count = bg[x] ? bg[x] : 1, last = x;   /* bg: how many instances begin in a column */
            for (int k = x + 1; k < W && k - last <= group_gap(p) + 1; k++) {
                if (nm[k] == name) {
                    count += bg[k];
                    last = k;
                    end = k + 1;
                } else if (nm[k] >= 0) break;
            }
            char t[128];
            const char *s = L->strings[name];
            if (count > 1) snprintf(t, sizeof t, "%s \xC3\x97%d", s, count);
            else snprintf(t, sizeof t, "%s", s);
            double room = end - x - fig_pt(f, 2);
            if (fig_text_w(f, ly->lane_fs, FONT_REGULAR, t) > room) snprintf(t, sizeof t, "%s", s);
            if (fig_text_w(f, ly->lane_fs, FONT_REGULAR, t) <= room)
                fig_text(f, left + (x + end) / 2.0, (y0 + y1) / 2.0, TA_CENTER | TA_MIDDLE, ly->lane_fs, FONT_REGULAR, COLOUR_TEXT, t);
            x = end;
        }
        if (ly->o->verbose) printf("lane %d %d %d %d\n", panel, l, y0, y1);
    }
}

/* ---- the plot ------------------------------------------------------------------------------- */

/* One series as a polygon of whole-pixel steps: the top edge left to right, the bottom edge back. */
static void draw_series(Figure *f, const Panel *p, const Axes *ax, int s, double *xy) {
    int S = p->n_series, W = p->W;
    for (int x = 0; x < W;) {
        if (p->col_total[x] == UINT64_MAX) { x++; continue; }
        int start = x;
        while (x < W && p->col_total[x] != UINT64_MAX) x++;
        int end = x;   /* [start, end) */
        int any = 0, n = 0;
        int prev_top = 0, prev_bot = 0;
        for (int k = start; k < end && !any; k++) any = p->col_break[(size_t)k * S + s] != 0;
        if (!any) continue;
        /* rows of the series' top and bottom in column k */
#define ROWS(k, top, bot)                                                                       \
        do {                                                                                    \
            uint64_t cum_ = 0;                                                                  \
            for (int q_ = 0; q_ < s; q_++) cum_ += p->col_break[(size_t)(k) * S + q_];          \
            bot = axes_y(ax, (double)cum_);                                                     \
            top = axes_y(ax, (double)(cum_ + p->col_break[(size_t)(k) * S + s]));              \
        } while (0)
        for (int k = start; k < end; k++) {
            int top, bot;
            ROWS(k, top, bot);
            (void)bot;
            if (k == start) { xy[2 * n] = ax->x0 + k; xy[2 * n + 1] = top; n++; }
            else if (top != prev_top) {
                xy[2 * n] = ax->x0 + k; xy[2 * n + 1] = prev_top; n++;
                xy[2 * n] = ax->x0 + k; xy[2 * n + 1] = top; n++;
            }
            prev_top = top;
        }
        xy[2 * n] = ax->x0 + end; xy[2 * n + 1] = prev_top; n++;
        for (int k = end - 1; k >= start; k--) {
            int top, bot;
            ROWS(k, top, bot);
            (void)top;
            if (k == end - 1) { xy[2 * n] = ax->x0 + end; xy[2 * n + 1] = bot; n++; }
            else if (bot != prev_bot) {
                xy[2 * n] = ax->x0 + k + 1; xy[2 * n + 1] = prev_bot; n++;
                xy[2 * n] = ax->x0 + k + 1; xy[2 * n + 1] = bot; n++;
            }
            prev_bot = bot;
        }
#undef ROWS
        xy[2 * n] = ax->x0 + start; xy[2 * n + 1] = prev_bot; n++;
        fig_polygon(f, xy, n, p->colour[s]);
    }
}

/* A device marker: a square of side 2r+1 pixels centred on pixel (x, y), in a white ring. */
static void device_marker(Figure *f, const Axes *ax, int x, int y, int r, int ring) {
    fig_clip(f, ax->x0, ax->y0, ax->x1, ax->y1);
    if (ring) fig_rect(f, x - r - 1, y - r - 1, x + r + 2, y + r + 2, COLOUR_BG);
    fig_rect(f, x - r, y - r, x + r + 1, y + r + 1, COLOUR_DEVICE);
    fig_unclip(f);
    fig_record(f, (Box){ x - r - 1, y - r - 1, x + r + 2, y + r + 2 }, BOX_MARK, "device");
}

/* device_used at each snapshot that has device figures, as markers joined by straight segments.
   Straight, not steps: cudaMemGetInfo is sampled only at the snapshots, and between two of them the
   device's use rises and falls with every allocation (the stacked areas show how much). A step would
   claim the value held still until the next snapshot and then jumped, which the log does not say;
   a straight segment only links one sample to the next, and the markers show where the samples are.
   Several snapshots in one column: a vertical run from the smallest to the largest, entered at the
   first and left at the last, with a marker at each end. More than one snapshot per 10 columns:
   the markers shrink (no ring), or they would merge into a band. */
static void draw_device_line(Figure *f, const Panel *p, const Axes *a) {
    int prev = -1, yprev = 0, dense = p->n_dev_cols * 10 > p->W;
    fig_clip(f, a->x0, a->y0, a->x1, a->y1);
    int half = (int)fig_pt(f, 1.25) / 2;   /* a column's run: an odd number of whole pixels, as wide as the line */
    for (int x = 0; x < p->W; x++) {
        if (p->dev_first[x] == UINT64_MAX) continue;
        double X = a->x0 + x + 0.5;
        if (prev >= 0) fig_line(f, a->x0 + prev + 0.5, yprev + 0.5, X, axes_y(a, (double)p->dev_first[x]) + 0.5, COLOUR_DEVICE, 1.25, 0);
        if (p->dev_hi[x] != p->dev_lo[x])
            fig_rect(f, a->x0 + x - half, axes_y(a, (double)p->dev_hi[x]), a->x0 + x + half + 1, axes_y(a, (double)p->dev_lo[x]) + 1, COLOUR_DEVICE);
        prev = x;
        yprev = axes_y(a, (double)p->dev_last[x]);
    }
    fig_unclip(f);
    int r = (int)fig_pt(f, dense ? 0.75 : 1.5);
    for (int x = 0; x < p->W; x++) {
        if (p->dev_first[x] == UINT64_MAX) continue;
        device_marker(f, a, a->x0 + x, axes_y(a, (double)p->dev_lo[x]), r, !dense);
        if (p->dev_hi[x] != p->dev_lo[x]) device_marker(f, a, a->x0 + x, axes_y(a, (double)p->dev_hi[x]), r, !dense);
    }
}

static void draw_snapshots(Figure *f, const Panel *p, const Axes *ax) {
    int dense = p->n_snaps * 25 > p->W;   /* many snapshots: short ticks at the top, not lines and names across the plot */
    Box plot = { ax->x0, ax->y0, ax->x1, ax->y1 };
    for (int s = 0; s < p->n_snaps; s++) {
        double x = ax->x0 + p->snap_col[s] + 0.5;
        if (dense) { fig_line(f, x, ax->y0, x, ax->y0 + fig_pt(f, 3), COLOUR_SNAP, 0.5, 0); continue; }
        fig_line(f, x, ax->y0, x, ax->y1, COLOUR_SNAP, 0.6, 2);
        double w = fig_text_w(f, FS_NOTE, FONT_REGULAR, p->snap_label[s]), h = fig_text_h(f, FS_NOTE), g = fig_pt(f, 2);
        Box r = { x + g, ax->y0 + g, x + g + w, ax->y0 + g + h }, l = { x - g - w, ax->y0 + g, x - g, ax->y0 + g + h };
        if (fig_box_free(f, r, plot)) fig_text(f, r.x0, r.y0, TA_LEFT | TA_TOP, FS_NOTE, FONT_REGULAR, COLOUR_SNAP, p->snap_label[s]);
        else if (fig_box_free(f, l, plot)) fig_text(f, l.x0, l.y0, TA_LEFT | TA_TOP, FS_NOTE, FONT_REGULAR, COLOUR_SNAP, p->snap_label[s]);
    }
}

/* The x axis: time from the log's start, or allocation events. */
static void draw_x_axis(Figure *f, const Panel *p, const Axes *ax) {
    Scale s = { 0 };
    s.kind = p->events ? VAL_PLAIN : VAL_TIME;
    s.u = p->events ? (Unit){ 1, "" } : time_unit(p->to - p->from > 0 ? p->to - p->from : 1);
    s.lo = p->from;
    s.hi = p->to;
    int ticks = (int)((ax->x1 - ax->x0) / fig_pt(f, 55));
    s.step = nice_step((s.hi - s.lo) / s.u.div, ticks < 2 ? 2 : ticks);
    if (p->events && s.step < 1) s.step = 1;
    scale_place(&s, ax->x0, ax->x1);
    char title[96];
    if (p->events) snprintf(title, sizeof title, "allocation events (the n-th ALLOC or FREE)");
    else snprintf(title, sizeof title, "time since the log opened (%s)", s.u.name);
    axis_bottom(f, &s, ax->y1, ax->y1, title, FS_TICK);
}

static void draw_peak(Figure *f, const Panel *p, const Axes *ax, int peak_row) {
    if (!p->peak) return;
    char b[160], v[48], t[48];
    double x = ax->x0 + p->peak_col + 0.5;
    if (p->events) snprintf(t, sizeof t, "event %llu", (unsigned long long)p->peak_at);
    else fmt_time(t, sizeof t, (double)p->peak_at);
    snprintf(b, sizeof b, "peak %s at %s", fmt_bytes(v, sizeof v, (double)p->peak), t);
    double w = fig_text_w(f, FS_LEGEND, FONT_BOLD, b), tx = x - w / 2;
    if (tx < ax->x0) tx = ax->x0;
    if (tx + w > ax->x1) tx = ax->x1 - w;
    Box lb = fig_text(f, tx, peak_row, TA_LEFT | TA_TOP, FS_LEGEND, FONT_BOLD, COLOUR_PEAK, b);
    double py = axes_y(ax, (double)p->peak);
    fig_line(f, x, lb.y1, x, py, COLOUR_PEAK, 0.8, 1);
    fig_record(f, (Box){ x - fig_pt(f, 1), lb.y1, x + fig_pt(f, 1), py }, BOX_MARK, "peak line");   /* the snapshots' names keep off it */
}

/* An allocation that failed: hatching from what was live up to what it would have made (cut at the
   top of the plot), outlined, "OOM" over it. */
static void draw_oom(Figure *f, const DpmemLog *L, const Panel *p, const Axes *ax) {
    if (!p->has_oom) return;
    char buf[128], what[160];
    double x = ax->x0 + p->oom_col + 0.5, w = fig_pt(f, 4);
    double y1 = axes_y(ax, (double)p->oom_live), want = (double)p->oom_live + (double)p->oom_request;
    double y0 = want >= ax->ymax ? ax->y0 : axes_y(ax, want);
    if (y1 - y0 < fig_pt(f, 6)) y0 = y1 - fig_pt(f, 6);
    fig_rect(f, x - w, y0, x + w, y1, COLOUR_BG);
    fig_hatch(f, x - w, y0, x + w, y1, COLOUR_OOM, 2.5, 0.7);
    fig_rect_outline(f, x - w, y0, x + w, y1, COLOUR_OOM, 0.9);
    double tw = fig_text_w(f, FS_LEGEND, FONT_BOLD, "OOM"), th = fig_text_h(f, FS_LEGEND), tx = x - tw / 2, g = fig_pt(f, 2);
    if (tx + tw > ax->x1) tx = ax->x1 - tw;
    /* over the hatching, or (where the peak's label is) beside its top, right or left */
    Box all = { 0, 0, f->w, f->h }, at[3] = { { tx, y0 - fig_pt(f, 1) - th, tx + tw, y0 - fig_pt(f, 1) },
                                              { x + w + g, y0, x + w + g + tw, y0 + th }, { x - w - g - tw, y0, x - w - g, y0 + th } };
    int k = 0;
    while (k < 2 && !fig_box_free(f, at[k], all)) k++;
    Box b = fig_text(f, at[k].x0, at[k].y0, TA_LEFT | TA_TOP, FS_LEGEND, FONT_BOLD, COLOUR_OOM, "OOM");
    if (k) b = (Box){ x - w, y0, x + w, y0 };
    snprintf(what, sizeof what, "oom %s", dpmem_log_run_name(L, buf, sizeof buf));
    fig_record(f, (Box){ x - w, b.y0, x + w, y1 }, BOX_MARK, what);
}

/* ---- the legend ----------------------------------------------------------------------------- */

static const char *const phase_order[] = { "model_creation", "data", "step", "forward", "backward", "layer_backward", "recompute",
                                           "per_sample_norms", "clip", "noise", "allreduce", "optimizer_step", "zero_grad", "loss" };
static int phase_rank(const char *s) {
    for (size_t i = 0; i < sizeof phase_order / sizeof phase_order[0]; i++) if (!strcmp(s, phase_order[i])) return (int)i;
    return 100;
}

typedef struct { uint64_t bytes; int series; } AtPeak;
static int cmp_at_peak(const void *a, const void *b) {   /* largest first; a tie in stack order, top first */
    const AtPeak *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return (y->series > x->series) - (y->series < x->series);
}

static void draw_legend(const Layout *ly, const Panel *p, int panel, int y0, int bottom) {
    Figure *f = ly->f;
    double x = ly->legend_x, right = ly->right, sw = fig_pt(f, 8), g = fig_pt(f, 4), rh = fig_text_h(f, FS_LEGEND) + fig_pt(f, 2);
    double y = y0;
    char b[64], name[160];
    if (ly->o->verbose) printf("legend %d %d %d\n", panel, (int)x, y0);
    if (p->has_oom) {   /* what failed, in words */
        char t[48], line[320];
        if (p->events) snprintf(t, sizeof t, "event %llu", (unsigned long long)p->oom_at);
        else fmt_time(t, sizeof t, (double)p->oom_at);
        snprintf(line, sizeof line, "out of memory at %s:", t);
        fig_text(f, x, y, TA_LEFT | TA_TOP, FS_LEGEND, FONT_BOLD, COLOUR_OOM, line);
        y += rh;
        snprintf(line, sizeof line, "%s more asked for", fmt_bytes(b, sizeof b, (double)p->oom_request));
        fig_text(f, x, y, TA_LEFT | TA_TOP, FS_NOTE, FONT_REGULAR, COLOUR_OOM, line);
        y += rh;
        fig_fit_text(f, name, sizeof name, p->oom_tag, FS_NOTE, FONT_REGULAR, right - x);
        fig_text(f, x, y, TA_LEFT | TA_TOP, FS_NOTE, FONT_REGULAR, COLOUR_OOM, name);
        y += rh + fig_pt(f, 3);
    }
    if (p->n_dev_cols) {
        double cy = (int)(y + rh / 2) + 0.5;
        fig_line(f, x, cy, x + sw * 1.6, cy, COLOUR_DEVICE, 1.25, 0);
        int r = (int)fig_pt(f, 1.5), mx = (int)(x + sw * 0.8), my = (int)cy;
        fig_rect(f, mx - r - 1, my - r - 1, mx + r + 2, my + r + 2, COLOUR_BG);
        fig_rect(f, mx - r, my - r, mx + r + 1, my + r + 1, COLOUR_DEVICE);
        fig_text(f, x + sw * 1.6 + g, y, TA_LEFT | TA_TOP, FS_LEGEND, FONT_REGULAR, COLOUR_TEXT, "device used");
        fig_text(f, right, y, TA_RIGHT | TA_TOP, FS_LEGEND, FONT_REGULAR, COLOUR_TEXT, fmt_bytes(b, sizeof b, (double)p->dev_max));
        y += rh;
        fig_text(f, x + sw * 1.6 + g, y, TA_LEFT | TA_TOP, FS_NOTE, FONT_REGULAR, COLOUR_MUTED, "(cudaMemGetInfo), largest");
        y += rh + fig_pt(f, 3);
        if (ly->o->verbose) printf("device %d snapshots %d max %llu legend %d %d\n", panel, p->n_dev, (unsigned long long)p->dev_max, mx, my);
    }
    fig_text(f, x, y, TA_LEFT | TA_TOP, FS_LEGEND, FONT_BOLD, COLOUR_TEXT, p->events ? "at the peak:" : "at the peak:");
    y += rh;
    /* what was at the peak, largest first (the reader's question is what the peak is made of); then
       the series with nothing there that the plot shows elsewhere (so that every colour is named), in
       stack order; a legend cut short drops the smallest ("…" says so) */
    AtPeak *order = malloc((size_t)(p->n_series > 0 ? p->n_series : 1) * sizeof *order);
    int n = 0;
    if (!order) return;
    for (int s = 0; s < p->n_series; s++)
        if (p->peak_break[s]) order[n++] = (AtPeak){ p->peak_break[s], s };
    qsort(order, (size_t)n, sizeof *order, cmp_at_peak);
    for (int s = p->n_series - 1; s >= 0; s--) {
        int any = 0;
        for (int x2 = 0; x2 < p->W && !any && !p->peak_break[s]; x2++) any = p->col_total[x2] != UINT64_MAX && p->col_break[(size_t)x2 * p->n_series + s];
        if (any) order[n++] = (AtPeak){ 0, s };
    }
    for (int i = 0; i < n; i++) {
        int s = order[i].series;
        if (y + rh > bottom) { fig_text(f, x, y - rh * 0.4, TA_LEFT | TA_TOP, FS_LEGEND, FONT_REGULAR, COLOUR_MUTED, "\xE2\x80\xA6"); break; }
        fmt_bytes(b, sizeof b, (double)p->peak_break[s]);
        double bw = fig_text_w(f, FS_LEGEND, FONT_REGULAR, b);
        fig_rect(f, x, y + rh / 2 - sw / 2, x + sw, y + rh / 2 + sw / 2, p->colour[s]);
        fig_fit_text(f, name, sizeof name, p->names[s], FS_LEGEND, FONT_REGULAR, right - bw - g * 2 - (x + sw + g));
        fig_text(f, x + sw + g, y, TA_LEFT | TA_TOP, FS_LEGEND, FONT_REGULAR, COLOUR_TEXT, name);
        fig_text(f, right, y, TA_RIGHT | TA_TOP, FS_LEGEND, FONT_REGULAR, COLOUR_TEXT, b);
        y += rh;
    }
    free(order);
}


/* The phases' band colours of every panel, once for the whole picture (a scope's colour is the same
   in every panel): a row under the panels, wrapped. Returns its height; draws when draw is set. */
static double phase_legend(Figure *f, const DpmemLog *logs, const Panel *P, int n, double x0, double x1, double y, int draw) {
    const char *seen[64];
    int ns = 0;
    for (int i = 0; i < n; i++)
        for (int l = 0; l < P[i].n_lanes; l++)
            for (int x = 0; x < P[i].W; x++) {
                int32_t nm = P[i].lane_name[(size_t)l * P[i].W + x];
                if (nm < 0) continue;
                const char *s = logs[i].strings[nm];
                int dup = 0;
                for (int k = 0; k < ns && !dup; k++) dup = !strcmp(seen[k], s);
                if (!dup && ns < 64) seen[ns++] = s;
            }
    if (!ns) return 0;
    for (int i = 1; i < ns; i++)   /* the phases' usual order, then by name */
        for (int j = i; j > 0; j--) {
            int ra = phase_rank(seen[j - 1]), rc = phase_rank(seen[j]);
            if (ra < rc || (ra == rc && strcmp(seen[j - 1], seen[j]) <= 0)) break;
            const char *t = seen[j]; seen[j] = seen[j - 1]; seen[j - 1] = t;
        }
    double sw = fig_pt(f, 8), g = fig_pt(f, 3), rh = fig_text_h(f, FS_LEGEND) + fig_pt(f, 2), x = x0, yy = y;
    const char *head = "phases (the bands over each plot):";
    double hw = fig_text_w(f, FS_LEGEND, FONT_BOLD, head);
    if (draw) fig_text(f, x, yy, TA_LEFT | TA_TOP, FS_LEGEND, FONT_BOLD, COLOUR_TEXT, head);
    x += hw + fig_pt(f, 8);
    for (int k = 0; k < ns; k++) {
        double w = sw + g + fig_text_w(f, FS_LEGEND, FONT_REGULAR, seen[k]);
        if (x + w > x1) { x = x0 + hw + fig_pt(f, 8); yy += rh; }
        if (draw) {
            fig_rect(f, round(x), round(yy + rh / 2 - sw / 2), round(x + sw), round(yy + rh / 2 + sw / 2), scope_colour(seen[k]));
            fig_text(f, x + sw + g, yy, TA_LEFT | TA_TOP, FS_LEGEND, FONT_REGULAR, COLOUR_TEXT, seen[k]);
        }
        x += w + fig_pt(f, 10);
    }
    return yy + rh - y;
}

/* ---- the whole picture ---------------------------------------------------------------------- */

static int is_plan(const DpmemLog *L) {
    const char *d = dpmem_log_meta(L, "config.device");
    return d && !strcmp(d, "plan");
}

/* Each panel's window; a --from at or beyond a log's end is an error (an empty plot tells nothing). */
static int windows(const DpmemLog *logs, int n, const TimelineOptions *o, int W, double *from, double *to, int *events,
                   char *err, size_t errlen) {
    double longest = 0;
    for (int i = 0; i < n; i++) {
        events[i] = o->events || is_plan(&logs[i]);
        if (!events[i] && panel_span(&logs[i], 0) > longest) longest = panel_span(&logs[i], 0);
    }
    int explicit_window = o->from_ns > 0 || o->to_ns > 0;
    for (int i = 0; i < n; i++) {
        char name[128], b1[32], b2[32];
        double span = panel_span(&logs[i], events[i]);
        if (events[i] && explicit_window) {
            snprintf(err, errlen, "%s has no time (a plan log, or --events): --from/--to do not apply", dpmem_log_run_name(&logs[i], name, sizeof name));
            return -1;
        }
        if (o->from_ns > 0 && o->from_ns >= span) {
            snprintf(err, errlen, "--from %s is at or after the end of %s (its events span %s)", fmt_time(b1, sizeof b1, o->from_ns),
                     dpmem_log_run_name(&logs[i], name, sizeof name), fmt_time(b2, sizeof b2, span));
            return -1;
        }
        from[i] = events[i] ? 0 : o->from_ns;
        /* no window asked: a lead-in of more than 5% of the span with nothing to draw (a program's
           start-up between opening the log and its first allocation) is left out; the axis still
           counts from the log's opening */
        if (!events[i] && !explicit_window && !o->shared_time) {
            double lead = panel_lead_in(&logs[i]);
            if (lead > 0.05 * span && lead < span) from[i] = lead;
        }
        if (!events[i] && o->to_ns > o->from_ns) to[i] = o->to_ns;
        else {
            double end = !events[i] && o->shared_time ? longest : span;
            if (end <= from[i]) end = from[i] + 1;
            to[i] = end + (end - from[i]) * 0.5 / W;   /* the last event lands inside the last column */
        }
    }
    return 0;
}

int timeline_render(const DpmemLog *logs, int n_logs, const TimelineOptions *o, const char *path, char *err, size_t errlen) {
    if (n_logs < 1) { snprintf(err, errlen, "no log to draw"); return -1; }
    double dpi = o->dpi > 0 ? o->dpi : FIG_DEFAULT_DPI, k144 = dpi / FIG_DEFAULT_DPI;
    int cols = o->columns > 1 ? o->columns : 1, rows = (n_logs + cols - 1) / cols;
    if (cols > n_logs) { cols = n_logs; rows = 1; }
    int min_w = (int)ceil((cols > 1 || o->compact ? TIMELINE_MIN_CELL_W : TIMELINE_MIN_W) * k144) * cols,
        min_h = (int)ceil((o->compact ? TIMELINE_MIN_COMPACT_H : TIMELINE_MIN_H) * k144) * rows;
    if (o->width < min_w || o->height < min_h || o->height > 16384 || o->width > 16384) {
        snprintf(err, errlen, "image %dx%d is too small (or too large) for %d panel(s): at least %dx%d", o->width, o->height, n_logs, min_w, min_h);
        return -1;
    }
    Figure fig;
    if (fig_open(&fig, path, o->format, o->width, o->height, dpi, o->font_scale, err, errlen)) return -1;
    Figure *f = &fig;
    Layout ly = { f, o, 0, 0, 0, 0, 0, FS_LANE };
    int cell_w = o->width / cols;   /* the layout of the first column; the others are it moved right */
    ly.right = cell_w - (int)fig_pt(f, 6);
    /* legend: room for "per_sample_grads" and "999.99 MiB", at most 40% of the width */
    int legend_w = (int)ceil(fig_pt(f, 8) + fig_pt(f, 4) * 4 + fig_text_w(f, FS_LEGEND, FONT_REGULAR, "per_sample_grads") +
                             fig_text_w(f, FS_LEGEND, FONT_REGULAR, "999.99 MiB"));
    if (o->by_name) legend_w = (int)(legend_w * 1.5);
    if (legend_w > cell_w * 0.4) legend_w = (int)(cell_w * 0.4);
    ly.left = (int)(fig_pt(f, 6) + fig_text_h(f, FS_AXIS) + fig_pt(f, 6) + fig_text_w(f, FS_TICK, FONT_REGULAR, "1000") + fig_pt(f, 6));
    {   /* the lanes' thread names whole where the width allows (at most a fifth of it): never cut with room to spare */
        double lab = 0;
        for (int i = 0; i < n_logs; i++) { double w = lane_label_w(f, &logs[i], FS_LANE); if (w > lab) lab = w; }
        int need = (int)ceil(lab + fig_pt(f, 9)), most = cell_w / 5;
        if (need > ly.left) ly.left = need < most ? need : most > ly.left ? most : ly.left;
    }
    ly.legend_x = cell_w - legend_w - (int)fig_pt(f, 6);
    ly.W = ly.legend_x - (int)fig_pt(f, 12) - ly.left;
    if (ly.W < 100) { fig_discard(f); snprintf(err, errlen, "image %dx%d is too narrow: at least %d wide", o->width, o->height, min_w); return -1; }

    Panel *P = calloc((size_t)n_logs, sizeof *P);
    double *from = calloc((size_t)n_logs, sizeof *from), *to = calloc((size_t)n_logs, sizeof *to);
    int *events = calloc((size_t)n_logs, sizeof *events);
    double *xy = malloc(((size_t)ly.W * 4 + 8) * 2 * sizeof *xy);
    int rc = 0;
    if (!P || !from || !to || !events || !xy) { snprintf(err, errlen, "out of memory"); rc = -1; }
    if (rc == 0) rc = windows(logs, n_logs, o, ly.W, from, to, events, err, errlen);
    for (int i = 0; i < n_logs && rc == 0; i++)
        if (panel_build(&P[i], &logs[i], o->by_name, o->top_n, !o->no_device_line, events[i], from[i], to[i], ly.W)) {
            snprintf(err, errlen, "%s", dpmem_log_error(&logs[i]) ? dpmem_log_error(&logs[i]) : "out of memory");
            rc = -1;
        } else if (P[i].too_large)
            fprintf(stderr, "dpmem-render: %s: %llu allocations left out: they would carry the total past 2^64 bytes (a forged or corrupt log)\n",
                    shown(logs[i].path), (unsigned long long)P[i].too_large);
    if (rc) goto out;

    uint64_t maxv = 0;   /* one memory scale for all panels; the device line is never clipped */
    for (int i = 0; i < n_logs; i++) {
        for (int x = 0; x < ly.W; x++)
            if (P[i].col_total[x] != UINT64_MAX && P[i].col_total[x] > maxv) maxv = P[i].col_total[x];
        if (P[i].n_dev_cols && P[i].dev_max > maxv) maxv = P[i].dev_max;
    }
    Axes ax = { .x0 = ly.left, .x1 = ly.left + ly.W };
    axes_scale(&ax, (double)maxv);
    char ytitle[64];
    scale_title(&ax.s, "live tagged memory", ytitle, sizeof ytitle);

    double pad = fig_pt(f, 6), legend_h = phase_legend(f, logs, P, n_logs, pad, o->width - pad, 0, 0);
    if (legend_h > 0) legend_h += fig_pt(f, 6);
    /* one time axis for all (shared_time, the last panel on time): its labels and title drawn once, in a
       strip under the last panel, so that every panel has the same height of plot */
    int axis_strip = o->shared_time && !P[n_logs - 1].events ? (int)ceil(2 * fig_text_h(f, FS_TICK) + fig_pt(f, 14) - fig_pt(f, 8)) : 0;
    int panel_h = (int)((o->height - legend_h - axis_strip) / rows), lane_h = (int)lround(fig_fpt(f, 10));
    double min_plot = fig_pt(f, o->compact ? 24 : 30);
    /* a small --size: lanes from 10 pt down to 7 (5 when compact; their type with them) before a panel is refused */
    for (double lane_pt = 10; lane_pt >= (o->compact ? 5 : 7); lane_pt -= 0.5) {
        int fits = 1;
        lane_h = (int)lround(fig_fpt(f, lane_pt));
        ly.lane_fs = FS_LANE * lane_pt / 10;
        for (int i = 0; i < n_logs && fits; i++) {
            double head = fig_pt(f, 4) + fig_text_h(f, FS_TITLE) +
                          (o->compact ? 0 : title_sub_lines(f, &ly, &logs[i], &P[i]) * (fig_pt(f, 1) + fig_text_h(f, FS_SUB))) + fig_pt(f, 4) +
                          (!logs[i].closed || logs[i].corrupt ? fig_text_h(f, FS_NOTE) + fig_pt(f, 1) : 0);
            double foot = axis_strip && !P[i].events ? fig_pt(f, 8) : 2 * fig_text_h(f, FS_TICK) + fig_pt(f, 14);
            fits = head + P[i].n_lanes * lane_h + fig_pt(f, 1) + fig_text_h(f, FS_LEGEND) + fig_pt(f, 3) + min_plot + foot <= panel_h;
        }
        if (fits) break;
    }
    Layout ly0 = ly;
    for (int i = 0; i < n_logs; i++) {
        Panel *p = &P[i];
        const DpmemLog *L = &logs[i];
        int col = i / rows, row = i % rows, top = row * panel_h, off = col * cell_w;
        ly = ly0;
        ly.x0 += off; ly.left += off; ly.legend_x += off; ly.right += off;
        ax.x0 = ly.left; ax.x1 = ly.left + ly.W;
        double y = top + fig_pt(f, 4);
        draw_title(&ly, L, p, &y);
        y += fig_pt(f, 2);
        if (!L->closed || L->corrupt) {
            Box b = fig_text(f, ly.x0 + fig_pt(f, 6), y, TA_LEFT | TA_TOP, FS_NOTE, FONT_REGULAR, COLOUR_PEAK,
                             L->corrupt ? "corrupt log: drawn up to the first bad byte" : "not closed cleanly: drawn up to the cut");
            y = b.y1 + fig_pt(f, 1);
        }
        int lanes_y = (int)ceil(y + fig_pt(f, 2));
        int peak_row = lanes_y + p->n_lanes * lane_h + (int)fig_pt(f, 1);
        int py0 = peak_row + (int)ceil(fig_text_h(f, FS_LEGEND) + fig_pt(f, 3));
        /* the shared time axis: bare on every time panel but the last, whose labels go in the strip */
        int on_strip = axis_strip && !p->events, bare_axis = on_strip && row + 1 < rows && i + 1 < n_logs;
        int py1 = top + panel_h - (int)ceil(on_strip ? fig_pt(f, 8) : 2 * fig_text_h(f, FS_TICK) + fig_pt(f, 14));
        if (py1 - py0 < min_plot) {
            snprintf(err, errlen, "image too small for %d scope lanes: make it taller (--size)", p->n_lanes);
            rc = -1;
            goto out;
        }
        ax.y0 = py0; ax.y1 = py1;
        scale_place(&ax.s, py1, py0);
        char short_title[64];   /* a short plot (a small --size): a title no longer than its axis */
        scale_title(&ax.s, "memory", short_title, sizeof short_title);
        const char *yt = fig_text_w(f, FS_TICK, FONT_REGULAR, ytitle) <= py1 - py0 ? ytitle
                       : fig_text_w(f, FS_TICK, FONT_REGULAR, short_title) <= py1 - py0 ? short_title : ax.s.u.name;   /* never past the plot */
        axis_left(f, &ax.s, ly.left, ly.left + ly.W, yt, FS_TICK);
        for (int s = 0; s < p->n_series; s++) draw_series(f, p, &ax, s, xy);
        draw_peak(f, p, &ax, peak_row);
        draw_snapshots(f, p, &ax);
        if (p->n_dev_cols) draw_device_line(f, p, &ax);
        draw_oom(f, L, p, &ax);
        if (bare_axis) fig_line(f, ax.x0, ax.y1 + 0.5, ax.x1, ax.y1 + 0.5, COLOUR_AXIS, 0.8, 0);
        else draw_x_axis(f, p, &ax);
        draw_lanes(&ly, L, p, i, lanes_y, lane_h);
        draw_legend(&ly, p, i, py0, top + panel_h - (int)fig_pt(f, 2));
        if (o->verbose)
            printf("panel %d plot %d %d %d %d ymax %.0f from %.3f to %.3f peak %llu col %d lanes %d axis %s\n", i, ly.left, py0,
                   ly.left + ly.W, py1, ax.ymax, p->from, p->to, (unsigned long long)p->peak, p->peak_col, p->n_lanes,
                   p->events ? "events" : "time");
        if (row + 1 < rows && i + 1 < n_logs) fig_line(f, off, top + panel_h - 0.5, off + cell_w, top + panel_h - 0.5, COLOUR_GRID, 0.5, 0);
        if (col > 0 && row == 0) fig_line(f, off - 0.5, 0, off - 0.5, rows * panel_h, COLOUR_GRID, 0.5, 0);
    }
    if (legend_h > 0) phase_legend(f, logs, P, n_logs, pad, o->width - pad, rows * panel_h + axis_strip + fig_pt(f, 2), 1);
out:
    if (rc == 0) rc = fig_close(f, err, errlen);
    else fig_discard(f);
    for (int i = 0; P && i < n_logs; i++) panel_free(&P[i]);
    free(P); free(from); free(to); free(events); free(xy);
    return rc;
}
