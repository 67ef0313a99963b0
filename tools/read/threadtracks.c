/* threadtracks.c — see threadtracks.h (the rule is tools/trace/trace.c's, which keeps its own copy). */
#include "threadtracks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tracks_init(ThreadTracks *T, const DpmemLog *L) {
    memset(T, 0, sizeof *T);
    uint32_t n = L->n_threads;
    T->cap = n + 4;
    T->t = calloc(T->cap, sizeof *T->t);
    T->cur = malloc((n + 1) * sizeof *T->cur);
    T->named = calloc(n + 1, 1);
    if (!T->t || !T->cur || !T->named) { tracks_free(T); return -1; }
    T->next_tid = 1;
    for (uint32_t s = 0; s < n; s++) {
        T->t[s] = (ThreadTrack){ .slot = s, .tid = L->threads[s].index };
        T->cur[s] = s;
        if (L->threads[s].index >= T->next_tid) T->next_tid = L->threads[s].index + 1;
    }
    T->n = n;
    return 0;
}

uint32_t tracks_event(ThreadTracks *T, const DpmemEvent *e) {
    uint32_t s = e->slot;
    if (e->type == DPMEM_EV_THREAD) {
        uint64_t os = dpmem_ev_u64(e, 0);
        if (T->named[s] && os != T->t[T->cur[s]].os_tid) {   /* a new OS thread on this index */
            if (T->n == T->cap) {
                ThreadTrack *g = realloc(T->t, 2 * (size_t)T->cap * sizeof *g);
                if (!g) return UINT32_MAX;
                T->t = g;
                T->cap *= 2;
            }
            T->t[T->n] = (ThreadTrack){ .slot = s, .tid = T->next_tid++ };
            T->cur[s] = T->n++;
        }
        const char *nm = (const char *)e->p + 8;   /* a later name replaces an earlier one; none keeps it */
        if (*nm) snprintf(T->t[T->cur[s]].name, sizeof T->t[0].name, "%.*s", (int)(e->n > 8 ? e->n - 8 : 0), nm);
        T->t[T->cur[s]].os_tid = os;
        T->named[s] = 1;
    }
    return T->cur[s];
}

const char *tracks_label(const ThreadTracks *T, uint32_t track, char *buf, int n) {
    const ThreadTrack *k = &T->t[track];
    if (*k->name) snprintf(buf, (size_t)n, "T%u %s", k->tid, k->name);
    else snprintf(buf, (size_t)n, "T%u", k->tid);
    return buf;
}

void tracks_free(ThreadTracks *T) {
    free(T->t); free(T->cur); free(T->named);
    memset(T, 0, sizeof *T);
}
