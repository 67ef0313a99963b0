/* namemap.h — a hash map from names (byte strings) to small integers, for the readers and tools: a
   log may hold 10^5 categories or scopes, and any lookup by name that scans a list makes its tool
   quadratic. Open addressing with linear probing, FNV-1a; the keys are not copied (they must
   outlive the map). Header-only, all functions static. Not a general container: no removal. */
#ifndef NAMEMAP_H
#define NAMEMAP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *key;   /* NULL: empty slot */
    uint32_t len;
    int32_t value;
} NameMapSlot;

typedef struct {
    NameMapSlot *slot;
    uint32_t cap, n;   /* cap: a power of two, at least twice n */
} NameMap;

static inline uint32_t namemap_hash(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static inline NameMapSlot *namemap__find(const NameMap *m, const char *s, size_t len) {
    if (!m->cap) return NULL;
    uint32_t i = namemap_hash(s, len) & (m->cap - 1);
    while (m->slot[i].key) {
        if (m->slot[i].len == len && memcmp(m->slot[i].key, s, len) == 0) return &m->slot[i];
        i = (i + 1) & (m->cap - 1);
    }
    return &m->slot[i];
}

/* The value of the name s[0..len), or -1. */
static inline int32_t namemap_get(const NameMap *m, const char *s, size_t len) {
    NameMapSlot *e = namemap__find(m, s, len);
    return e && e->key ? e->value : -1;
}

/* Adds s[0..len) -> value unless the name is there; returns the value in the map (the old one when
   the name was there), or -1 when out of memory. */
static inline int32_t namemap_put(NameMap *m, const char *s, size_t len, int32_t value) {
    if (2 * (m->n + 1) > m->cap) {
        uint32_t nc = m->cap ? 2 * m->cap : 64;
        NameMapSlot *ns = (NameMapSlot *)calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (uint32_t i = 0; i < m->cap; i++) {
            if (!m->slot[i].key) continue;
            uint32_t j = namemap_hash(m->slot[i].key, m->slot[i].len) & (nc - 1);
            while (ns[j].key) j = (j + 1) & (nc - 1);
            ns[j] = m->slot[i];
        }
        free(m->slot);
        m->slot = ns; m->cap = nc;
    }
    NameMapSlot *e = namemap__find(m, s, len);
    if (e->key) return e->value;
    e->key = s; e->len = (uint32_t)len; e->value = value;
    m->n++;
    return value;
}

static inline void namemap_free(NameMap *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}

#endif
