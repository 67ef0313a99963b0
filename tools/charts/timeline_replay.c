/* timeline_replay.c — see timeline_replay.h. */
#include "timeline_replay.h"

#include <stdlib.h>
#include <string.h>

#include "palette.h"
#include "read/scopestack.h"

#define MAX_DEPTH 64
#define MAX_SERIES 24             /* --by category: with more categories than this, the 22 largest by
                                     their own peak are drawn, then "other" and "?" (a legend holds ~20) */

typedef struct {
    const DpmemLog *log;
    double from, to;              /* window, ns (or events) relative to t0 */
    int events;
    uint64_t ord;                 /* ALLOC/FREE events seen so far */
    Panel *p;
} Ctx;

double panel_span(const DpmemLog *L, int events) {
    if (events) return (double)(L->count[DPMEM_EV_ALLOC] + L->count[DPMEM_EV_FREE]);
    return L->t_last > L->t0 && L->t_last != 0 ? (double)(L->t_last - L->t0) : 0;
}

double panel_lead_in(const DpmemLog *L) {
    DpmemIter it;
    DpmemEvent e;
    double lead = 0;
    if (dpmem_iter_begin(&it, L) != 0) return 0;
    while (dpmem_iter_next(&it, &e)) {   /* in timestamp order: the first one drawn ends the search */
        if (e.type == DPMEM_EV_BEGIN || e.type == DPMEM_EV_ALLOC || e.type == DPMEM_EV_FREE || e.type == DPMEM_EV_SNAPSHOT ||
            e.type == DPMEM_EV_OOM || e.type == DPMEM_EV_DEVICE) {
            lead = e.ts > L->t0 ? (double)(e.ts - L->t0) : 0;
            break;
        }
    }
    dpmem_iter_end(&it);
    return lead;
}

static int col_of(const Ctx *c, uint64_t rel) {
    double v = ((double)rel - c->from) * c->p->W / (c->to - c->from);
    if (!(v >= 0)) return 0;   /* also NaN */
    return v >= c->p->W - 1 ? c->p->W - 1 : (int)v;
}

static void emit_scope(Ctx *c, uint32_t track, int depth, int32_t name, uint64_t b, uint64_t e) {
    Panel *p = c->p;
    if ((double)e < c->from || (double)b > c->to || track > 0xffffff || depth > 0xff) return;
    uint32_t key = track << 8 | (uint32_t)depth;
    int lane = 0;
    while (lane < p->n_lanes && p->lane_key[lane] != key) lane++;
    if (lane == p->n_lanes) {
        if (p->n_lanes == TL_MAX_LANES) return;
        p->lane_key[p->n_lanes++] = key;
    }
    int c0 = col_of(c, b), c1 = col_of(c, e);
    for (int x = c0; x <= c1; x++) {   /* a column another scope had: its begins are not this one's */
        if (p->lane_name[lane * p->W + x] != name) p->lane_begin[lane * p->W + x] = 0;
        p->lane_name[lane * p->W + x] = name;
    }
    uint8_t *begins = &p->lane_begin[lane * p->W + c0];
    if ((double)b >= c->from && *begins < 255) (*begins)++;
}

typedef struct { int32_t name; uint64_t at; uint32_t track; } OpenScope;

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
             (find_top || tracks_init(&p->tracks, L) == 0) && dpmem_iter_begin(&it, L) == 0;
    if (!ok) { free(live); scopestacks_free(&st); free(tag_live); return -1; }
    int cur = -1, past = 0, oom = 0;
    c->ord = 0;
    DpmemEvent e;
    while (dpmem_iter_next(&it, &e)) {
        uint64_t rel = c->events ? c->ord : e.ts - L->t0;
        uint32_t track = find_top ? 0 : tracks_event(&p->tracks, &e);
        if (track == UINT32_MAX) { oom = 1; break; }
        if (e.type == DPMEM_EV_ALLOC || e.type == DPMEM_EV_FREE) c->ord++;
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
                if (e.type == DPMEM_EV_ALLOC) { if (tag_live[si] + bytes >= tag_live[si]) tag_live[si] += bytes; }
                else tag_live[si] -= bytes < tag_live[si] ? bytes : tag_live[si];
                if (tag_live[si] > tag_peak[si]) tag_peak[si] = tag_live[si];
                break;
            }
            int s = si < 0 ? S - 1 : p->series_of[si];
            if (e.type == DPMEM_EV_ALLOC) {
                if (total + bytes < total) { p->too_large++; break; }   /* past 2^64: a forged or corrupt log, as the report says */
                live[s] += bytes; total += bytes;
            } else {
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
                    p->peak = total; p->peak_at = rel; p->peak_col = x;
                    memcpy(p->peak_break, live, (size_t)S * sizeof *live);
                }
            }
            break;
        }
        case DPMEM_EV_BEGIN: {
            if (find_top) break;
            OpenScope *o = scopestack_push(&st, e.slot, &oom);
            if (o) *o = (OpenScope){ dpmem_log_string_index(L, e.id), rel, track };
            break;
        }
        case DPMEM_EV_END: {
            OpenScope *o;
            if (find_top || !scopestack_pop(&st, e.slot, (void **)&o)) break;
            if (o) emit_scope(c, o->track, (int)scopestack_depth(&st, e.slot), o->name, o->at, rel);
            break;
        }
        case DPMEM_EV_SNAPSHOT:
            if (!find_top && in && p->n_snaps < TL_MAX_SNAPS) {
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
        case DPMEM_EV_OOM:
            if (!find_top && in && !p->has_oom) {
                p->has_oom = 1;
                p->oom_col = cur;
                p->oom_at = rel;
                p->oom_live = total;
                p->oom_request = dpmem_ev_u64(&e, 0);
                p->oom_tag = dpmem_log_string(L, e.id);
            }
            break;
        default: break;
        }
    }
    dpmem_iter_end(&it);
    if (oom || dpmem_log_error(L)) { free(live); scopestacks_free(&st); free(tag_live); return -1; }
    if (!find_top) {
        /* Scopes still open at the cut run to the last event. */
        uint64_t end = c->events ? c->ord : L->t_last >= L->t0 ? L->t_last - L->t0 : 0;
        for (uint32_t t = 0; t < L->n_threads; t++) {
            uint32_t depth = scopestack_depth(&st, t);
            for (uint32_t d = depth < MAX_DEPTH ? depth : MAX_DEPTH; d-- > 0;) {
                const OpenScope *o = scopestack_at(&st, t, d);
                emit_scope(c, o->track, (int)d, o->name, o->at, end);
            }
        }
        /* The peak of the window may be the state the window opens with. */
        if (p->peak == 0)
            for (int x = 0; x < p->W; x++)
                if (p->col_total[x] != UINT64_MAX && p->col_total[x] > p->peak) {
                    p->peak = p->col_total[x]; p->peak_col = x;
                    p->peak_at = (uint64_t)(c->from + (c->to - c->from) * x / p->W);
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
        if (e.type == DPMEM_EV_ALLOC) { if (live[k] + bytes >= live[k]) live[k] += bytes; }
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

void panel_free(Panel *p) {
    free(p->names); free(p->colour); free(p->series_of); free(p->col_total); free(p->col_break);
    free(p->peak_break); free(p->lane_name); free(p->lane_begin);
    tracks_free(&p->tracks);
    free(p->dev_first); free(p->dev_last); free(p->dev_lo); free(p->dev_hi);
    for (int i = 0; i < p->n_owned; i++) free(p->owned[i]);
    free(p->owned);
    memset(p, 0, sizeof *p);
}

static int tag_order(const DpmemLog *L, int32_t a, int32_t b) {
    int ca = L->cat_of[a], cb = L->cat_of[b];
    if (ca != cb) return ca < 0 ? 1 : cb < 0 ? -1 : (ca > cb) - (ca < cb);
    return strcmp(L->strings[a], L->strings[b]);
}

/* Series by category: every category and "?" when they fit, else the largest, "other" and "?". */
static int series_by_category(Panel *p, const DpmemLog *L) {
    uint32_t ns = L->n_strings;
    if (L->n_cats + 1 <= MAX_SERIES) {
        p->n_series = (int)L->n_cats + 1;   /* + "?" for tags whose STRING was lost */
        p->names = malloc((size_t)p->n_series * sizeof *p->names);
        if (!p->names) return -1;
        for (uint32_t i = 0; i < L->n_cats; i++) p->names[i] = L->cats[i];
        p->names[L->n_cats] = "?";
        for (uint32_t i = 0; i < ns; i++) p->series_of[i] = L->cat_of[i] >= 0 ? L->cat_of[i] : (int32_t)L->n_cats;
        return 0;
    }
    uint64_t *peak = calloc((size_t)L->n_cats + 1, sizeof *peak);
    int32_t *series_of_cat = malloc(((size_t)L->n_cats + 1) * sizeof *series_of_cat);
    int32_t *order = malloc((size_t)L->n_cats * sizeof *order);
    p->names = malloc(MAX_SERIES * sizeof *p->names);
    if (!peak || !series_of_cat || !order || !p->names || category_peaks(L, peak)) { free(peak); free(series_of_cat); free(order); return -1; }
    for (uint32_t i = 0; i < L->n_cats; i++) { series_of_cat[i] = -1; order[i] = (int32_t)i; }
    int top = MAX_SERIES - 2, n_chosen = 0;
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
    return 0;
}

/* Series by buffer: the top_n tags by their own peak, stacked in category order (params at the
   bottom), then by name, so the picture keeps the layering of --by category; the rest "other". */
static int series_by_name(Panel *p, Ctx *c, int top_n) {
    const DpmemLog *L = c->log;
    uint32_t ns = L->n_strings;
    uint64_t *tag_peak = calloc(ns + 1, sizeof *tag_peak);
    if (!tag_peak || replay(c, 1, tag_peak)) { free(tag_peak); return -1; }
    int top = top_n > 0 ? top_n : 8;
    p->names = malloc((size_t)(top + 1) * sizeof *p->names);
    if (!p->names) { free(tag_peak); return -1; }
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
    return 0;
}

int panel_build(Panel *p, const DpmemLog *L, int by_name, int top_n, int device_line, int events, double from, double to, int W) {
    memset(p, 0, sizeof *p);
    p->W = W;
    p->events = events;
    p->from = from;
    p->to = to;
    Ctx c = { L, from, to, events, 0, p };
    p->series_of = malloc((L->n_strings + 1) * sizeof *p->series_of);
    if (!p->series_of) return -1;
    if (by_name ? series_by_name(p, &c, top_n) : series_by_category(p, L)) return -1;
    int S = p->n_series;
    p->colour = malloc((size_t)S * sizeof *p->colour);
    p->col_total = malloc((size_t)W * sizeof *p->col_total);
    p->col_break = calloc((size_t)W * S, sizeof *p->col_break);
    p->peak_break = calloc((size_t)S, sizeof *p->peak_break);
    p->lane_name = malloc((size_t)TL_MAX_LANES * W * sizeof *p->lane_name);
    p->lane_begin = calloc((size_t)TL_MAX_LANES * W, 1);
    if (!p->colour || !p->col_total || !p->col_break || !p->peak_break || !p->lane_name || !p->lane_begin) return -1;
    if (device_line) {
        p->dev_first = malloc((size_t)W * sizeof *p->dev_first);
        p->dev_last = malloc((size_t)W * sizeof *p->dev_last);
        p->dev_lo = malloc((size_t)W * sizeof *p->dev_lo);
        p->dev_hi = malloc((size_t)W * sizeof *p->dev_hi);
        if (!p->dev_first || !p->dev_last || !p->dev_lo || !p->dev_hi) return -1;
        for (int x = 0; x < W; x++) p->dev_first[x] = p->dev_last[x] = p->dev_lo[x] = p->dev_hi[x] = UINT64_MAX;
    }
    for (int s = 0; s < S; s++) {
        const char *n = p->names[s];
        int last_other = !strcmp(n, "other") && s == (by_name ? S - 1 : S - 2);
        if (last_other) p->colour[s] = COLOUR_OTHER;
        else if (by_name) p->colour[s] = buffer_colour(s);
        else p->colour[s] = !strcmp(n, "?") && s == S - 1 ? COLOUR_UNKNOWN : category_colour(n);
    }
    for (int x = 0; x < W; x++) p->col_total[x] = UINT64_MAX;
    for (int i = 0; i < TL_MAX_LANES * W; i++) p->lane_name[i] = -1;
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
