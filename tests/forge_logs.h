/* forge_logs.h — hostile but well-formed dpmem logs, written byte for byte as docs/LOG_FORMAT.md says,
   for the readers' regression test (tests/test_tools_hostile.c) and their stress target
   (tests/stress_readers.c): logs whose shape made the readers quadratic or made them read everything
   into memory, and logs whose numbers a report must not trust.

   Unlike tools/read/synthlog.h (which interns strings by search, and keeps the whole file in memory) this
   writer streams: ids are the caller's, and one chunk is assembled at a time (a thread switch or a
   full chunk writes it out), so that 10^5 categories or 10^5 threads cost seconds. Test-only,
   header-only, all functions static. */
#ifndef FORGE_LOGS_H
#define FORGE_LOGS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    FILE *f;
    uint32_t chunk_bytes, thread, pos;   /* the chunk being assembled: its thread (0: none) and fill */
    uint64_t n_chunks, n_events;
    uint8_t *chunk;
} Forge;

static inline void forge_die(const char *what) { fprintf(stderr, "forge_logs: %s\n", what); exit(2); }
static inline void forge_put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static inline void forge_put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }

static inline void forge_open(Forge *F, const char *path, uint32_t chunk_bytes, uint64_t start_ns) {
    memset(F, 0, sizeof *F);
    F->f = fopen(path, "wb");
    F->chunk_bytes = chunk_bytes;
    F->chunk = calloc(chunk_bytes, 1);
    if (!F->f || !F->chunk) forge_die("cannot create the log");
    uint8_t h[4096] = { 0 };
    memcpy(h, "DPMEMLOG", 8);
    forge_put32(h + 8, 1); forge_put32(h + 12, 4096); forge_put32(h + 16, chunk_bytes);
    forge_put64(h + 24, 4242); forge_put64(h + 32, 1700000000000000000ull); forge_put64(h + 40, start_ns);
    if (fwrite(h, 1, sizeof h, F->f) != sizeof h) forge_die("cannot write the log");
}

static inline void forge_flush(Forge *F) {
    if (!F->thread) return;
    if (fwrite(F->chunk, 1, F->chunk_bytes, F->f) != F->chunk_bytes) forge_die("cannot write the log");
    F->thread = 0;
}

/* One event of thread t (a new chunk when t changes or the event does not fit). */
static inline void forge_event(Forge *F, uint32_t t, uint32_t type, uint32_t aux, uint32_t id, uint64_t ts,
                               const void *payload, uint32_t n) {
    uint32_t bytes = 16 + (n + 7) / 8 * 8;
    if (bytes + 32 > F->chunk_bytes) forge_die("event larger than a chunk");
    if (F->thread != t || F->pos + bytes > F->chunk_bytes) {
        forge_flush(F);
        memset(F->chunk, 0, F->chunk_bytes);
        forge_put32(F->chunk, 0x4B435044u);
        forge_put32(F->chunk + 4, t);
        forge_put64(F->chunk + 8, F->n_chunks++);
        forge_put64(F->chunk + 16, ts);
        F->thread = t;
        F->pos = 32;
    }
    uint8_t *e = F->chunk + F->pos;
    forge_put32(e, type | aux << 8 | (bytes / 8) << 16);
    forge_put32(e + 4, id);
    forge_put64(e + 8, ts);
    if (n) memcpy(e + 16, payload, n);
    F->pos += bytes;
    F->n_events++;
}

static inline void forge_string(Forge *F, uint32_t t, uint64_t ts, uint32_t id, const char *s) {
    forge_event(F, t, 1, 0, id, ts, s, (uint32_t)strlen(s) + 1);
}
static inline void forge_mem(Forge *F, uint32_t t, uint32_t type, uint64_t ts, uint32_t tag, uint64_t addr, uint64_t bytes) {
    uint8_t p[16];
    forge_put64(p, addr); forge_put64(p + 8, bytes);
    forge_event(F, t, type, 0, tag, ts, p, 16);
}
static inline void forge_close(Forge *F, uint32_t t, uint64_t ts) {
    uint8_t p[16] = { 0 };
    forge_put64(p, F->n_chunks + 1);
    forge_event(F, t, 13, 0, 0, ts, p, 16);
}
static inline void forge_done(Forge *F) {
    forge_flush(F);
    if (fclose(F->f) != 0) forge_die("cannot write the log");
    free(F->chunk);
}

/* n threads of one chunk each (64-byte chunks: a BEGIN and an END), one after the other in time:
   131072 of them make the 8.4 MB log of issue 13 (the readers scanned every thread per event). */
static inline void forge_threads(const char *path, uint32_t n) {
    Forge F;
    forge_open(&F, path, 64, 1000);
    forge_string(&F, 1, 1000, 1, "work");
    for (uint32_t t = 1; t <= n; t++) {
        forge_event(&F, t, 4, 0, 1, 2000 + 10ull * t, NULL, 0);
        forge_event(&F, t, 5, 0, 1, 2005 + 10ull * t, NULL, 0);
    }
    forge_close(&F, 1, 3000 + 10ull * n);
    forge_done(&F);
}

/* n categories ("c000000" ...), each one tag of 4096 bytes allocated in turn (so the peak holds them
   all) then freed, and a snapshot listing the first 2000 (the kit's cap); inside scopes. */
static inline void forge_categories(const char *path, uint32_t n) {
    Forge F;
    forge_open(&F, path, 65536, 1000);
    uint64_t ts = 1000;
    forge_string(&F, 1, ts, 1, "step");
    for (int s = 0; s < 2; s++) {
        forge_event(&F, 1, 4, 0, 1, ++ts, NULL, 0);
        for (uint32_t i = 0; i < n; i++) {
            char tag[32];
            snprintf(tag, sizeof tag, "c%06u/t", i);
            if (s == 0) forge_string(&F, 1, ++ts, 10 + 2 * i, tag);
            forge_mem(&F, 1, 6, ++ts, 10 + 2 * i, 0x1000 + i, 4096);
        }
        for (uint32_t i = 0; i < n; i++) forge_mem(&F, 1, 7, ++ts, 10 + 2 * i, 0x1000 + i, 4096);
        forge_event(&F, 1, 5, 0, 1, ++ts, NULL, 0);
    }
    uint32_t k = n < 2000 ? n : 2000;
    uint8_t *p = calloc(32 + 16 * (size_t)k, 1);
    if (!p) forge_die("out of memory");
    for (uint32_t i = 0; i < k; i++) {
        char cat[32];
        snprintf(cat, sizeof cat, "c%06u", i);
        forge_string(&F, 1, ++ts, 11 + 2 * i, cat);
        forge_put32(p + 32 + 16 * i, 11 + 2 * i);
        forge_put64(p + 32 + 16 * i + 8, 4096);
    }
    forge_string(&F, 1, ++ts, 3, "snap");
    forge_put32(p + 24, k);
    forge_event(&F, 1, 9, 0, 3, ++ts, p, 32 + 16 * k);
    free(p);
    forge_close(&F, 1, ++ts);
    forge_done(&F);
}

/* A run that died early: a few events, then zero chunks up to `bytes` (a hole: the file is sparse
   where the file system allows). The readers read it all into memory (1.3 GB -> 1.28 GB RSS). */
static inline void forge_sparse(const char *path, uint64_t bytes) {
    Forge F;
    forge_open(&F, path, 65536, 1000);
    forge_string(&F, 1, 1000, 1, "step");
    forge_string(&F, 1, 1001, 2, "params/w");
    forge_event(&F, 1, 4, 0, 1, 1002, NULL, 0);
    forge_mem(&F, 1, 6, 1003, 2, 0x1000, 1 << 20);
    forge_done(&F);
    if (truncate(path, (off_t)bytes) != 0) forge_die("cannot extend the log");
}

/* Thread 1's clock runs backwards (5 steps, each allocating 1 MiB, stamped 100 us earlier each time)
   while thread 2 frees each step's buffer at increasing times: merged by time, every allocation
   comes before every free, so the steps' end totals grow (a false leak) and each END precedes its
   BEGIN (0 ms scopes). 14 events step back in time. */
static inline void forge_backwards(const char *path) {
    Forge F;
    forge_open(&F, path, 4096, 1000);
    forge_string(&F, 1, 5000000, 1, "step");
    forge_string(&F, 1, 5000000, 2, "activations/a");
    for (int s = 0; s < 5; s++) {
        uint64_t t = 5000000 - 100000ull * (uint64_t)s;
        forge_event(&F, 1, 4, 0, 1, t, NULL, 0);
        forge_mem(&F, 1, 6, t - 10000, 2, 0x1000 + (uint64_t)s, 1 << 20);
        forge_event(&F, 1, 5, 0, 1, t - 20000, NULL, 0);
    }
    for (int s = 0; s < 5; s++) forge_mem(&F, 2, 7, 6000000 + 100000ull * (uint64_t)s, 2, 0x1000 + (uint64_t)s, 1 << 20);
    forge_close(&F, 2, 7000000);
    forge_done(&F);
}

/* Allocations under tag ids that have no STRING event (lost): 3 MiB at the peak with no category. */
/* An ALLOC of 2^64 - 1 bytes beside one of 100 bytes (the totals would wrap), and two WARN events. */
static inline void forge_huge(const char *path) {
    Forge F;
    forge_open(&F, path, 4096, 1000);
    forge_string(&F, 1, 1001, 1, "params/w");
    forge_string(&F, 1, 1001, 2, "free of an unknown or already freed address");
    forge_mem(&F, 1, 6, 1002, 1, 0x1000, 100);
    forge_mem(&F, 1, 6, 1003, 1, 0x2000, UINT64_MAX);
    uint8_t v[8] = { 0 };
    forge_event(&F, 1, 8, 0, 2, 1004, v, 8);
    forge_event(&F, 1, 8, 0, 2, 1005, v, 8);
    forge_close(&F, 1, 1006);
    forge_done(&F);
}

static inline void forge_dangling(const char *path) {
    Forge F;
    forge_open(&F, path, 4096, 1000);
    forge_mem(&F, 1, 6, 1001, 77, 0x1000, 1 << 20);
    forge_mem(&F, 1, 6, 1002, 78, 0x2000, 2 << 20);
    forge_mem(&F, 1, 7, 1003, 77, 0x1000, 1 << 20);
    forge_mem(&F, 1, 7, 1004, 78, 0x2000, 2 << 20);
    forge_close(&F, 1, 1005);
    forge_done(&F);
}

/* A training-like log of about n events (steps of scopes and tagged allocations, one thread), for
   logs that change under a reader. */
static inline void forge_steps(const char *path, uint64_t n) {
    Forge F;
    forge_open(&F, path, 65536, 1000);
    uint64_t ts = 1000;
    forge_string(&F, 1, ts, 1, "step");
    forge_string(&F, 1, ts, 2, "params/w");
    forge_string(&F, 1, ts, 3, "activations/h");
    forge_mem(&F, 1, 6, ++ts, 2, 0x100, 64 << 20);
    while (F.n_events < n) {
        forge_event(&F, 1, 4, 0, 1, ++ts, NULL, 0);
        for (int k = 0; k < 16; k++) forge_mem(&F, 1, 6, ++ts, 3, 0x1000 + (uint64_t)k, 1 << 20);
        for (int k = 0; k < 16; k++) forge_mem(&F, 1, 7, ++ts, 3, 0x1000 + (uint64_t)k, 1 << 20);
        forge_event(&F, 1, 5, 0, 1, ++ts, NULL, 0);
    }
    forge_close(&F, 1, ++ts);
    forge_done(&F);
}

#endif
