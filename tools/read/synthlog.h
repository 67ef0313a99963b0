/* synthlog.h — a small writer of synthetic dpmem logs, byte for byte as docs/LOG_FORMAT.md says,
   for the tools' tests and benches: they need logs whose every event, timestamp and thread they
   choose, so that pixels and numbers have exactly known values.

   It builds the whole file in memory (up to a few hundred MB for the largest bench) and saves it at
   the end; threads, chunks and string interning behave as the format describes (a STRING precedes
   the first use of its id in each thread's chunks). It is not the kit's writer (dpmem.h is) and has
   none of its crash safety. Header-only, all functions static. */
#ifndef SYNTHLOG_H
#define SYNTHLOG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH_MAX_THREADS 32

typedef struct {
    uint8_t *buf;
    size_t size, cap;
    uint32_t chunk_bytes;
    uint64_t n_chunks;
    uint64_t chunk_off[SYNTH_MAX_THREADS];  /* 0: the thread has no chunk yet */
    uint32_t pos[SYNTH_MAX_THREADS];
    char **strs;                             /* id = index + 1 */
    uint32_t *seen;                          /* per string: bit t = STRING written in thread t */
    uint32_t n_strs, cap_strs;
    uint64_t n_events;
} SynthLog;

static inline void synth_die(const char *what) { fprintf(stderr, "synthlog: %s\n", what); exit(2); }

static inline void synth_put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static inline void synth_put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }

static inline void synth_reserve(SynthLog *S, size_t more) {
    if (S->size + more <= S->cap) return;
    size_t nc = S->cap ? S->cap : 1 << 20;
    while (nc < S->size + more) nc *= 2;
    uint8_t *b = realloc(S->buf, nc);
    if (!b) synth_die("out of memory");
    S->buf = b; S->cap = nc;
}

/* chunk_bytes: 65536 as the kit writes, smaller in tests that want many chunks. */
static inline void synth_init(SynthLog *S, uint32_t chunk_bytes, uint64_t start_ns) {
    memset(S, 0, sizeof *S);
    S->chunk_bytes = chunk_bytes;
    synth_reserve(S, 4096);
    memset(S->buf, 0, 4096);
    memcpy(S->buf, "DPMEMLOG", 8);
    synth_put32(S->buf + 8, 1);
    synth_put32(S->buf + 12, 4096);
    synth_put32(S->buf + 16, chunk_bytes);
    synth_put64(S->buf + 24, 4242);
    synth_put64(S->buf + 32, 1700000000000000000ull);
    synth_put64(S->buf + 40, start_ns);
    S->size = 4096;
}

/* Appends one event to thread t's chunk (a new chunk when it does not fit). */
static inline void synth_event(SynthLog *S, uint32_t t, uint32_t type, uint32_t aux, uint32_t id, uint64_t ts,
                        const void *payload, uint32_t n) {
    if (t == 0 || t >= SYNTH_MAX_THREADS) synth_die("thread index out of range");
    uint32_t bytes = 16 + (n + 7) / 8 * 8;
    if (bytes + 32 > S->chunk_bytes) synth_die("event larger than a chunk");
    if (!S->chunk_off[t] || S->pos[t] + bytes > S->chunk_bytes) {
        synth_reserve(S, S->chunk_bytes);
        uint8_t *c = S->buf + S->size;
        memset(c, 0, S->chunk_bytes);
        synth_put32(c, 0x4B435044u);
        synth_put32(c + 4, t);
        synth_put64(c + 8, S->n_chunks++);
        synth_put64(c + 16, ts);
        S->chunk_off[t] = S->size;
        S->pos[t] = 32;
        S->size += S->chunk_bytes;
    }
    uint8_t *e = S->buf + S->chunk_off[t] + S->pos[t];
    synth_put32(e + 4, id);
    synth_put64(e + 8, ts);
    if (n) memcpy(e + 16, payload, n);
    synth_put32(e, type | aux << 8 | (bytes / 8) << 16);  /* first word last, as the kit does */
    S->pos[t] += bytes;
    S->n_events++;
}

/* The id of s; writes its STRING event into thread t's chunk before the first use there. */
static inline uint32_t synth_str(SynthLog *S, uint32_t t, uint64_t ts, const char *s) {
    uint32_t i = 0;
    while (i < S->n_strs && strcmp(S->strs[i], s) != 0) i++;
    if (i == S->n_strs) {
        if (S->n_strs == S->cap_strs) {
            S->cap_strs = S->cap_strs ? 2 * S->cap_strs : 64;
            S->strs = realloc(S->strs, S->cap_strs * sizeof *S->strs);
            S->seen = realloc(S->seen, S->cap_strs * sizeof *S->seen);
            if (!S->strs || !S->seen) synth_die("out of memory");
        }
        S->strs[i] = malloc(strlen(s) + 1);
        if (!S->strs[i]) synth_die("out of memory");
        strcpy(S->strs[i], s);
        S->seen[i] = 0;
        S->n_strs++;
    }
    if (!(S->seen[i] >> t & 1)) {
        synth_event(S, t, 1, 0, i + 1, ts, s, (uint32_t)strlen(s) + 1);
        S->seen[i] |= 1u << t;
    }
    return i + 1;
}

static inline void synth_thread(SynthLog *S, uint32_t t, uint64_t ts, uint64_t os_tid, const char *name) {
    uint8_t p[256] = { 0 };
    size_t len = strlen(name);
    if (len > 200) synth_die("thread name too long");
    synth_put64(p, os_tid);
    memcpy(p + 8, name, len + 1);
    synth_event(S, t, 2, 0, t, ts, p, (uint32_t)(8 + len + 1));
}

static inline void synth_meta(SynthLog *S, uint32_t t, uint64_t ts, const char *key, const char *value) {
    uint32_t k = synth_str(S, t, ts, key), v = synth_str(S, t, ts, value);
    uint8_t p[8] = { 0 };
    synth_put32(p, v);
    synth_event(S, t, 3, 0, k, ts, p, 8);
}

static inline void synth_begin(SynthLog *S, uint32_t t, uint64_t ts, const char *name) {
    synth_event(S, t, 4, 0, synth_str(S, t, ts, name), ts, NULL, 0);
}
static inline void synth_end(SynthLog *S, uint32_t t, uint64_t ts, const char *name) {
    synth_event(S, t, 5, 0, synth_str(S, t, ts, name), ts, NULL, 0);
}

static inline void synth_mem(SynthLog *S, uint32_t t, uint32_t type, uint64_t ts, const char *tag, uint32_t space,
                      uint64_t addr, uint64_t bytes) {
    uint8_t p[16];
    synth_put64(p, addr);
    synth_put64(p + 8, bytes);
    synth_event(S, t, type, space, synth_str(S, t, ts, tag), ts, p, 16);
}
static inline void synth_alloc(SynthLog *S, uint32_t t, uint64_t ts, const char *tag, uint32_t space, uint64_t addr,
                        uint64_t bytes) { synth_mem(S, t, 6, ts, tag, space, addr, bytes); }
static inline void synth_free(SynthLog *S, uint32_t t, uint64_t ts, const char *tag, uint32_t space, uint64_t addr,
                       uint64_t bytes) { synth_mem(S, t, 7, ts, tag, space, addr, bytes); }

static inline void synth_warn(SynthLog *S, uint32_t t, uint64_t ts, const char *msg, uint64_t value) {
    uint8_t p[8];
    synth_put64(p, value);
    synth_event(S, t, 8, 0, synth_str(S, t, ts, msg), ts, p, 8);
}

/* n categories with their live bytes; device_total 0 = no device figures. */
static inline void synth_snapshot(SynthLog *S, uint32_t t, uint64_t ts, const char *label, uint64_t used, uint64_t total,
                           uint64_t tracked, uint32_t n, const char *const *cats, const uint64_t *live) {
    uint8_t p[32 + 16 * 32] = { 0 };
    if (n > 32) synth_die("too many categories in a snapshot");
    uint32_t ids[32];
    for (uint32_t i = 0; i < n; i++) ids[i] = synth_str(S, t, ts, cats[i]);
    uint32_t lab = synth_str(S, t, ts, label);
    synth_put64(p, used); synth_put64(p + 8, total); synth_put64(p + 16, tracked);
    synth_put32(p + 24, n);
    for (uint32_t i = 0; i < n; i++) {
        synth_put32(p + 32 + 16 * i, ids[i]);
        synth_put64(p + 32 + 16 * i + 8, live[i]);
    }
    synth_event(S, t, 9, 0, lab, ts, p, 32 + 16 * n);
}

static inline void synth_gpu_time(SynthLog *S, uint32_t t, uint64_t ts, const char *name, uint32_t thread,
                           uint64_t begin_ts, uint64_t gpu_ns) {
    uint8_t p[24] = { 0 };
    synth_put32(p, thread);
    synth_put64(p + 8, begin_ts);
    synth_put64(p + 16, gpu_ns);
    synth_event(S, t, 10, 0, synth_str(S, t, ts, name), ts, p, 24);
}

/* An OOM post-mortem: one scope on the stack, one category's live bytes, one largest buffer. */
static inline void synth_oom(SynthLog *S, uint32_t t, uint64_t ts, const char *tag, uint32_t space, uint64_t requested,
                             uint64_t used, uint64_t total, const char *scope, const char *cat, uint64_t live, uint64_t top_bytes) {
    uint8_t p[40 + 8 + 16 + 16] = { 0 };
    uint32_t tg = synth_str(S, t, ts, tag), sc = synth_str(S, t, ts, scope), ca = synth_str(S, t, ts, cat);
    synth_put64(p, requested); synth_put64(p + 8, used); synth_put64(p + 16, total);
    synth_put32(p + 24, 1); synth_put32(p + 28, 1); synth_put32(p + 32, 1);
    synth_put32(p + 40, sc);
    synth_put32(p + 48, ca); synth_put64(p + 56, live);
    synth_put32(p + 64, tg); synth_put64(p + 72, top_bytes);
    synth_event(S, t, 11, space, tg, ts, p, sizeof p);
}

static inline void synth_device(SynthLog *S, uint32_t t, uint64_t ts, uint64_t used, uint64_t total) {
    uint8_t p[16];
    synth_put64(p, used);
    synth_put64(p + 8, total);
    synth_event(S, t, 12, 0, 0, ts, p, 16);
}

static inline void synth_close(SynthLog *S, uint32_t t, uint64_t ts) {
    uint8_t p[16];
    synth_put64(p, S->n_events + 1);
    synth_put64(p + 8, 0);
    synth_event(S, t, 13, 0, 0, ts, p, 16);
}

static inline void synth_save(const SynthLog *S, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(S->buf, 1, S->size, f) != S->size || fclose(f) != 0) {
        fprintf(stderr, "synthlog: cannot write %s\n", path);
        exit(2);
    }
}

static inline void synth_release(SynthLog *S) {
    for (uint32_t i = 0; i < S->n_strs; i++) free(S->strs[i]);
    free(S->strs); free(S->seen); free(S->buf);
    memset(S, 0, sizeof *S);
}

#endif
