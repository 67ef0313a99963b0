/* runstats.c — see runstats.h. One merged pass: ALLOC/FREE replay the accounting (live per category),
   BEGIN/END keep a stack per thread with each scope's start time and live bytes at its start. */
#include "runstats.h"

#include <stdlib.h>
#include <string.h>

#include "scopestack.h"

#define MAX_DEPTH 64

typedef struct { int32_t name; uint64_t ts, live0, seq0; } Open;

uint64_t runstats_at_peak(const RunStats *r, const char *cat) {
    int32_t c = dpmem_log_category_index(r->log, cat);
    return c < 0 ? 0 : r->at_peak[c];
}

double runstats_step_mean_ns(const RunStats *r) {
    if (!r->step_scope) return 0;
    int32_t i = dpmem_log_find_string(r->log, r->step_scope);
    if (i < 0 || !r->scopes[i].count) return 0;
    return (double)r->scopes[i].total_ns / (double)r->scopes[i].count;
}

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

int runstats_compute(RunStats *r, const DpmemLog *L) {
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
    ScopeStacks stacks = { 0 };
    MaxStack maxes = { 0 };
    uint64_t seq = 0, open = 0;   /* ALLOC events so far; scopes open now, all threads */
    int ok = r->at_peak && r->cat_peak && r->scopes && live && allocs && largest && space && top_count &&
             scopestacks_init(&stacks, L->n_threads, sizeof(Open), MAX_DEPTH) == 0;
    int oom = 0;

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
                if (max_live - o->live0 > s->mem_delta) s->mem_delta = max_live - o->live0;
                if (scopestack_depth(&stacks, e.slot) == 0) top_count[o->name]++;
                if (o->name == step_si) {
                    if (!r->step_end_live) r->step_end_live = malloc(RS_MAX_STEPS * sizeof *r->step_end_live);
                    if (r->step_end_live && r->n_steps < RS_MAX_STEPS) r->step_end_live[r->n_steps] = total;
                    r->n_steps++;
                }
                break;
            }
            case DPMEM_EV_GPU_TIME: {
                int32_t si = dpmem_log_string_index(L, e.id);
                if (si < 0) break;
                uint64_t g = dpmem_ev_u64(&e, 16);
                ScopeStats *s = &r->scopes[si];
                s->gpu_count++; s->gpu_total_ns += g;
                if (g > s->gpu_max_ns) s->gpu_max_ns = g;
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
            case DPMEM_EV_WARN: {   /* the first few distinct messages, for the report to name */
                r->n_warn++;
                uint32_t k = 0;
                while (k < r->n_warn_kinds && r->warn_kinds[k].id != e.id) k++;
                if (k < RS_WARN_KINDS) {
                    if (k == r->n_warn_kinds) r->warn_kinds[r->n_warn_kinds++].id = e.id;
                    r->warn_kinds[k].count++;
                }
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
        if (step_si >= 0) r->step_scope = L->strings[step_si];
        else {
            int32_t best = -1;
            for (uint32_t i = 0; i < ns; i++)
                if (top_count[i] >= 2 && (best < 0 || top_count[i] > top_count[best])) best = (int32_t)i;
            if (best >= 0) r->step_scope = L->strings[best];
        }
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
        /* Leak: from the second step on (the first allocates what stays, e.g. optimizer state), the
           live bytes at each step's end grow every time. */
        uint64_t n = r->n_steps < RS_MAX_STEPS ? r->n_steps : RS_MAX_STEPS;
        if (r->step_end_live && n >= 3 && !L->backwards) {   /* backwards clocks: the order is not known */
            int grows = 1;
            for (uint64_t i = 2; i < n; i++) grows &= r->step_end_live[i] > r->step_end_live[i - 1];
            if (grows) {
                r->leak = 1;
                r->leak_per_step = (r->step_end_live[n - 1] - r->step_end_live[1]) / (n - 2);
            }
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
    scopestacks_free(&stacks);
    free(maxes.seq); free(maxes.val);
    if (!ok) { runstats_free(r); return -1; }
    return 0;
}

void runstats_free(RunStats *r) {
    free(r->at_peak); free(r->cat_peak); free(r->scopes); free(r->step_end_live);
    for (uint32_t i = 0; i < r->n_snaps; i++) { free(r->snaps[i].cat); free(r->snaps[i].live); }
    for (uint32_t i = 0; i < 4; i++) { free(r->oom[i]); r->oom[i] = NULL; }
    r->at_peak = r->cat_peak = r->step_end_live = NULL;
    r->scopes = NULL;
    r->n_snaps = 0;
}
