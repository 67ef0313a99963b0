/* runstats.c — see runstats.h. One merged pass: ALLOC/FREE replay the accounting (live per category),
   BEGIN/END keep a stack per thread with each scope's start time and live bytes at its start. */
#include "runstats.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct { int32_t name; uint64_t ts, live0, max_live; } Open;

uint64_t runstats_at_peak(const RunStats *r, const char *cat) {
    for (uint32_t i = 0; i < r->log->n_cats; i++)
        if (strcmp(r->log->cats[i], cat) == 0) return r->at_peak[i];
    return 0;
}

double runstats_step_mean_ns(const RunStats *r) {
    if (!r->step_scope) return 0;
    for (uint32_t i = 0; i < r->log->n_strings; i++)
        if (r->scopes[i].count && strcmp(r->log->strings[i], r->step_scope) == 0)
            return (double)r->scopes[i].total_ns / (double)r->scopes[i].count;
    return 0;
}

static int cmp_buffer(const void *a, const void *b) {
    const BufferStats *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return (x->tag > y->tag) - (x->tag < y->tag);
}

int runstats_compute(RunStats *r, const DpmemLog *L) {
    memset(r, 0, sizeof *r);
    r->log = L;
    r->name = dpmem_log_run_name(L, r->name_buf, sizeof r->name_buf);
    r->span_ns = L->t_last >= L->t0 && L->n_events ? L->t_last - L->t0 : 0;
    uint32_t nc = L->n_cats, ns = L->n_strings, nt = L->n_threads ? L->n_threads : 1;
    r->at_peak = calloc(nc + 1, sizeof *r->at_peak);
    r->cat_peak = calloc(nc + 1, sizeof *r->cat_peak);
    r->scopes = calloc(ns + 1, sizeof *r->scopes);
    uint64_t *live = calloc(nc + 1, sizeof *live), total = 0;
    uint64_t *allocs = calloc(ns + 1, sizeof *allocs), *largest = calloc(ns + 1, sizeof *largest);
    uint32_t *space = calloc(ns + 1, sizeof *space);
    Open *stack = malloc((size_t)nt * MAX_DEPTH * sizeof *stack);
    int *depth = calloc(nt, sizeof *depth);
    uint64_t *top_count = calloc(ns + 1, sizeof *top_count);   /* instances of depth-0 scopes */
    int ok = r->at_peak && r->cat_peak && r->scopes && live && allocs && largest && space && stack && depth && top_count;

    /* The repeated scope: "step" when the log has one, else the most frequent outermost scope. */
    int32_t step_si = -1;
    for (uint32_t i = 0; ok && i < ns; i++)
        if (strcmp(L->strings[i], "step") == 0) step_si = (int32_t)i;
    DpmemIter it;
    if (ok && dpmem_iter_begin(&it, L) == 0) {
        DpmemEvent e;
        while (dpmem_iter_next(&it, &e)) {
            uint64_t rel = e.ts - L->t0;
            switch (e.type) {
            case DPMEM_EV_ALLOC: case DPMEM_EV_FREE: {
                uint64_t bytes = dpmem_ev_u64(&e, 8);
                int32_t si = dpmem_log_string_index(L, e.id);
                int32_t c = si < 0 || L->cat_of[si] < 0 ? (int32_t)nc : L->cat_of[si];
                if (e.type == DPMEM_EV_ALLOC) {
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
                    for (uint32_t t = 0; t < L->n_threads; t++) {
                        int d = depth[t] < MAX_DEPTH ? depth[t] : MAX_DEPTH;
                        if (d > 0 && total > stack[t * MAX_DEPTH + d - 1].max_live) stack[t * MAX_DEPTH + d - 1].max_live = total;
                    }
                } else {
                    uint64_t d = bytes < live[c] ? bytes : live[c];
                    if (d < bytes) r->unbalanced_frees++;
                    live[c] -= d; total -= d;
                }
                break;
            }
            case DPMEM_EV_BEGIN: {
                int d = depth[e.slot]++;
                if (d < MAX_DEPTH) stack[e.slot * MAX_DEPTH + d] = (Open){ dpmem_log_string_index(L, e.id), rel, total, total };
                break;
            }
            case DPMEM_EV_END: {
                if (depth[e.slot] == 0) break;
                int d = --depth[e.slot];
                if (d >= MAX_DEPTH) break;
                Open o = stack[e.slot * MAX_DEPTH + d];
                if (d > 0 && o.max_live > stack[e.slot * MAX_DEPTH + d - 1].max_live)
                    stack[e.slot * MAX_DEPTH + d - 1].max_live = o.max_live;
                if (o.name < 0) break;
                ScopeStats *s = &r->scopes[o.name];
                uint64_t dur = rel >= o.ts ? rel - o.ts : 0;
                s->count++; s->total_ns += dur;
                if (dur > s->max_ns) s->max_ns = dur;
                if (o.max_live - o.live0 > s->mem_delta) s->mem_delta = o.max_live - o.live0;
                if (d == 0) top_count[o.name]++;
                if (o.name == step_si) {
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
                sn->live = calloc(nc + 1, sizeof *sn->live);
                if (!sn->live) break;
                r->n_snaps++;
                sn->label = dpmem_log_string(L, e.id);
                sn->ts = rel;
                sn->device_used = dpmem_ev_u64(&e, 0);
                sn->device_total = dpmem_ev_u64(&e, 8);
                sn->device_tracked = dpmem_ev_u64(&e, 16);
                if (sn->device_total) r->has_device = 1;
                for (uint32_t i = 0, n = dpmem_ev_u32(&e, 24); i < n; i++) {
                    int32_t c = dpmem_log_category(L, dpmem_ev_u32(&e, 32 + 16 * i));
                    if (c >= 0) sn->live[c] = dpmem_ev_u64(&e, 32 + 16 * i + 8);
                }
                break;
            }
            case DPMEM_EV_WARN: r->n_warn++; break;
            case DPMEM_EV_OOM:
                if (r->n_oom < 4) r->oom_offset[r->n_oom] = e.offset;
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
    } else ok = 0;

    if (ok) {
        /* Scopes still open at a cut count up to the last event. */
        for (uint32_t t = 0; t < L->n_threads; t++)
            for (int d = depth[t] < MAX_DEPTH ? depth[t] : MAX_DEPTH; d-- > 0;) {
                Open o = stack[t * MAX_DEPTH + d];
                if (o.name < 0) continue;
                ScopeStats *s = &r->scopes[o.name];
                uint64_t dur = r->span_ns >= o.ts ? r->span_ns - o.ts : 0;
                s->count++; s->total_ns += dur;
                if (dur > s->max_ns) s->max_ns = dur;
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
        if (r->step_end_live && n >= 3) {
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
    free(live); free(allocs); free(largest); free(space); free(stack); free(depth); free(top_count);
    if (!ok) { runstats_free(r); return -1; }
    return 0;
}

void runstats_free(RunStats *r) {
    free(r->at_peak); free(r->cat_peak); free(r->scopes); free(r->step_end_live);
    for (uint32_t i = 0; i < r->n_snaps; i++) free(r->snaps[i].live);
    r->at_peak = r->cat_peak = r->step_end_live = NULL;
    r->scopes = NULL;
    r->n_snaps = 0;
}
