/* scopestack.h — the open scopes of each thread while a tool replays a log: one stack per thread
   slot, each grown only as deep as that thread nests (a log of 10^5 short-lived threads costs a few
   bytes per thread, not 64 levels each). Elements are the tool's own struct (elem bytes). Depths
   past max are counted but not stored, so BEGIN/END stay balanced however deep a log nests.
   Header-only, all functions static. */
#ifndef SCOPESTACK_H
#define SCOPESTACK_H

#include <stdint.h>
#include <stdlib.h>

typedef struct { unsigned char *v; uint32_t depth, cap; } ScopeStackSlot;
typedef struct { ScopeStackSlot *s; uint32_t n; size_t elem; uint32_t max; } ScopeStacks;

static inline int scopestacks_init(ScopeStacks *S, uint32_t n_slots, size_t elem, uint32_t max_depth) {
    S->s = (ScopeStackSlot *)calloc(n_slots ? n_slots : 1, sizeof *S->s);
    S->n = n_slots; S->elem = elem; S->max = max_depth;
    return S->s ? 0 : -1;
}

static inline uint32_t scopestack_depth(const ScopeStacks *S, uint32_t slot) { return S->s[slot].depth; }

/* Element d (0: outermost) of a slot; d must be below min(depth, max). */
static inline void *scopestack_at(const ScopeStacks *S, uint32_t slot, uint32_t d) {
    return S->s[slot].v + (size_t)d * S->elem;
}

/* A new top for the slot: where to store it, or NULL when it is past max (counted only) or memory
   ran out (*oom set; the depth is counted all the same). */
static inline void *scopestack_push(ScopeStacks *S, uint32_t slot, int *oom) {
    ScopeStackSlot *s = &S->s[slot];
    uint32_t d = s->depth++;
    if (d >= S->max) return NULL;
    if (d == s->cap) {
        uint32_t nc = s->cap ? 2 * s->cap : 2;
        if (nc > S->max) nc = S->max;
        unsigned char *v = (unsigned char *)realloc(s->v, (size_t)nc * S->elem);
        if (!v) { *oom = 1; s->depth--; return NULL; }
        s->v = v; s->cap = nc;
    }
    return s->v + (size_t)d * S->elem;
}

/* Pops the slot's top: 1 with *top pointing at it (valid until the slot's next push; NULL when it
   was past max), or 0 when the slot had nothing open. */
static inline int scopestack_pop(ScopeStacks *S, uint32_t slot, void **top) {
    ScopeStackSlot *s = &S->s[slot];
    if (s->depth == 0) return 0;
    uint32_t d = --s->depth;
    *top = d < S->max ? s->v + (size_t)d * S->elem : NULL;
    return 1;
}

static inline void scopestacks_free(ScopeStacks *S) {
    for (uint32_t i = 0; S->s && i < S->n; i++) free(S->s[i].v);
    free(S->s);
    S->s = NULL;
}

#endif
