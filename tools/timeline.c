/* timeline.c — see timeline.h. A log is replayed once per panel (twice with --by name: the first pass
   finds the largest buffers) into per-pixel columns, then everything is drawn from those columns. */
#include "timeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "palette.h"
#include "raster.h"
#include "scopestack.h"
#include "units.h"

#define MAX_LANES 8
#define MAX_DEPTH 64
#define MAX_SNAPS 512
#define MAX_SERIES 24             /* --by category: with more categories than this, the 22 largest by
                                     their own peak are drawn, then "other" and "?" (a legend holds ~20) */
#define LANE_H 16
#define TEXT2 2                   /* scale of titles, legends and tick labels */

typedef struct {
    int n_series;
    const char **names;
    Rgb *colour;
    int32_t *series_of;           /* per string index: the series of that tag */
    int W;
    uint64_t *col_total;          /* per column: max total (UINT64_MAX: no data) */
    uint64_t *col_break;          /* per column × series: the breakdown at that max */
    uint64_t peak, *peak_break;
    uint64_t peak_ns;             /* relative to t0 */
    int peak_col;
    int n_lanes;
    uint32_t lane_key[MAX_LANES]; /* thread slot << 8 | depth */
    int32_t *lane_name;           /* per lane × column: string index of the scope there, or -1 */
    uint8_t *lane_begin;          /* per lane × column: a scope begins here */
    int n_snaps;
    int snap_col[MAX_SNAPS];
    const char *snap_label[MAX_SNAPS];
    /* device_used of the snapshots with device figures (device_total > 0), per column: the first, the
       last, the smallest and the largest in that column (UINT64_MAX: none there). NULL: not drawn. */
    uint64_t *dev_first, *dev_last, *dev_lo, *dev_hi;
    int n_dev, n_dev_cols;        /* such snapshots in the window; columns that hold one */
    uint64_t dev_max;
    char **owned;                 /* names this panel allocated */
    int n_owned;
} Panel;

typedef struct {
    const DpmemLog *log;
    double from, to;              /* window, ns relative to t0 */
    Panel *p;
} Ctx;

static int col_of(const Ctx *c, uint64_t rel) {
    return px_clamp(((double)rel - c->from) * c->p->W / (c->to - c->from), 0, c->p->W - 1);
}

static void emit_scope(Ctx *c, uint32_t slot, int depth, int32_t name, uint64_t b, uint64_t e) {
    Panel *p = c->p;
    if ((double)e < c->from || (double)b > c->to || slot > 0xffffff) return;
    uint32_t key = slot << 8 | (uint32_t)depth;
    int lane = 0;
    while (lane < p->n_lanes && p->lane_key[lane] != key) lane++;
    if (lane == p->n_lanes) {
        if (p->n_lanes == MAX_LANES) return;
        p->lane_key[p->n_lanes++] = key;
    }
    int c0 = col_of(c, b), c1 = col_of(c, e);
    for (int x = c0; x <= c1; x++) p->lane_name[lane * p->W + x] = name;
    if ((double)b >= c->from) p->lane_begin[lane * p->W + c0] = 1;
}

typedef struct { int32_t name; uint64_t ts; } OpenScope;

/* Replays the log. find_top: only per-tag peaks into tag_peak (per string index). */
static int replay(Ctx *c, int find_top, uint64_t *tag_peak) {
    const DpmemLog *L = c->log;
    Panel *p = c->p;
    int S = p->n_series;
    uint64_t *live = calloc((size_t)S + 1, sizeof *live), *tag_live = NULL, total = 0;
    ScopeStacks st = { 0 };
    if (find_top) tag_live = calloc(L->n_strings + 1, sizeof *tag_live);
    DpmemIter it;
    int ok = live && (!find_top || tag_live) && scopestacks_init(&st, L->n_threads, sizeof(OpenScope), MAX_DEPTH) == 0 &&
             dpmem_iter_begin(&it, L) == 0;
    if (!ok) { free(live); scopestacks_free(&st); free(tag_live); return -1; }
    int cur = -1, past = 0, oom = 0;
    DpmemEvent e;
    while (dpmem_iter_next(&it, &e)) {
        uint64_t rel = e.ts - L->t0;
        if (!find_top && !past && (double)rel > c->to) {
            for (int x = cur + 1; x < p->W; x++) {
                p->col_total[x] = total;
                memcpy(p->col_break + (size_t)x * S, live, (size_t)S * sizeof *live);
            }
            cur = p->W - 1;
            past = 1;
        }
        int in = !past && (double)rel >= c->from;
        if (!find_top && in) {
            int x = col_of(c, rel);
            for (int k = cur + 1; k <= x; k++) {
                p->col_total[k] = total;
                memcpy(p->col_break + (size_t)k * S, live, (size_t)S * sizeof *live);
            }
            if (x > cur) cur = x;
        }
        switch (e.type) {
        case DPMEM_EV_ALLOC: case DPMEM_EV_FREE: {
            uint64_t bytes = dpmem_ev_u64(&e, 8);
            int32_t si = dpmem_log_string_index(L, e.id);
            if (find_top) {
                if (si < 0) break;
                if (e.type == DPMEM_EV_ALLOC) tag_live[si] += bytes;
                else tag_live[si] -= bytes < tag_live[si] ? bytes : tag_live[si];
                if (tag_live[si] > tag_peak[si]) tag_peak[si] = tag_live[si];
                break;
            }
            int s = si < 0 ? S - 1 : p->series_of[si];
            if (e.type == DPMEM_EV_ALLOC) { live[s] += bytes; total += bytes; }
            else {
                uint64_t d = bytes < live[s] ? bytes : live[s];
                live[s] -= d; total -= d;
            }
            if (in) {
                int x = cur;
                if (total > p->col_total[x]) {
                    p->col_total[x] = total;
                    memcpy(p->col_break + (size_t)x * S, live, (size_t)S * sizeof *live);
                }
                if (total > p->peak) {
                    p->peak = total; p->peak_ns = rel; p->peak_col = x;
                    memcpy(p->peak_break, live, (size_t)S * sizeof *live);
                }
            }
            break;
        }
        case DPMEM_EV_BEGIN: {
            if (find_top) break;
            OpenScope *o = scopestack_push(&st, e.slot, &oom);
            if (o) *o = (OpenScope){ dpmem_log_string_index(L, e.id), rel };
            break;
        }
        case DPMEM_EV_END: {
            OpenScope *o;
            if (find_top || !scopestack_pop(&st, e.slot, (void **)&o)) break;
            if (o) emit_scope(c, e.slot, (int)scopestack_depth(&st, e.slot), o->name, o->ts, rel);
            break;
        }
        case DPMEM_EV_SNAPSHOT:
            if (!find_top && in && p->n_snaps < MAX_SNAPS) {
                p->snap_col[p->n_snaps] = cur;
                p->snap_label[p->n_snaps++] = dpmem_log_string(L, e.id);
            }
            if (!find_top && in && p->dev_first && dpmem_ev_u64(&e, 8) > 0) {   /* device_total > 0 */
                uint64_t used = dpmem_ev_u64(&e, 0);
                int x = cur;
                if (p->dev_first[x] == UINT64_MAX) {
                    p->dev_first[x] = p->dev_lo[x] = p->dev_hi[x] = used;
                    p->n_dev_cols++;
                }
                if (used < p->dev_lo[x]) p->dev_lo[x] = used;
                if (used > p->dev_hi[x]) p->dev_hi[x] = used;
                p->dev_last[x] = used;
                if (used > p->dev_max) p->dev_max = used;
                p->n_dev++;
            }
            break;
        default: break;
        }
    }
    dpmem_iter_end(&it);
    if (oom || dpmem_log_error(L)) { free(live); scopestacks_free(&st); free(tag_live); return -1; }
    if (!find_top) {
        /* Scopes still open at the cut run to the last event. */
        uint64_t end = L->t_last >= L->t0 ? L->t_last - L->t0 : 0;
        for (uint32_t t = 0; t < L->n_threads; t++) {
            uint32_t depth = scopestack_depth(&st, t);
            for (uint32_t d = depth < MAX_DEPTH ? depth : MAX_DEPTH; d-- > 0;) {
                const OpenScope *o = scopestack_at(&st, t, d);
                emit_scope(c, t, (int)d, o->name, o->ts, end);
            }
        }
        /* The peak of the window may be the state the window opens with. */
        if (p->peak == 0)
            for (int x = 0; x < p->W; x++)
                if (p->col_total[x] != UINT64_MAX && p->col_total[x] > p->peak) {
                    p->peak = p->col_total[x]; p->peak_col = x;
                    p->peak_ns = (uint64_t)(c->from + (c->to - c->from) * x / p->W);
                    memcpy(p->peak_break, p->col_break + (size_t)x * S, (size_t)S * sizeof *live);
                }
    }
    free(live); scopestacks_free(&st); free(tag_live);
    return 0;
}

/* Each category's own high-water mark over the whole log (for choosing which ones to draw). */
static int category_peaks(const DpmemLog *L, uint64_t *peak) {
    uint64_t *live = calloc((size_t)L->n_cats + 1, sizeof *live);
    DpmemIter it;
    if (!live || dpmem_iter_begin(&it, L)) { free(live); return -1; }
    DpmemEvent e;
    while (dpmem_iter_next(&it, &e)) {
        if (e.type != DPMEM_EV_ALLOC && e.type != DPMEM_EV_FREE) continue;
        int32_t c = dpmem_log_category(L, e.id);
        uint32_t k = c < 0 ? L->n_cats : (uint32_t)c;
        uint64_t bytes = dpmem_ev_u64(&e, 8);
        if (e.type == DPMEM_EV_ALLOC) live[k] += bytes;
        else live[k] -= bytes < live[k] ? bytes : live[k];
        if (live[k] > peak[k]) peak[k] = live[k];
    }
    dpmem_iter_end(&it);
    free(live);
    return dpmem_log_error(L) ? -1 : 0;
}

static const uint64_t *sort_peaks;   /* for cmp_by_peak: largest first, then the category order */
static int cmp_by_peak(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (sort_peaks[x] != sort_peaks[y]) return sort_peaks[x] < sort_peaks[y] ? 1 : -1;
    return (x > y) - (x < y);
}

static void panel_free(Panel *p) {
    free(p->names); free(p->colour); free(p->series_of); free(p->col_total); free(p->col_break);
    free(p->peak_break); free(p->lane_name); free(p->lane_begin);
    free(p->dev_first); free(p->dev_last); free(p->dev_lo); free(p->dev_hi);
    for (int i = 0; i < p->n_owned; i++) free(p->owned[i]);
    free(p->owned);
    memset(p, 0, sizeof *p);
}

/* "…the end" of a long name, so that the part that tells buffers apart stays. */
static void shorten(char *out, size_t n, const char *s, size_t max) {
    size_t len = strlen(s);
    if (max >= n) max = n - 1;
    if (len <= max) { snprintf(out, n, "%s", s); return; }
    snprintf(out, n, "..%s", s + len - (max - 2));
}

static int tag_order(const DpmemLog *L, int32_t a, int32_t b) {
    int ca = L->cat_of[a], cb = L->cat_of[b];
    if (ca != cb) return ca < 0 ? 1 : cb < 0 ? -1 : (ca > cb) - (ca < cb);
    return strcmp(L->strings[a], L->strings[b]);
}

static int panel_build(Panel *p, const DpmemLog *L, const TimelineOptions *o, double from, double to, int W) {
    memset(p, 0, sizeof *p);
    p->W = W;
    Ctx c = { L, from, to, p };
    uint32_t ns = L->n_strings;
    p->series_of = malloc((ns + 1) * sizeof *p->series_of);
    if (!p->series_of) return -1;
    if (!o->by_name && L->n_cats + 1 <= MAX_SERIES) {
        p->n_series = (int)L->n_cats + 1;   /* + "?" for tags whose STRING was lost */
        p->names = malloc((size_t)p->n_series * sizeof *p->names);
        if (!p->names) return -1;
        for (uint32_t i = 0; i < L->n_cats; i++) p->names[i] = L->cats[i];
        p->names[L->n_cats] = "?";
        for (uint32_t i = 0; i < ns; i++) p->series_of[i] = L->cat_of[i] >= 0 ? L->cat_of[i] : (int32_t)L->n_cats;
    } else if (!o->by_name) {   /* too many categories to stack: the largest by their own peak, "other", "?" */
        uint64_t *peak = calloc((size_t)L->n_cats + 1, sizeof *peak);
        int32_t *series_of_cat = malloc(((size_t)L->n_cats + 1) * sizeof *series_of_cat);
        p->names = malloc(MAX_SERIES * sizeof *p->names);
        if (!peak || !series_of_cat || !p->names || category_peaks(L, peak)) { free(peak); free(series_of_cat); return -1; }
        for (uint32_t i = 0; i < L->n_cats; i++) series_of_cat[i] = -1;
        int top = MAX_SERIES - 2, n_chosen = 0;
        int32_t *order = malloc((size_t)L->n_cats * sizeof *order);
        if (!order) { free(peak); free(series_of_cat); return -1; }
        for (uint32_t i = 0; i < L->n_cats; i++) order[i] = (int32_t)i;
        sort_peaks = peak;
        qsort(order, L->n_cats, sizeof *order, cmp_by_peak);
        for (uint32_t i = 0; i < L->n_cats && n_chosen < top; i++)
            if (peak[order[i]]) series_of_cat[order[i]] = n_chosen++;
        free(order);
        n_chosen = 0;   /* stacked in the categories' order, as without the cut */
        for (uint32_t i = 0; i < L->n_cats; i++)
            if (series_of_cat[i] >= 0) { series_of_cat[i] = n_chosen; p->names[n_chosen++] = L->cats[i]; }
        p->names[n_chosen] = "other";
        p->names[n_chosen + 1] = "?";
        p->n_series = n_chosen + 2;
        for (uint32_t i = 0; i < L->n_cats; i++) if (series_of_cat[i] < 0) series_of_cat[i] = n_chosen;
        for (uint32_t i = 0; i < ns; i++) p->series_of[i] = L->cat_of[i] >= 0 ? series_of_cat[L->cat_of[i]] : n_chosen + 1;
        free(peak); free(series_of_cat);
    } else {
        uint64_t *tag_peak = calloc(ns + 1, sizeof *tag_peak);
        if (!tag_peak || replay(&c, 1, tag_peak)) { free(tag_peak); return -1; }
        int top = o->top_n > 0 ? o->top_n : 8;
        p->names = malloc((size_t)(top + 1) * sizeof *p->names);
        p->owned = malloc((size_t)(top + 1) * sizeof *p->owned);
        if (!p->names || !p->owned) { free(tag_peak); return -1; }
        for (uint32_t i = 0; i < ns; i++) p->series_of[i] = -1;
        int32_t chosen[64];
        int n_chosen = 0;
        while (n_chosen < top && n_chosen < 64) {   /* top-N by selection: N is small */
            int32_t best = -1;
            for (uint32_t i = 0; i < ns; i++)
                if (tag_peak[i] && p->series_of[i] < 0 && (best < 0 || tag_peak[i] > tag_peak[best])) best = (int32_t)i;
            if (best < 0) break;
            p->series_of[best] = 0;
            chosen[n_chosen++] = best;
        }
        free(tag_peak);
        /* stacked in category order (params at the bottom), then by name: the picture keeps the
           same layering as --by category */
        for (int i = 1; i < n_chosen; i++)
            for (int j = i; j > 0 && tag_order(L, chosen[j - 1], chosen[j]) > 0; j--) {
                int32_t t = chosen[j]; chosen[j] = chosen[j - 1]; chosen[j - 1] = t;
            }
        for (int i = 0; i < n_chosen; i++) {
            p->series_of[chosen[i]] = p->n_series;
            p->names[p->n_series++] = L->strings[chosen[i]];
        }
        for (uint32_t i = 0; i < ns; i++)
            if (p->series_of[i] < 0) p->series_of[i] = p->n_series;
        p->names[p->n_series++] = "other";
    }
    int S = p->n_series;
    p->colour = malloc((size_t)S * sizeof *p->colour);
    p->col_total = malloc((size_t)W * sizeof *p->col_total);
    p->col_break = calloc((size_t)W * S, sizeof *p->col_break);
    p->peak_break = calloc((size_t)S, sizeof *p->peak_break);
    p->lane_name = malloc((size_t)MAX_LANES * W * sizeof *p->lane_name);
    p->lane_begin = calloc((size_t)MAX_LANES * W, 1);
    if (!p->colour || !p->col_total || !p->col_break || !p->peak_break || !p->lane_name || !p->lane_begin) return -1;
    if (!o->no_device_line) {
        p->dev_first = malloc((size_t)W * sizeof *p->dev_first);
        p->dev_last = malloc((size_t)W * sizeof *p->dev_last);
        p->dev_lo = malloc((size_t)W * sizeof *p->dev_lo);
        p->dev_hi = malloc((size_t)W * sizeof *p->dev_hi);
        if (!p->dev_first || !p->dev_last || !p->dev_lo || !p->dev_hi) return -1;
        for (int x = 0; x < W; x++) p->dev_first[x] = p->dev_last[x] = p->dev_lo[x] = p->dev_hi[x] = UINT64_MAX;
    }
    for (int s = 0; s < S; s++) {
        const char *n = p->names[s];
        if (!o->by_name) p->colour[s] = strcmp(n, "?") == 0 ? RGB(90, 90, 90) : s == S - 2 && strcmp(n, "other") == 0 ? RGB(190, 190, 190) : category_colour(n);
        else if (s == S - 1) p->colour[s] = RGB(190, 190, 190);
        else p->colour[s] = buffer_colour(n);
    }
    for (int x = 0; x < W; x++) p->col_total[x] = UINT64_MAX;
    for (int i = 0; i < MAX_LANES * W; i++) p->lane_name[i] = -1;
    if (replay(&c, 0, NULL)) return -1;
    /* lanes in thread, then depth order */
    for (int i = 1; i < p->n_lanes; i++)
        for (int j = i; j > 0 && p->lane_key[j - 1] > p->lane_key[j]; j--) {
            uint32_t k = p->lane_key[j]; p->lane_key[j] = p->lane_key[j - 1]; p->lane_key[j - 1] = k;
            for (int x = 0; x < W; x++) {
                int32_t a = p->lane_name[j * W + x]; p->lane_name[j * W + x] = p->lane_name[(j - 1) * W + x]; p->lane_name[(j - 1) * W + x] = a;
                uint8_t b = p->lane_begin[j * W + x]; p->lane_begin[j * W + x] = p->lane_begin[(j - 1) * W + x]; p->lane_begin[(j - 1) * W + x] = b;
            }
        }
    return 0;
}

/* The device-used line is clipped to the plot rectangle, columns [x0, x1) and rows [y0, y1), so that
   the axes stay whole. Every pixel is a function of integers the tests can recompute. */
static void plot_fill(Image *im, const Axes *a, int x0, int y0, int x1, int y1, Rgb c) {
    if (x0 < a->x0) x0 = a->x0;
    if (x1 > a->x1) x1 = a->x1;
    if (y0 < a->y0) y0 = a->y0;
    if (y1 > a->y1) y1 = a->y1;
    if (x0 < x1 && y0 < y1) fill_rect(im, x0, y0, x1, y1, c);
}

/* A marker: a (2r+1)-pixel square in the line's colour, in a 1-pixel white ring when ring is set. */
static void device_marker(Image *im, const Axes *a, int x, int y, int r, int ring) {
    if (ring) plot_fill(im, a, x - r - 1, y - r - 1, x + r + 2, y + r + 2, COLOUR_BG);
    plot_fill(im, a, x - r, y - r, x + r + 1, y + r + 1, COLOUR_DEVICE);
}

/* A segment from (xa, ya) to (xb, yb), xb > xa: in column x the row ya + round((yb - ya)(x - xa) / (xb - xa))
   (halves away from zero), joined to the previous column's row by a vertical run, 2 pixels thick
   (that row and the one above it). */
static void device_segment(Image *im, const Axes *a, int xa, int ya, int xb, int yb) {
    long long d = xb - xa;
    int yprev = ya;
    for (int x = xa; x <= xb; x++) {
        long long n = (long long)(yb - ya) * (x - xa);
        int y = ya + (int)(n >= 0 ? (2 * n + d) / (2 * d) : -((-2 * n + d) / (2 * d)));
        int lo = y < yprev ? y : yprev, hi = y < yprev ? yprev : y;
        plot_fill(im, a, x, lo - 1, x + 1, hi + 1, COLOUR_DEVICE);
        yprev = y;
    }
}

/* device_used at each snapshot that has device figures, as markers joined by straight segments.
   Straight, not steps: cudaMemGetInfo is sampled only at the snapshots, and between two of them the
   device's use rises and falls with every allocation (the stacked areas show how much). A step would
   claim the value held still until the next snapshot and then jumped, which the log does not say;
   a straight segment only links one sample to the next, and the markers show where the samples are.
   Several snapshots in one column: a vertical run from the smallest to the largest, entered at the
   first and left at the last, with a marker at each end. More than one snapshot per 10 columns:
   the markers shrink to 3x3 (no ring), or they would merge into a band. */
static void draw_device_line(Image *im, const Panel *p, const Axes *a) {
    int prev = -1, yprev = 0, dense = p->n_dev_cols * 10 > p->W;
    for (int x = 0; x < p->W; x++) {
        if (p->dev_first[x] == UINT64_MAX) continue;
        int X = a->x0 + x;
        if (prev >= 0) device_segment(im, a, a->x0 + prev, yprev, X, axes_y(a, (double)p->dev_first[x]));
        plot_fill(im, a, X, axes_y(a, (double)p->dev_hi[x]) - 1, X + 1, axes_y(a, (double)p->dev_lo[x]) + 1, COLOUR_DEVICE);
        prev = x;
        yprev = axes_y(a, (double)p->dev_last[x]);
    }
    for (int x = 0; x < p->W; x++) {
        if (p->dev_first[x] == UINT64_MAX) continue;
        device_marker(im, a, a->x0 + x, axes_y(a, (double)p->dev_lo[x]), dense ? 1 : 3, !dense);
        if (p->dev_hi[x] != p->dev_lo[x]) device_marker(im, a, a->x0 + x, axes_y(a, (double)p->dev_hi[x]), dense ? 1 : 3, !dense);
    }
}

static void title_of(char *out, size_t n, const DpmemLog *L) {
    char name[128];
    size_t k = (size_t)snprintf(out, n, "%s", dpmem_log_run_name(L, name, sizeof name));
    const char *sep = "  ";
    for (uint32_t i = 0; i < L->n_meta && k < n; i++) {
        const char *key = dpmem_log_string(L, L->meta[i].key);
        if (strncmp(key, "config.", 7) != 0 || dpmem_log_meta(L, key) != dpmem_log_string(L, L->meta[i].value)) continue;
        k += (size_t)snprintf(out + k, n - k, "%s%s=%s", sep, key + 7, dpmem_log_string(L, L->meta[i].value));
        sep = ", ";
    }
}

int timeline_render(const DpmemLog *logs, int n_logs, const TimelineOptions *o, const char *path, char *err, size_t errlen) {
    const int left = 110, legend_w = 360;
    int W = o->width - left - legend_w - 20;
    if (n_logs < 1) { snprintf(err, errlen, "no log to draw"); return -1; }
    if (W < 100 || o->height < 200 * n_logs || o->height > 16384 || o->width > 16384) {
        snprintf(err, errlen, "image %dx%d is too small (or too large) for %d panel(s): at least %dx%d",
                 o->width, o->height, n_logs, left + legend_w + 120, 200 * n_logs);
        return -1;
    }
    double from = o->from_ns, to = o->to_ns;
    if (!(to > from)) {
        from = 0; to = 0;
        for (int i = 0; i < n_logs; i++) {
            double span = logs[i].t_last > logs[i].t0 && logs[i].t_last != 0 ? (double)(logs[i].t_last - logs[i].t0) : 0;
            if (span > to) to = span;
        }
        if (to <= 0) to = 1;
        to *= 1.0 + 0.5 / W;   /* the last event lands inside the last column */
    }
    Panel *P = calloc((size_t)n_logs, sizeof *P);
    if (!P) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = 0;
    for (int i = 0; i < n_logs && rc == 0; i++)
        if (panel_build(&P[i], &logs[i], o, from, to, W)) {
            snprintf(err, errlen, "%s", dpmem_log_error(&logs[i]) ? dpmem_log_error(&logs[i]) : "out of memory");
            rc = -1;
        }
    Image im = { 0 };
    if (rc == 0 && image_new(&im, o->width, o->height, COLOUR_BG)) { snprintf(err, errlen, "out of memory"); rc = -1; }
    if (rc) goto out;

    uint64_t maxv = 0;
    for (int i = 0; i < n_logs; i++)
        for (int x = 0; x < W; x++)
            if (P[i].col_total[x] != UINT64_MAX && P[i].col_total[x] > maxv) maxv = P[i].col_total[x];
    for (int i = 0; i < n_logs; i++)   /* the device line is never clipped */
        if (P[i].n_dev_cols && P[i].dev_max > maxv) maxv = P[i].dev_max;
    Axes ax = { .x0 = left, .x1 = left + W };   /* one memory scale for all panels */
    axes_scale(&ax, (double)maxv, 1);
    Unit tu = time_unit(to - from);
    double xstep = nice_step((to - from) / tu.div, 8);

    int panel_h = o->height / n_logs;
    for (int i = 0; i < n_logs; i++) {
        Panel *p = &P[i];
        const DpmemLog *L = &logs[i];
        int top = i * panel_h;
        char buf[512], b2[48], b3[96];
        /* title */
        title_of(buf, sizeof buf, L);
        size_t maxc = (size_t)(o->width - 20) / (6 * TEXT2);
        if (strlen(buf) > maxc && maxc >= 3 && maxc < sizeof buf) strcpy(buf + maxc - 2, "..");
        draw_text(&im, 10, top + 8, buf, TEXT2, COLOUR_TEXT);
        int y = top + 8 + text_height(TEXT2) + 8;
        if (!L->closed || L->corrupt) {
            draw_text(&im, 10, y, L->corrupt ? "corrupt log: drawn up to the first bad byte"
                                             : "not closed cleanly: drawn up to the cut", 1, COLOUR_PEAK);
            y += 10;
        }
        /* scope lanes */
        int lanes_y = y;
        for (int l = 0; l < p->n_lanes; l++) {
            int ly = lanes_y + l * LANE_H;
            uint32_t slot = p->lane_key[l] >> 8;
            char lab[64];
            if (L->n_threads > 1) snprintf(lab, sizeof lab, "T%u %s", L->threads[slot].index, L->threads[slot].name);
            else snprintf(lab, sizeof lab, "scopes");
            if (l > 0 && p->lane_key[l - 1] >> 8 == slot) lab[0] = 0;   /* a deeper lane of the same thread */
            shorten(b2, sizeof b2, lab, 17);
            draw_text(&im, 4, ly + 4, b2, 1, COLOUR_MUTED);
            for (int x = 0; x < W;) {
                int32_t nm = p->lane_name[l * W + x];
                int x1 = x + 1;
                while (x1 < W && p->lane_name[l * W + x1] == nm && !p->lane_begin[l * W + x1]) x1++;
                if (nm >= 0) {
                    const char *name = L->strings[nm];
                    fill_rect(&im, left + x, ly, left + x1, ly + LANE_H - 2, scope_colour(name));
                    if (x1 - x >= 3 && p->lane_begin[l * W + x]) vline(&im, left + x, ly, ly + LANE_H - 3, COLOUR_BG);
                    if (text_width(name, 1) + 6 <= x1 - x)
                        draw_text(&im, left + x + (x1 - x - text_width(name, 1)) / 2, ly + 4, name, 1, COLOUR_TEXT);
                }
                x = x1;
            }
            if (o->verbose) printf("lane %d %d %d %d\n", i, l, ly, ly + LANE_H - 2);
        }
        y = lanes_y + p->n_lanes * LANE_H + 4;
        int peak_row = y;
        int py0 = peak_row + text_height(TEXT2) + 8;
        int py1 = top + panel_h - 44;   /* exclusive; below: ticks and their labels */
        if (py1 - py0 < 40) { snprintf(err, errlen, "image too small for %d scope lanes: make it taller (--size)", p->n_lanes); rc = -1; goto out; }
        ax.y0 = py0; ax.y1 = py1;
        axes_draw_y(&im, &ax);
        /* stacked areas */
        for (int x = 0; x < W; x++) {
            if (p->col_total[x] == UINT64_MAX) continue;
            uint64_t cum = 0;
            for (int s = 0; s < p->n_series; s++) {
                uint64_t b = p->col_break[(size_t)x * p->n_series + s];
                if (!b) continue;
                int lo = axes_h(&ax, (double)cum);
                cum += b;
                int hi = axes_h(&ax, (double)cum);
                fill_rect(&im, left + x, py1 - hi, left + x + 1, py1 - lo, p->colour[s]);
            }
        }
        /* snapshots */
        int last_label_end = -1000;
        int dense = p->n_snaps * 8 > W;   /* many snapshots: short ticks at the top, not lines across the plot */
        for (int s = 0; s < p->n_snaps; s++) {
            int x = left + p->snap_col[s];
            if (dense) { vline(&im, x, py0, py0 + 5, COLOUR_SNAP); continue; }
            for (int yy = py0; yy < py1; yy += 3) fill_rect(&im, x, yy, x + 1, yy + 1, COLOUR_SNAP);
            int tw = text_width(p->snap_label[s], 1);
            int tx = x + 3 + tw < left + W ? x + 3 : x - 3 - tw;   /* right of the mark, else left */
            if (tx > last_label_end + 6 && tx >= left) {
                draw_text(&im, tx, py0 + 2, p->snap_label[s], 1, COLOUR_SNAP);
                last_label_end = tx + tw;
            }
        }
        /* time axis */
        double first = ceil(from / tu.div / xstep - 1e-9) * xstep;
        for (double t = first; t * tu.div <= to; t += xstep) {
            int x = left + px_clamp((t * tu.div - from) * W / (to - from), 0, W - 1);
            vline(&im, x, py1, py1 + 5, COLOUR_AXIS);
            fmt_tick(b2, sizeof b2, t, xstep);
            int tw = text_width(b2, TEXT2);
            draw_text(&im, x - tw / 2, py1 + 9, b2, TEXT2, COLOUR_TEXT);
        }
        snprintf(b3, sizeof b3, "time (%s)", tu.name);
        draw_text(&im, left + W - text_width(b3, TEXT2), py1 + 9 + text_height(TEXT2) + 6, b3, TEXT2, COLOUR_MUTED);
        /* peak */
        if (p->peak) {
            int x = left + p->peak_col;
            dashed_vline(&im, x, peak_row + text_height(TEXT2) + 2, axes_y(&ax, (double)p->peak) - 1, COLOUR_PEAK);
            snprintf(buf, sizeof buf, "peak %s at %s", fmt_bytes(b2, sizeof b2, (double)p->peak), fmt_time(b3, sizeof b3, (double)p->peak_ns));
            int tw = text_width(buf, TEXT2);
            int tx = x - tw / 2;
            if (tx < left) tx = left;
            if (tx + tw > left + W) tx = left + W - tw;
            draw_text(&im, tx, peak_row, buf, TEXT2, COLOUR_PEAK);
        }
        /* device used */
        if (p->n_dev_cols) draw_device_line(&im, p, &ax);
        /* legend: the device line (with its largest value), then the series with their bytes at the peak */
        int lx = left + W + 20, ly = py0;
        if (p->n_dev_cols) {
            fill_rect(&im, lx, ly + 6, lx + 15, ly + 8, COLOUR_DEVICE);   /* a piece of line with a marker */
            fill_rect(&im, lx + 3, ly + 3, lx + 12, ly + 12, COLOUR_BG);
            fill_rect(&im, lx + 4, ly + 4, lx + 11, ly + 11, COLOUR_DEVICE);
            draw_text(&im, lx + 20, ly + 1, "device used", TEXT2, COLOUR_TEXT);
            fmt_bytes(b2, sizeof b2, (double)p->dev_max);
            draw_text(&im, o->width - 10 - text_width(b2, TEXT2), ly + 1, b2, TEXT2, COLOUR_TEXT);
            ly += text_height(TEXT2) + 5;
            draw_text(&im, lx + 20, ly, "(cudaMemGetInfo), largest", 1, COLOUR_MUTED);
            ly += text_height(1) + 14;
        }
        draw_text(&im, lx, ly, "at peak:", TEXT2, COLOUR_TEXT);
        ly += text_height(TEXT2) + 8;
        int lh = text_height(TEXT2) + 6;
        for (int s = p->n_series - 1; s >= 0; s--) {   /* top of the stack first, as drawn */
            int any = 0;
            for (int x = 0; x < W && !any; x++) any = p->col_total[x] != UINT64_MAX && p->col_break[(size_t)x * p->n_series + s];
            if (!any && !p->peak_break[s]) continue;
            if (ly + lh > top + panel_h - 4) { draw_text(&im, lx, ly, "...", TEXT2, COLOUR_MUTED); break; }
            fill_rect(&im, lx, ly, lx + 14, ly + 14, p->colour[s]);
            shorten(b3, sizeof b3, p->names[s], 16);
            fmt_bytes(b2, sizeof b2, (double)p->peak_break[s]);
            draw_text(&im, lx + 20, ly + 1, b3, TEXT2, COLOUR_TEXT);
            draw_text(&im, o->width - 10 - text_width(b2, TEXT2), ly + 1, b2, TEXT2, COLOUR_TEXT);
            ly += lh;
        }
        if (o->verbose)
            printf("panel %d plot %d %d %d %d ymax %.0f from %.0f to %.0f peak %llu col %d lanes %d\n", i, left, py0,
                   left + W, py1, ax.ymax, from, to, (unsigned long long)p->peak, p->peak_col, p->n_lanes);
        if (o->verbose && p->n_dev_cols)
            printf("device %d snapshots %d max %llu legend %d %d\n", i, p->n_dev, (unsigned long long)p->dev_max, lx, py0);
        if (i + 1 < n_logs) hline(&im, 0, o->width - 1, top + panel_h - 1, COLOUR_GRID);
    }
    if (path && image_write_png(&im, path)) { snprintf(err, errlen, "%s: cannot write the PNG", path); rc = -1; }
out:
    image_free(&im);
    for (int i = 0; i < n_logs; i++) panel_free(&P[i]);
    free(P);
    return rc;
}
