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

/* The one pass's state besides RunStats itself (runstats_compute_ex). */
typedef struct {
    RunStats *r;
    const DpmemLog *L;
    uint32_t nc, ns;                  /* categories (nc: untagged), strings */
    uint64_t *live, total;            /* live bytes per category, and their sum */
    uint64_t *allocs, *largest;       /* per tag: its allocations, the largest one */
    uint32_t *space;                  /* per tag: the space of its allocations */
    uint64_t *top_count;              /* per string: instances as a depth-0 scope */
    int32_t *pslot, *islot;           /* per string: its Series slot inside the steps, outside them */
    TagAcc *tags;
    /* Per tag at the end of the last two steps whose number is a power of two (from 2): the leak check's
       reference step is the earlier of them (leak_judge), so two copies are enough in one pass. */
    TagSnap ref[2];
    WarnStats *warn_of;
    Series ser;
    ScopeStacks stacks;
    MaxStack maxes;
    uint64_t seq, open;               /* ALLOC events so far; scopes open now, all threads */
    uint64_t steps_open, steps_ended;
    int32_t step_si;                  /* the string "step", -1: the log has none */
    int oom;
} Pass;

/* The pass's buffers; 0 where one is missing (out of memory). */
static int pass_init(Pass *P, RunStats *r, const DpmemLog *L) {
    memset(P, 0, sizeof *P);
    P->r = r; P->L = L;
    const uint32_t nc = P->nc = L->n_cats, ns = P->ns = L->n_strings;
    r->at_peak = calloc(nc + 1, sizeof *r->at_peak);
    r->cat_peak = calloc(nc + 1, sizeof *r->cat_peak);
    r->scopes = calloc(ns + 1, sizeof *r->scopes);
    P->live = calloc(nc + 1, sizeof *P->live);
    P->allocs = calloc(ns + 1, sizeof *P->allocs); P->largest = calloc(ns + 1, sizeof *P->largest);
    P->space = calloc(ns + 1, sizeof *P->space);
    P->top_count = calloc(ns + 1, sizeof *P->top_count);
    P->pslot = malloc((ns + 1) * sizeof *P->pslot); P->islot = malloc((ns + 1) * sizeof *P->islot);
    P->tags = calloc(ns + 1, sizeof *P->tags);
    P->warn_of = calloc(ns + 1, sizeof *P->warn_of);
    int ok = r->at_peak && r->cat_peak && r->scopes && P->live && P->allocs && P->largest && P->space && P->top_count &&
             P->pslot && P->islot && P->tags && P->warn_of && scopestacks_init(&P->stacks, L->n_threads, sizeof(Open), MAX_DEPTH) == 0;
    for (uint32_t i = 0; ok && i <= ns; i++) {
        P->pslot[i] = -1; P->islot[i] = -1; r->scopes[i].min_ns = UINT64_MAX; r->scopes[i].gpu_min_ns = UINT64_MAX;
    }
    return ok;
}

static void pass_free(Pass *P) {
    free(P->live); free(P->allocs); free(P->largest); free(P->space); free(P->top_count);
    free(P->pslot); free(P->islot); free(P->tags); free(P->warn_of);
    for (int i = 0; i < 2; i++) { free(P->ref[i].live); free(P->ref[i].allocs); free(P->ref[i].frees); }
    series_free(&P->ser);
    scopestacks_free(&P->stacks);
    free(P->maxes.seq); free(P->maxes.val);
}

/* Whether the run is a plan (its times are the planner's own), and the warm-up to leave out. */
static void read_timing(RunStats *r, const DpmemLog *L, int warmup) {
    const char *dev = dpmem_log_meta(L, "config.device"), *be = dpmem_log_meta(L, "config.backend");
    r->no_time = (dev && !strcmp(dev, "plan")) || (be && !strcmp(be, "plan"));
    const char *w = dpmem_log_meta(L, "timing.warmup_steps");
    char *end;
    long v = w ? strtol(w, &end, 10) : -1;
    if (warmup >= 0) { r->warmup = warmup; r->warmup_from = "asked"; }
    else if (w && *w && !*end && v >= 0 && v <= 1000000000L) { r->warmup = (int)v; r->warmup_from = "META timing.warmup_steps"; }
    else { r->warmup = -1; r->warmup_from = "default"; }   /* 1 once the steps are counted */
}

/* ALLOC and FREE: the live bytes per tag and category, the peak and what was live at it. */
static void on_memory(Pass *P, const DpmemEvent *e, uint64_t rel) {
    RunStats *r = P->r;
    uint64_t bytes = dpmem_ev_u64(e, 8);
    int32_t si = dpmem_log_string_index(P->L, e->id);
    int32_t c = si < 0 || P->L->cat_of[si] < 0 ? (int32_t)P->nc : P->L->cat_of[si];
    if (si < 0) r->unnamed_events++;
    else {
        TagAcc *t = &P->tags[si];
        tag_touch(t, P->steps_ended);
        if (e->type == DPMEM_EV_ALLOC) { t->live += bytes; t->allocs++; }
        else { t->live -= bytes < t->live ? bytes : t->live; t->frees++; }
    }
    if (e->type == DPMEM_EV_FREE) {
        uint64_t d = bytes < P->live[c] ? bytes : P->live[c];
        if (d < bytes) r->unbalanced_frees++;
        P->live[c] -= d; P->total -= d;
        return;
    }
    if (P->total + bytes < P->total) { r->too_large++; return; }   /* past 2^64: a forged or corrupt log */
    P->live[c] += bytes; P->total += bytes;
    if (si >= 0) {
        P->allocs[si]++;
        if (bytes > P->largest[si]) P->largest[si] = bytes;
        P->space[si] = e->aux;
    }
    if (P->live[c] > r->cat_peak[c]) r->cat_peak[c] = P->live[c];
    if (P->total > r->peak) {
        r->peak = P->total; r->peak_ts = rel;
        memcpy(r->at_peak, P->live, (P->nc + 1) * sizeof *P->live);
    }
    if (P->open && maxstack_push(&P->maxes, ++P->seq, P->total)) P->oom = 1;
}

static void on_begin(Pass *P, const DpmemEvent *e, uint64_t rel) {
    Open *o = scopestack_push(&P->stacks, e->slot, &P->oom);
    if (o) *o = (Open){ dpmem_log_string_index(P->L, e->id), rel, P->total, P->seq };
    if (!P->oom) P->open++;
    if (o && o->name >= 0 && o->name == P->step_si) P->steps_open++;
}

/* The end of a step of `dur` ns: its time and live total, each per-step scope's total, and at the
   steps numbered by a power of two every tag's bytes (the leak check's reference). */
static void on_step_end(Pass *P, uint64_t dur) {
    RunStats *r = P->r;
    if (!r->step_end_live) r->step_end_live = malloc(RS_MAX_STEPS * sizeof *r->step_end_live);
    if (!r->step_ns) r->step_ns = malloc(RS_MAX_STEPS * sizeof *r->step_ns);
    if (!r->step_end_live || !r->step_ns) { P->oom = 1; return; }
    if (r->n_steps < RS_MAX_STEPS) { r->step_end_live[r->n_steps] = P->total; r->step_ns[r->n_steps] = (double)dur; }
    r->n_steps++;
    if (series_flush(&P->ser, P->steps_ended)) P->oom = 1;
    if (P->steps_open) P->steps_open--;
    const uint64_t k = ++P->steps_ended;
    if (k < 2 || (k & (k - 1)) || k > RS_MAX_STEPS) return;
    TagSnap keep = P->ref[0];   /* the older copy's buffers take the newest values */
    P->ref[0] = P->ref[1];
    if (!keep.live) {
        keep.live = malloc((P->ns + 1) * sizeof *keep.live);
        keep.allocs = malloc((P->ns + 1) * sizeof *keep.allocs);
        keep.frees = malloc((P->ns + 1) * sizeof *keep.frees);
    }
    P->ref[1] = keep;
    if (!keep.live || !keep.allocs || !keep.frees) { P->oom = 1; return; }
    P->ref[1].step = k;
    for (uint32_t t = 0; t <= P->ns; t++) { keep.live[t] = P->tags[t].live; keep.allocs[t] = P->tags[t].allocs; keep.frees[t] = P->tags[t].frees; }
}

static void on_end(Pass *P, const DpmemEvent *e, uint64_t rel) {
    Open *o;
    if (!scopestack_pop(&P->stacks, e->slot, (void **)&o)) return;
    uint64_t max_live = o ? maxstack_since(&P->maxes, o->seq0, o->live0) : 0;
    if (--P->open == 0) P->maxes.n = 0;   /* nothing open: no scope asks about the totals so far */
    if (!o || o->name < 0) return;
    ScopeStats *s = &P->r->scopes[o->name];
    uint64_t dur = rel >= o->ts ? rel - o->ts : 0;
    s->count++; s->total_ns += dur;
    if (dur > s->max_ns) s->max_ns = dur;
    if (dur < s->min_ns) s->min_ns = dur;
    if (max_live - o->live0 > s->mem_rise) s->mem_rise = max_live - o->live0;
    s->mem_net = net_add(s->mem_net, P->total, o->live0);
    if (scopestack_depth(&P->stacks, e->slot) == 0) P->top_count[o->name]++;
    Series *S = &P->ser;
    if (o->name == P->step_si) on_step_end(P, dur);
    else if (P->steps_open) {      /* inside a step: this step's total of the scope */
        if (P->pslot[o->name] < 0 && S->n_slots < RS_MAX_PHASES) { P->pslot[o->name] = S->n_slots; S->name[S->n_slots++] = o->name; }
        if (P->pslot[o->name] >= 0) S->cur[P->pslot[o->name]] += (double)dur;
    } else if (series_instance(S, P->islot, o->name, (double)dur)) P->oom = 1;
}

static void on_gpu_time(Pass *P, const DpmemEvent *e) {
    int32_t si = dpmem_log_string_index(P->L, e->id);
    if (si < 0) return;
    uint64_t g = dpmem_ev_u64(e, 16);
    ScopeStats *s = &P->r->scopes[si];
    s->gpu_count++; s->gpu_total_ns += g;
    if (g > s->gpu_max_ns) s->gpu_max_ns = g;
    if (g < s->gpu_min_ns) s->gpu_min_ns = g;
}

static void on_snapshot(Pass *P, const DpmemEvent *e, uint64_t rel) {
    RunStats *r = P->r;
    if (r->n_snaps == RS_MAX_SNAPS) return;
    SnapStats *sn = &r->snaps[r->n_snaps];
    uint32_t n = dpmem_ev_u32(e, 24);
    sn->cat = malloc((n ? n : 1) * sizeof *sn->cat);
    sn->live = malloc((n ? n : 1) * sizeof *sn->live);
    if (!sn->cat || !sn->live) { free(sn->cat); free(sn->live); sn->cat = NULL; sn->live = NULL; P->oom = 1; return; }
    r->n_snaps++;
    sn->label = dpmem_log_string(P->L, e->id);
    sn->ts = rel;
    sn->device_used = dpmem_ev_u64(e, 0);
    sn->device_total = dpmem_ev_u64(e, 8);
    sn->device_tracked = dpmem_ev_u64(e, 16);
    if (sn->device_total) r->has_device = 1;
    sn->n = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t c = dpmem_log_category(P->L, dpmem_ev_u32(e, 32 + 16 * i));
        if (c < 0) continue;
        sn->cat[sn->n] = (uint32_t)c;
        sn->live[sn->n++] = dpmem_ev_u64(e, 32 + 16 * i + 8);
    }
}

static void on_warn(Pass *P, const DpmemEvent *e, uint64_t rel) {
    P->r->n_warn++;
    int32_t si = dpmem_log_string_index(P->L, e->id);
    WarnStats *w = &P->warn_of[si < 0 ? P->ns : (uint32_t)si];   /* (ns: messages the log lacks) */
    if (!w->count) { w->msg = si; w->first_ts = rel; w->first_value = dpmem_ev_u64(e, 0); }
    w->count++;
}

static void on_oom(Pass *P, const DpmemEvent *e) {
    RunStats *r = P->r;
    if (r->n_oom < 4) {
        uint8_t *copy = malloc(16 + (size_t)e->n);
        if (!copy) { P->oom = 1; return; }
        memcpy(copy, e->p - 16, 16 + (size_t)e->n);
        r->oom[r->n_oom] = copy;
        r->oom_bytes[r->n_oom] = 16 + e->n;
    }
    r->n_oom++;
}

/* Every event in time order; 0 when the log could not be read to its end (or memory ran out). */
static int pass_events(Pass *P) {
    const DpmemLog *L = P->L;
    DpmemIter it;
    if (dpmem_iter_begin(&it, L) != 0) return 0;
    DpmemEvent e;
    while (!P->oom && dpmem_iter_next(&it, &e)) {
        uint64_t rel = e.ts - L->t0;
        switch (e.type) {
        case DPMEM_EV_ALLOC: case DPMEM_EV_FREE: on_memory(P, &e, rel); break;
        case DPMEM_EV_BEGIN:    on_begin(P, &e, rel); break;
        case DPMEM_EV_END:      on_end(P, &e, rel); break;
        case DPMEM_EV_GPU_TIME: on_gpu_time(P, &e); break;
        case DPMEM_EV_SNAPSHOT: on_snapshot(P, &e, rel); break;
        case DPMEM_EV_WARN:     on_warn(P, &e, rel); break;
        case DPMEM_EV_OOM:      on_oom(P, &e); break;
        case DPMEM_EV_DEVICE:
            P->r->n_device_samples++;
            if (dpmem_ev_u64(&e, 8)) P->r->has_device = 1;
            break;
        default: break;
        }
    }
    dpmem_iter_end(&it);
    P->r->end_live = P->total;
    return !(P->oom || dpmem_log_error(L));
}

/* Scopes still open at a cut count up to the last event. */
static void close_cut_scopes(Pass *P) {
    RunStats *r = P->r;
    for (uint32_t t = 0; t < P->L->n_threads; t++) {
        uint32_t depth = scopestack_depth(&P->stacks, t);
        for (uint32_t d = depth < MAX_DEPTH ? depth : MAX_DEPTH; d-- > 0;) {
            const Open *o = scopestack_at(&P->stacks, t, d);
            if (o->name < 0) continue;
            ScopeStats *s = &r->scopes[o->name];
            uint64_t dur = r->span_ns >= o->ts ? r->span_ns - o->ts : 0;
            s->count++; s->total_ns += dur;
            if (dur > s->max_ns) s->max_ns = dur;
        }
    }
}

/* The repeated scope: "step" when the log has one, else the most frequent outermost scope (-1: none). */
static int32_t pick_step_scope(Pass *P) {
    RunStats *r = P->r;
    if (P->step_si >= 0) { r->step_scope = P->L->strings[P->step_si]; return P->step_si; }
    int32_t best = -1;
    for (uint32_t i = 0; i < P->ns; i++)
        if (P->top_count[i] >= 2 && (best < 0 || P->top_count[i] > P->top_count[best])) best = (int32_t)i;
    if (best >= 0) r->step_scope = P->L->strings[best];
    return best;
}

/* Times: the warm-up steps left out of every statistic; none at all for a plan. */
static void time_stats(Pass *P, int32_t step_name) {
    RunStats *r = P->r;
    const int32_t step_si = P->step_si;
    Series *S = &P->ser;
    uint64_t n_steps = step_si >= 0 ? r->n_steps : step_name >= 0 ? r->scopes[step_name].count : 0;
    if (r->warmup < 0) r->warmup = n_steps >= 2 ? 1 : 0;
    const uint64_t W = (uint64_t)r->warmup;
    for (uint32_t i = 0; i < P->ns; i++) {
        if (r->scopes[i].min_ns == UINT64_MAX) r->scopes[i].min_ns = 0;
        if (r->scopes[i].gpu_min_ns == UINT64_MAX) r->scopes[i].gpu_min_ns = 0;
    }
    if (r->no_time) return;
    if (step_si >= 0 && r->step_ns) r->step = stats_from(r->step_ns, r->n_steps < RS_MAX_STEPS ? r->n_steps : RS_MAX_STEPS, W, &P->oom);
    const uint64_t ended = P->steps_ended < RS_MAX_PHASE_STEPS ? P->steps_ended : RS_MAX_PHASE_STEPS;
    for (int k = 0; k < S->n_slots; k++) {
        while (S->n[k] < ended) {   /* a scope last seen before the end */
            if (grow_to(&S->v[k], &S->cap[k], S->n[k] + 1)) { P->oom = 1; break; }
            S->v[k][S->n[k]++] = 0;
        }
        ScopeStats *sc = &r->scopes[S->name[k]];
        sc->per_step = 1;
        sc->times = stats_from(S->v[k], S->n[k], W, &P->oom);
    }
    for (int k = 0; k < S->n_inst; k++) {
        ScopeStats *sc = &r->scopes[S->inst_name[k]];
        if (sc->per_step || S->inst_n[k] > RS_MAX_INSTANCES) continue;   /* more instances than kept: no exact median */
        uint64_t skip = S->inst_name[k] == step_name ? W : 0;    /* a step scope of another name: its warm-up too */
        sc->times = stats_from(S->inst[k], S->inst_n[k], skip, &P->oom);
        if (S->inst_name[k] == step_name && step_si < 0) r->step = sc->times;
    }
    if (step_si >= 0) r->scopes[step_si].times = r->step, r->scopes[step_si].per_step = 1;
}

/* The distinct warnings, by their first time; the largest buffers, by their largest allocation. */
static void warns_and_buffers(Pass *P) {
    RunStats *r = P->r;
    const uint32_t ns = P->ns;
    uint32_t nw = 0;
    for (uint32_t i = 0; i <= ns; i++) nw += P->warn_of[i].count > 0;
    if (nw && (r->warns = malloc(nw * sizeof *r->warns))) {
        for (uint32_t i = 0; i <= ns; i++) if (P->warn_of[i].count) r->warns[r->n_warns++] = P->warn_of[i];
        qsort(r->warns, r->n_warns, sizeof *r->warns, cmp_warn);
    } else if (nw) P->oom = 1;
    BufferStats *all = malloc((ns + 1) * sizeof *all);
    uint32_t na = 0;
    for (uint32_t i = 0; all && i < ns; i++)
        if (P->allocs[i]) all[na++] = (BufferStats){ (int32_t)i, P->largest[i], P->allocs[i], P->space[i] };
    if (all) qsort(all, na, sizeof *all, cmp_buffer);
    r->n_top = na < RS_TOP ? na : RS_TOP;
    if (all) memcpy(r->top, all, r->n_top * sizeof *all);
    else r->n_top = 0;
    free(all);
}

/* Leak: a rising trend of the live bytes at the step ends that goes on to the end (leak_judge), and
   the tags that grew from the reference step to the last step's end. */
static void find_leak(Pass *P) {
    RunStats *r = P->r;
    uint64_t n = r->n_steps < RS_MAX_STEPS ? r->n_steps : RS_MAX_STEPS, p = 0;
    if (!r->step_end_live || P->L->backwards || !leak_judge(r->step_end_live, n, &p)) return;   /* backwards clocks: the order is not known */
    const uint64_t *E = r->step_end_live;
    r->leak = 1;
    r->leak_from_step = p;
    r->leak_steps = n;
    r->leak_growth = E[n - 1] - E[p - 1];
    r->leak_per_step = r->leak_growth / (n - p);
    /* which tags: live at the end of the last step against the end of step p */
    const TagSnap *sp = P->ref[0].step == p ? &P->ref[0] : P->ref[1].step == p ? &P->ref[1] : NULL;
    TagGrowth *g = malloc((P->ns + 1) * sizeof *g);
    uint32_t ng = 0;
    for (uint32_t t = 0; g && sp && t < P->ns; t++) {
        const TagAcc *a = &P->tags[t];
        int touched = a->mod == P->steps_ended;   /* changed after the last step's end */
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
static void untracked_growth(RunStats *r) {
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

int runstats_compute_ex(RunStats *r, const DpmemLog *L, int warmup) {
    memset(r, 0, sizeof *r);
    r->log = L;
    r->name = dpmem_log_run_name(L, r->name_buf, sizeof r->name_buf);
    r->span_ns = L->t_last >= L->t0 && L->n_events ? L->t_last - L->t0 : 0;
    Pass P;
    int ok = pass_init(&P, r, L);
    read_timing(r, L, warmup);
    P.step_si = ok ? dpmem_log_find_string(L, "step") : -1;
    ok = ok && pass_events(&P);
    if (ok) {
        close_cut_scopes(&P);
        time_stats(&P, pick_step_scope(&P));
        warns_and_buffers(&P);
        find_leak(&P);
        untracked_growth(r);
    }
    pass_free(&P);
    if (ok && P.oom) ok = 0;
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
