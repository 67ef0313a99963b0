/* threadsteps.c — see threadsteps.h. One pass: a stack of open scopes per thread slot, the step
   scope's duration appended to the list of the track it began on. */
#include "threadsteps.h"

#include <stdlib.h>
#include <string.h>

#include "scopestack.h"

#define MAX_DEPTH 64

typedef struct { double *v; uint64_t n, cap, count; int64_t order; } List;
typedef struct { int32_t name; uint64_t ts; uint32_t track; } OpenStep;

int threadsteps_compute(ThreadSteps *T, const DpmemLog *L, const char *step_scope, int warmup) {
    memset(T, 0, sizeof *T);
    T->warmup = warmup > 0 ? warmup : 0;
    int32_t step = step_scope ? dpmem_log_find_string(L, step_scope) : -1;
    if (tracks_init(&T->tracks, L)) return -1;
    List *lists = NULL;
    uint32_t cap = 0;
    int64_t order = 0;
    ScopeStacks st = { 0 };
    int oom = scopestacks_init(&st, L->n_threads, sizeof(OpenStep), MAX_DEPTH) != 0;
    DpmemIter it;
    if (!oom && dpmem_iter_begin(&it, L) == 0) {
        DpmemEvent e;
        while (!oom && dpmem_iter_next(&it, &e)) {
            uint32_t track = tracks_event(&T->tracks, &e);
            if (track == UINT32_MAX) { oom = 1; break; }
            if (e.type == DPMEM_EV_BEGIN) {
                OpenStep *o = scopestack_push(&st, e.slot, &oom);
                if (o) *o = (OpenStep){ dpmem_log_string_index(L, e.id), e.ts, track };
            } else if (e.type == DPMEM_EV_END) {
                OpenStep *o;
                if (!scopestack_pop(&st, e.slot, (void **)&o) || !o || step < 0 || o->name != step) continue;
                if (o->track >= cap) {
                    uint32_t nc = cap ? cap : 8;
                    while (nc <= o->track) nc *= 2;
                    List *g = realloc(lists, nc * sizeof *g);
                    if (!g) { oom = 1; break; }
                    memset(g + cap, 0, (nc - cap) * sizeof *g);
                    lists = g;
                    cap = nc;
                }
                List *l = &lists[o->track];
                if (!l->count++) l->order = order++;
                if (l->n == TS_MAX_STEPS) continue;
                if (l->n == l->cap) {
                    uint64_t nc = l->cap ? 2 * l->cap : 64;
                    double *v = realloc(l->v, nc * sizeof *v);
                    if (!v) { oom = 1; break; }
                    l->v = v;
                    l->cap = nc;
                }
                l->v[l->n++] = (double)(e.ts >= o->ts ? e.ts - o->ts : 0);
            }
        }
        dpmem_iter_end(&it);
        if (dpmem_log_error(L)) oom = 1;
    } else oom = 1;
    uint32_t n = 0;
    for (uint32_t k = 0; k < cap; k++) n += lists[k].count > 0;
    if (!oom && n && !(T->th = calloc(n, sizeof *T->th))) oom = 1;
    for (uint32_t k = 0; !oom && k < cap; k++) {
        const List *l = &lists[k];
        if (!l->count) continue;
        ThreadStepStats *s = &T->th[l->order];   /* the orders are 0..n-1: one per thread with steps */
        s->track = k;
        s->n_steps = l->count;
        if (l->n > (uint64_t)T->warmup) s->step = timestats_of(l->v + T->warmup, l->n - (uint64_t)T->warmup);
    }
    if (!oom) T->n = n;
    for (uint32_t k = 0; k < cap; k++) free(lists[k].v);
    free(lists);
    scopestacks_free(&st);
    if (oom) { threadsteps_free(T); return -1; }
    return 0;
}

void threadsteps_free(ThreadSteps *T) {
    tracks_free(&T->tracks);
    free(T->th);
    memset(T, 0, sizeof *T);
}
