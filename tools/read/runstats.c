/* runstats.c — see runstats.h. One merged pass: ALLOC/FREE replay the accounting (live per category),
   BEGIN/END keep a stack per thread with each scope's start time and live bytes at its start. */
#include "runstats.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scopestack.h"

#define MAX_DEPTH 64

typedef struct { int32_t name; uint64_t ts, live0, seq0; } Open;

/* net + (end - begin), saturating at the int64 range (a forged log's totals can reach 2^64). */
static int64_t net_add(int64_t net, uint64_t end, uint64_t begin) {
    if (end >= begin) {
        uint64_t d = end - begin, room = (uint64_t)INT64_MAX - (uint64_t)net;   /* modulo 2^64: the distance up */
        return d > room ? INT64_MAX : (int64_t)((uint64_t)net + d);
    }
    uint64_t d = begin - end, room = (uint64_t)net - (uint64_t)INT64_MIN;        /* the distance down */
    return d > room ? INT64_MIN : (int64_t)((uint64_t)net - d);
}

uint64_t runstats_at_peak(const RunStats *r, const char *cat) {
    int32_t c = dpmem_log_category_index(r->log, cat);
    return c < 0 ? 0 : r->at_peak[c];
}

double runstats_step_mean_ns(const RunStats *r) { return r->no_time ? 0 : r->step.mean; }
double runstats_step_median_ns(const RunStats *r) { return r->no_time ? 0 : r->step.median; }

void runstats_oom_event(const RunStats *r, uint32_t i, DpmemEvent *e) {
    const uint8_t *ev = r->oom[i];
    uint32_t head = (uint32_t)ev[0] | (uint32_t)ev[1] << 8 | (uint32_t)ev[2] << 16 | (uint32_t)ev[3] << 24;
    uint64_t ts = 0;
    for (int k = 7; k >= 0; k--) ts = ts << 8 | ev[8 + k];
    *e = (DpmemEvent){ .type = head & 0xff, .aux = (head >> 8) & 0xff,
                       .id = (uint32_t)ev[4] | (uint32_t)ev[5] << 8 | (uint32_t)ev[6] << 16 | (uint32_t)ev[7] << 24,
                       .ts = ts, .p = ev + 16, .n = r->oom_bytes[i] - 16 };
}

static int cmp_buffer(const void *a, const void *b) {
    const BufferStats *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return (x->tag > y->tag) - (x->tag < y->tag);
}

/* The largest total since any past allocation: totals after each ALLOC, kept as a stack whose
   values strictly decrease from bottom to top (a later, larger total hides every smaller one before
   it). The largest total after allocation number s is the first entry with seq > s. */
typedef struct { uint64_t *seq, *val; uint64_t n, cap; } MaxStack;
static int maxstack_push(MaxStack *m, uint64_t seq, uint64_t v) {
    while (m->n && m->val[m->n - 1] <= v) m->n--;
    if (m->n == m->cap) {
        uint64_t nc = m->cap ? 2 * m->cap : 256;
        uint64_t *s = realloc(m->seq, nc * sizeof *s);
        if (s) m->seq = s;
        uint64_t *w = realloc(m->val, nc * sizeof *w);
        if (w) m->val = w;
        if (!s || !w) return -1;
        m->cap = nc;
    }
    m->seq[m->n] = seq; m->val[m->n++] = v;
    return 0;
}
static uint64_t maxstack_since(const MaxStack *m, uint64_t seq, uint64_t floor) {
    uint64_t lo = 0, hi = m->n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (m->seq[mid] <= seq) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n && m->val[lo] > floor ? m->val[lo] : floor;
}

/* Per-step times of the scopes inside the step scope: slot k holds a scope's total in each step. */
typedef struct {
    int32_t name[RS_MAX_PHASES];
    double cur[RS_MAX_PHASES];          /* this step's total so far, ns */
    double *v[RS_MAX_PHASES];           /* per step */
    uint64_t n[RS_MAX_PHASES], cap[RS_MAX_PHASES];
    int n_slots;
    double *inst[RS_MAX_PHASES];        /* scopes outside the steps: each instance (the first RS_MAX_INSTANCES) */
    int32_t inst_name[RS_MAX_PHASES];
    uint32_t inst_n[RS_MAX_PHASES];
    int n_inst;
} Series;

static int grow_to(double **v, uint64_t *cap, uint64_t need) {
    if (need <= *cap) return 0;
    uint64_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    double *w = realloc(*v, nc * sizeof *w);
    if (!w) return -1;
    *v = w; *cap = nc;
    return 0;
}

/* The step that just ended (index k): each slot's total into v[k] (0 where it did not run). */
static int series_flush(Series *S, uint64_t k) {
    if (k >= RS_MAX_PHASE_STEPS) { for (int i = 0; i < S->n_slots; i++) S->cur[i] = 0; return 0; }
    for (int i = 0; i < S->n_slots; i++) {
        if (grow_to(&S->v[i], &S->cap[i], k + 1)) return -1;
        while (S->n[i] < k) S->v[i][S->n[i]++] = 0;
        S->v[i][S->n[i]++] = S->cur[i];
        S->cur[i] = 0;
    }
    return 0;
}

static int series_instance(Series *S, int32_t *islot, int32_t name, double dur) {
    if (islot[name] < 0) {
        if (S->n_inst == RS_MAX_PHASES) return 0;
        if (!(S->inst[S->n_inst] = malloc(RS_MAX_INSTANCES * sizeof(double)))) return -1;
        S->inst_name[S->n_inst] = name;
        islot[name] = S->n_inst++;
    }
    int k = islot[name];
    if (S->inst_n[k] < RS_MAX_INSTANCES) S->inst[k][S->inst_n[k]] = dur;
    S->inst_n[k]++;
    return 0;
}

static TimeStats stats_from(const double *v, uint64_t n, uint64_t skip, int *oom) {
    TimeStats t = { 0 };
    if (n <= skip) return t;
    double *c = malloc((n - skip) * sizeof *c);
    if (!c) { *oom = 1; return t; }
    memcpy(c, v + skip, (n - skip) * sizeof *c);
    t = timestats_of(c, n - skip);
    free(c);
    return t;
}

static void series_free(Series *S) {
    for (int i = 0; i < RS_MAX_PHASES; i++) { free(S->v[i]); free(S->inst[i]); }
}

/* Per tag: live bytes and counts now, and as they were at the start of epoch mod (the epoch is the
   number of steps ended: a tag touched after the last step's end still tells its value there). */
typedef struct { uint64_t live, allocs, frees, live_e, allocs_e, frees_e, mod; } TagAcc;
typedef struct { uint64_t step, *live, *allocs, *frees; } TagSnap;   /* every tag at the end of a step */
static void tag_touch(TagAcc *t, uint64_t epoch) {
    if (t->mod == epoch) return;
    t->live_e = t->live; t->allocs_e = t->allocs; t->frees_e = t->frees; t->mod = epoch;
}

static int cmp_growth(const void *a, const void *b) {
    const TagGrowth *x = a, *y = b;
    uint64_t gx = x->to - x->from, gy = y->to - y->from;
    if (gx != gy) return gx < gy ? 1 : -1;
    return (x->tag > y->tag) - (x->tag < y->tag);
}
static int cmp_warn(const void *a, const void *b) {
    const WarnStats *x = a, *y = b;
    if (x->first_ts != y->first_ts) return x->first_ts < y->first_ts ? -1 : 1;
    return (x->msg > y->msg) - (x->msg < y->msg);
}

/* The leak check on the live totals E[0..n) at the step ends (E[i]: the end of step i + 1). The
   warm-up bound w is the largest power of two (at least 2) at or below half the steps: the first step
   (which allocates what stays, e.g. optimizer state) and a warm-up of up to w steps come before it. The
   leak begins at the first step end after w that stands above every step end up to w (step k + 1,
   index k), and it goes on to the end when: it begins before the last few steps (4, or all after w
   when fewer follow), every step end in the later half of the steps from k stands above every step
   end up to w, the live total rises at two step ends or more from k (one when a single step follows
   w), and still rises at one in that later half. Measured from the leak's own beginning, so a leak
   that starts late is judged like one that starts early; a warm-up, a plateau (growth that stops for
   as long as it went on), a single allocation, or live bytes that go up and down are not leaks.
   The reference step (*from, 1-based) is the later of w and 2w at or before the leak's beginning: the
   pass keeps every tag's bytes at the end of those two steps (the last two powers of two). */
static int leak_judge(const uint64_t *E, uint64_t n, uint64_t *from) {
    if (n < 3) return 0;
    uint64_t w = 2;
    while (w * 2 <= n / 2) w *= 2;
    uint64_t before = 0, k = w, rises = 0, late_rise = 0, tail_min = UINT64_MAX;
    for (uint64_t i = 0; i < w; i++) if (E[i] > before) before = E[i];
    while (k < n && E[k] <= before) k++;
    uint64_t few = n - w < 4 ? n - w : 4, t0 = k + (n - k) / 2;
    if (k >= n || n - k < few) return 0;
    for (uint64_t i = k; i < n; i++) rises += E[i] > E[i - 1];
    for (uint64_t i = t0; i < n; i++) { if (E[i] < tail_min) tail_min = E[i]; late_rise |= E[i] > E[i - 1]; }
    if (!(tail_min > before && late_rise && rises >= (n - w < 2 ? n - w : 2))) return 0;
    *from = 2 * w <= k ? 2 * w : w;
    return 1;
}

int runstats_compute(RunStats *r, const DpmemLog *L) { return runstats_compute_ex(r, L, -1); }

int runstats_compute_ex(RunStats *r, const DpmemLog *L, int warmup) {
    memset(r, 0, sizeof *r);
    r->log = L;
    r->name = dpmem_log_run_name(L, r->name_buf, sizeof r->name_buf);
    r->span_ns = L->t_last >= L->t0 && L->n_events ? L->t_last - L->t0 : 0;
    uint32_t nc = L->n_cats, ns = L->n_strings;
    r->at_peak = calloc(nc + 1, sizeof *r->at_peak);
    r->cat_peak = calloc(nc + 1, sizeof *r->cat_peak);
    r->scopes = calloc(ns + 1, sizeof *r->scopes);
    uint64_t *live = calloc(nc + 1, sizeof *live), total = 0;
    uint64_t *allocs = calloc(ns + 1, sizeof *allocs), *largest = calloc(ns + 1, sizeof *largest);
    uint32_t *space = calloc(ns + 1, sizeof *space);
    uint64_t *top_count = calloc(ns + 1, sizeof *top_count);   /* instances of depth-0 scopes */
    int32_t *pslot = malloc((ns + 1) * sizeof *pslot), *islot = malloc((ns + 1) * sizeof *islot);
    TagAcc *tags = calloc(ns + 1, sizeof *tags);
    /* Per tag at the end of the last two steps whose number is a power of two (from 2): the leak check's
       reference step is the earlier of them (see below), so two copies are enough in one pass. */
    TagSnap ref[2] = { { 0 }, { 0 } };
    WarnStats *warn_of = calloc(ns + 1, sizeof *warn_of);
    Series ser;
    memset(&ser, 0, sizeof ser);
    ScopeStacks stacks = { 0 };
    MaxStack maxes = { 0 };
    uint64_t seq = 0, open = 0;   /* ALLOC events so far; scopes open now, all threads */
    uint64_t steps_open = 0, steps_ended = 0;
    int ok = r->at_peak && r->cat_peak && r->scopes && live && allocs && largest && space && top_count && pslot && islot &&
             tags && warn_of && scopestacks_init(&stacks, L->n_threads, sizeof(Open), MAX_DEPTH) == 0;
    int oom = 0;
    for (uint32_t i = 0; ok && i <= ns; i++) { pslot[i] = -1; islot[i] = -1; r->scopes[i].min_ns = UINT64_MAX; r->scopes[i].gpu_min_ns = UINT64_MAX; }
    {   /* a plan computed nothing: its times are the planner's own */
        const char *dev = dpmem_log_meta(L, "config.device"), *be = dpmem_log_meta(L, "config.backend");
        r->no_time = (dev && !strcmp(dev, "plan")) || (be && !strcmp(be, "plan"));
        const char *w = dpmem_log_meta(L, "timing.warmup_steps");
        char *end;
        long v = w ? strtol(w, &end, 10) : -1;
        if (warmup >= 0) { r->warmup = warmup; r->warmup_from = "asked"; }
        else if (w && *w && !*end && v >= 0 && v <= 1000000000L) { r->warmup = (int)v; r->warmup_from = "META timing.warmup_steps"; }
        else { r->warmup = -1; r->warmup_from = "default"; }   /* 1 once the steps are counted */
    }

    /* The repeated scope: "step" when the log has one, else the most frequent outermost scope. */
    int32_t step_si = ok ? dpmem_log_find_string(L, "step") : -1;
    DpmemIter it;
    if (ok && dpmem_iter_begin(&it, L) == 0) {
        DpmemEvent e;
        while (!oom && dpmem_iter_next(&it, &e)) {
            uint64_t rel = e.ts - L->t0;
            switch (e.type) {
            case DPMEM_EV_ALLOC: case DPMEM_EV_FREE: {
                uint64_t bytes = dpmem_ev_u64(&e, 8);
                int32_t si = dpmem_log_string_index(L, e.id);
                int32_t c = si < 0 || L->cat_of[si] < 0 ? (int32_t)nc : L->cat_of[si];
                if (si < 0) r->unnamed_events++;
                else {
                    tag_touch(&tags[si], steps_ended);
                    if (e.type == DPMEM_EV_ALLOC) { tags[si].live += bytes; tags[si].allocs++; }
                    else { tags[si].live -= bytes < tags[si].live ? bytes : tags[si].live; tags[si].frees++; }
                }
                if (e.type == DPMEM_EV_ALLOC) {
                    if (total + bytes < total) { r->too_large++; break; }   /* past 2^64: a forged or corrupt log */
                    live[c] += bytes; total += bytes;
                    if (si >= 0) {
                        allocs[si]++;
                        if (bytes > largest[si]) largest[si] = bytes;
                        space[si] = e.aux;
                    }
                    if (live[c] > r->cat_peak[c]) r->cat_peak[c] = live[c];
                    if (total > r->peak) {
                        r->peak = total; r->peak_ts = rel;
                        memcpy(r->at_peak, live, (nc + 1) * sizeof *live);
                    }
                    if (open && maxstack_push(&maxes, ++seq, total)) oom = 1;
                } else {
                    uint64_t d = bytes < live[c] ? bytes : live[c];
                    if (d < bytes) r->unbalanced_frees++;
                    live[c] -= d; total -= d;
                }
                break;
            }
            case DPMEM_EV_BEGIN: {
                Open *o = scopestack_push(&stacks, e.slot, &oom);
                if (o) *o = (Open){ dpmem_log_string_index(L, e.id), rel, total, seq };
                if (!oom) open++;
                if (o && o->name >= 0 && o->name == step_si) steps_open++;
                break;
            }
            case DPMEM_EV_END: {
                Open *o;
                if (!scopestack_pop(&stacks, e.slot, (void **)&o)) break;
                uint64_t max_live = o ? maxstack_since(&maxes, o->seq0, o->live0) : 0;
                if (--open == 0) maxes.n = 0;   /* nothing open: no scope asks about the totals so far */
                if (!o || o->name < 0) break;
                ScopeStats *s = &r->scopes[o->name];
                uint64_t dur = rel >= o->ts ? rel - o->ts : 0;
                s->count++; s->total_ns += dur;
                if (dur > s->max_ns) s->max_ns = dur;
                if (dur < s->min_ns) s->min_ns = dur;
                if (max_live - o->live0 > s->mem_rise) s->mem_rise = max_live - o->live0;
                s->mem_net = net_add(s->mem_net, total, o->live0);
                if (scopestack_depth(&stacks, e.slot) == 0) top_count[o->name]++;
                if (o->name == step_si) {
                    if (!r->step_end_live) r->step_end_live = malloc(RS_MAX_STEPS * sizeof *r->step_end_live);
                    if (!r->step_ns) r->step_ns = malloc(RS_MAX_STEPS * sizeof *r->step_ns);
                    if (!r->step_end_live || !r->step_ns) { oom = 1; break; }
                    if (r->n_steps < RS_MAX_STEPS) { r->step_end_live[r->n_steps] = total; r->step_ns[r->n_steps] = (double)dur; }
                    r->n_steps++;
                    if (series_flush(&ser, steps_ended)) oom = 1;
                    if (steps_open) steps_open--;
                    steps_ended++;
                    if (steps_ended >= 2 && !(steps_ended & (steps_ended - 1)) && steps_ended <= RS_MAX_STEPS) {
                        TagSnap keep = ref[0];   /* the older copy's buffers take the newest values */
                        ref[0] = ref[1];
                        if (!keep.live) {
                            keep.live = malloc((ns + 1) * sizeof *keep.live);
                            keep.allocs = malloc((ns + 1) * sizeof *keep.allocs);
                            keep.frees = malloc((ns + 1) * sizeof *keep.frees);
                        }
                        ref[1] = keep;
                        if (!keep.live || !keep.allocs || !keep.frees) { oom = 1; break; }
                        ref[1].step = steps_ended;
                        for (uint32_t t = 0; t <= ns; t++) { keep.live[t] = tags[t].live; keep.allocs[t] = tags[t].allocs; keep.frees[t] = tags[t].frees; }
                    }
                } else if (steps_open) {      /* inside a step: this step's total of the scope */
                    if (pslot[o->name] < 0 && ser.n_slots < RS_MAX_PHASES) { pslot[o->name] = ser.n_slots; ser.name[ser.n_slots++] = o->name; }
                    if (pslot[o->name] >= 0) ser.cur[pslot[o->name]] += (double)dur;
                } else if (series_instance(&ser, islot, o->name, (double)dur)) oom = 1;
                break;
            }
            case DPMEM_EV_GPU_TIME: {
                int32_t si = dpmem_log_string_index(L, e.id);
                if (si < 0) break;
                uint64_t g = dpmem_ev_u64(&e, 16);
                ScopeStats *s = &r->scopes[si];
                s->gpu_count++; s->gpu_total_ns += g;
                if (g > s->gpu_max_ns) s->gpu_max_ns = g;
                if (g < s->gpu_min_ns) s->gpu_min_ns = g;
                break;
            }
            case DPMEM_EV_SNAPSHOT: {
                if (r->n_snaps == RS_MAX_SNAPS) break;
                SnapStats *sn = &r->snaps[r->n_snaps];
                uint32_t n = dpmem_ev_u32(&e, 24);
                sn->cat = malloc((n ? n : 1) * sizeof *sn->cat);
                sn->live = malloc((n ? n : 1) * sizeof *sn->live);
                if (!sn->cat || !sn->live) { free(sn->cat); free(sn->live); sn->cat = NULL; sn->live = NULL; oom = 1; break; }
                r->n_snaps++;
                sn->label = dpmem_log_string(L, e.id);
                sn->ts = rel;
                sn->device_used = dpmem_ev_u64(&e, 0);
                sn->device_total = dpmem_ev_u64(&e, 8);
                sn->device_tracked = dpmem_ev_u64(&e, 16);
                if (sn->device_total) r->has_device = 1;
                sn->n = 0;
                for (uint32_t i = 0; i < n; i++) {
                    int32_t c = dpmem_log_category(L, dpmem_ev_u32(&e, 32 + 16 * i));
                    if (c < 0) continue;
                    sn->cat[sn->n] = (uint32_t)c;
                    sn->live[sn->n++] = dpmem_ev_u64(&e, 32 + 16 * i + 8);
                }
                break;
            }
            case DPMEM_EV_WARN: {
                r->n_warn++;
                int32_t si = dpmem_log_string_index(L, e.id);
                WarnStats *w = &warn_of[si < 0 ? ns : (uint32_t)si];   /* (ns: messages the log lacks) */
                if (!w->count) { w->msg = si; w->first_ts = rel; w->first_value = dpmem_ev_u64(&e, 0); }
                w->count++;
                break;
            }
            case DPMEM_EV_OOM:
                if (r->n_oom < 4) {
                    uint8_t *copy = malloc(16 + (size_t)e.n);
                    if (!copy) { oom = 1; break; }
                    memcpy(copy, e.p - 16, 16 + (size_t)e.n);
                    r->oom[r->n_oom] = copy;
                    r->oom_bytes[r->n_oom] = 16 + e.n;
                }
                r->n_oom++;
                break;
            case DPMEM_EV_DEVICE:
                r->n_device_samples++;
                if (dpmem_ev_u64(&e, 8)) r->has_device = 1;
                break;
            default: break;
            }
        }
        dpmem_iter_end(&it);
        r->end_live = total;
        if (oom || dpmem_log_error(L)) ok = 0;
    } else ok = 0;

    if (ok) {
        /* Scopes still open at a cut count up to the last event. */
        for (uint32_t t = 0; t < L->n_threads; t++) {
            uint32_t depth = scopestack_depth(&stacks, t);
            for (uint32_t d = depth < MAX_DEPTH ? depth : MAX_DEPTH; d-- > 0;) {
                const Open *o = scopestack_at(&stacks, t, d);
                if (o->name < 0) continue;
                ScopeStats *s = &r->scopes[o->name];
                uint64_t dur = r->span_ns >= o->ts ? r->span_ns - o->ts : 0;
                s->count++; s->total_ns += dur;
                if (dur > s->max_ns) s->max_ns = dur;
            }
        }
        int32_t step_name = step_si;
        if (step_si >= 0) r->step_scope = L->strings[step_si];
        else {
            int32_t best = -1;
            for (uint32_t i = 0; i < ns; i++)
                if (top_count[i] >= 2 && (best < 0 || top_count[i] > top_count[best])) best = (int32_t)i;
            if (best >= 0) r->step_scope = L->strings[best];
            step_name = best;
        }
        /* Times: the warm-up steps left out of every statistic; none at all for a plan. */
        uint64_t n_steps = step_si >= 0 ? r->n_steps : step_name >= 0 ? r->scopes[step_name].count : 0;
        if (r->warmup < 0) r->warmup = n_steps >= 2 ? 1 : 0;
        const uint64_t W = (uint64_t)r->warmup;
        for (uint32_t i = 0; i < ns; i++) { if (r->scopes[i].min_ns == UINT64_MAX) r->scopes[i].min_ns = 0; if (r->scopes[i].gpu_min_ns == UINT64_MAX) r->scopes[i].gpu_min_ns = 0; }
        if (!r->no_time) {
            if (step_si >= 0 && r->step_ns) r->step = stats_from(r->step_ns, r->n_steps < RS_MAX_STEPS ? r->n_steps : RS_MAX_STEPS, W, &oom);
            for (int k = 0; k < ser.n_slots; k++) {
                while (ser.n[k] < (steps_ended < RS_MAX_PHASE_STEPS ? steps_ended : RS_MAX_PHASE_STEPS)) {   /* a scope last seen before the end */
                    if (grow_to(&ser.v[k], &ser.cap[k], ser.n[k] + 1)) { oom = 1; break; }
                    ser.v[k][ser.n[k]++] = 0;
                }
                ScopeStats *sc = &r->scopes[ser.name[k]];
                sc->per_step = 1;
                sc->times = stats_from(ser.v[k], ser.n[k], W, &oom);
            }
            for (int k = 0; k < ser.n_inst; k++) {
                ScopeStats *sc = &r->scopes[ser.inst_name[k]];
                if (sc->per_step || ser.inst_n[k] > RS_MAX_INSTANCES) continue;   /* more instances than kept: no exact median */
                uint64_t skip = ser.inst_name[k] == step_name ? W : 0;    /* a step scope of another name: its warm-up too */
                sc->times = stats_from(ser.inst[k], ser.inst_n[k], skip, &oom);
                if (ser.inst_name[k] == step_name && step_si < 0) r->step = sc->times;
            }
            if (step_si >= 0) r->scopes[step_si].times = r->step, r->scopes[step_si].per_step = 1;
        }
        /* The distinct warnings, by their first time. */
        uint32_t nw = 0;
        for (uint32_t i = 0; i <= ns; i++) nw += warn_of[i].count > 0;
        if (nw && (r->warns = malloc(nw * sizeof *r->warns))) {
            for (uint32_t i = 0; i <= ns; i++) if (warn_of[i].count) r->warns[r->n_warns++] = warn_of[i];
            qsort(r->warns, r->n_warns, sizeof *r->warns, cmp_warn);
        } else if (nw) oom = 1;
        /* Largest buffers: by their largest single allocation. */
        BufferStats *all = malloc((ns + 1) * sizeof *all);
        uint32_t na = 0;
        for (uint32_t i = 0; all && i < ns; i++)
            if (allocs[i]) all[na++] = (BufferStats){ (int32_t)i, largest[i], allocs[i], space[i] };
        if (all) qsort(all, na, sizeof *all, cmp_buffer);
        r->n_top = na < RS_TOP ? na : RS_TOP;
        if (all) memcpy(r->top, all, r->n_top * sizeof *all);
        else r->n_top = 0;
        free(all);
        /* Leak: a rising trend of the live bytes at the step ends that goes on to the end (leak_judge). */
        uint64_t n = r->n_steps < RS_MAX_STEPS ? r->n_steps : RS_MAX_STEPS, p = 0;
        if (r->step_end_live && !L->backwards && leak_judge(r->step_end_live, n, &p)) {   /* backwards clocks: the order is not known */
            const uint64_t *E = r->step_end_live;
            r->leak = 1;
            r->leak_from_step = p;
            r->leak_steps = n;
            r->leak_growth = E[n - 1] - E[p - 1];
            r->leak_per_step = r->leak_growth / (n - p);
            /* which tags: live at the end of the last step against the end of step p */
            const TagSnap *sp = ref[0].step == p ? &ref[0] : ref[1].step == p ? &ref[1] : NULL;
            TagGrowth *g = malloc((ns + 1) * sizeof *g);
            uint32_t ng = 0;
            for (uint32_t t = 0; g && sp && t < ns; t++) {
                const TagAcc *a = &tags[t];
                int touched = a->mod == steps_ended;   /* changed after the last step's end */
                uint64_t to = touched ? a->live_e : a->live;
                if (to > sp->live[t])
                    g[ng++] = (TagGrowth){ (int32_t)t, sp->live[t], to, (touched ? a->allocs_e : a->allocs) - sp->allocs[t],
                                           (touched ? a->frees_e : a->frees) - sp->frees[t] };
            }
            if (g) qsort(g, ng, sizeof *g, cmp_growth);
            r->n_grew = ng < RS_MAX_GREW ? ng : RS_MAX_GREW;
            if (g) memcpy(r->grew, g, r->n_grew * sizeof *g);
            free(g);
        }
        /* Untracked device memory that never shrinks and ends at least 1 MiB higher. */
        uint32_t k = 0, grows = 1;
        uint64_t prev = 0;
        for (uint32_t i = 0; i < r->n_snaps; i++) {
            const SnapStats *sn = &r->snaps[i];
            if (!sn->device_total) continue;
            uint64_t u = sn->device_used > sn->device_tracked ? sn->device_used - sn->device_tracked : 0;
            if (k == 0) r->untracked_first = u;
            else grows &= u >= prev;
            prev = u; k++;
        }
        r->untracked_last = prev;
        if (k >= 3 && grows && r->untracked_last >= r->untracked_first + (1u << 20)) r->untracked_growth = 1;
    }
    free(live); free(allocs); free(largest); free(space); free(top_count);
    free(pslot); free(islot); free(tags); free(warn_of);
    for (int i = 0; i < 2; i++) { free(ref[i].live); free(ref[i].allocs); free(ref[i].frees); }
    series_free(&ser);
    scopestacks_free(&stacks);
    free(maxes.seq); free(maxes.val);
    if (ok && oom) ok = 0;
    if (!ok) { runstats_free(r); return -1; }
    return 0;
}

void runstats_free(RunStats *r) {
    free(r->at_peak); free(r->cat_peak); free(r->scopes); free(r->step_end_live); free(r->step_ns); free(r->warns);
    r->step_ns = NULL; r->warns = NULL; r->n_warns = 0;
    for (uint32_t i = 0; i < r->n_snaps; i++) { free(r->snaps[i].cat); free(r->snaps[i].live); }
    for (uint32_t i = 0; i < 4; i++) { free(r->oom[i]); r->oom[i] = NULL; }
    r->at_peak = r->cat_peak = r->step_end_live = NULL;
    r->scopes = NULL;
    r->n_snaps = 0;
}
