/* dpmem_read.c — the log reader (see dpmem_read.h). Validation happens once, in dpmem_log_open;
   the iterator only walks the prefix of the file that was found valid, and reads each chunk again
   only to hand out its events (checked against the first pass's checksum). */
#include "dpmem_read.h"
#include "shown.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io_guard.h"
#include "namemap.h"

static const char *known_categories[] = {
    "params", "grads", "optimizer", "activations", "per_sample_grads", "norms", "ghost", "bk",
    "lora", "noise", "workspace", "input", "untracked",
};
#define N_KNOWN (int)(sizeof known_categories / sizeof known_categories[0])

int dpmem_known_category(const char *name) {
    for (int i = 0; i < N_KNOWN; i++)
        if (strcmp(name, known_categories[i]) == 0) return i;
    return -1;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
#else
static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
#endif

const char *dpmem_space_name(uint32_t s) {
    static const char *n[] = { "host", "device", "pinned", "managed" };
    return s < 4 ? n[s] : "unknown";
}

uint64_t dpmem_ev_u64(const DpmemEvent *e, uint32_t off) {
    return (uint64_t)off + 8 <= e->n ? rd64(e->p + off) : 0;
}
uint32_t dpmem_ev_u32(const DpmemEvent *e, uint32_t off) {
    return (uint64_t)off + 4 <= e->n ? rd32(e->p + off) : 0;
}

/* A growable array without ceremony: ensure room for one more element. */
static int grow(void **arr, uint32_t n, uint32_t *cap, size_t elem) {
    if (n < *cap) return 0;
    uint32_t nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    *arr = p; *cap = nc;
    return 0;
}

/* Does the payload of a known type hold what its type says? (Unknown types: anything goes.) */
static int payload_ok(uint32_t type, const uint8_t *p, uint64_t n) {
    switch (type) {
    case DPMEM_EV_STRING: return n > 0 && memchr(p, 0, n) != NULL;
    case DPMEM_EV_THREAD: return n > 8 && memchr(p + 8, 0, n - 8) != NULL;
    case DPMEM_EV_META: case DPMEM_EV_WARN: return n >= 8;
    case DPMEM_EV_ALLOC: case DPMEM_EV_FREE: case DPMEM_EV_DEVICE: case DPMEM_EV_CLOSE: return n >= 16;
    case DPMEM_EV_GPU_TIME: return n >= 24;
    case DPMEM_EV_SNAPSHOT: return n >= 32 && 32 + (uint64_t)rd32(p + 24) * 16 <= n;
    case DPMEM_EV_OOM: {
        if (n < 40) return 0;
        uint64_t ns = rd32(p + 24), nc = rd32(p + 28), nt = rd32(p + 32);
        return 40 + (ns * 4 + 7) / 8 * 8 + nc * 16 + nt * 16 <= n;
    }
    default: return 1;
    }
}

/* A set (or, with vals, a map) of u32 keys, open addressing; key k stored as k+1. Thread indexes
   to slots, and the tag and category ids seen. */
typedef struct { uint64_t *slot; uint32_t *val; uint32_t cap, n; uint64_t *seen; uint32_t seen_words; } IdSet;
static int idset_grow(IdSet *s, int with_vals) {
    uint32_t nc = s->cap ? s->cap * 2 : 64;
    uint64_t *ns = calloc(nc, sizeof *ns);
    uint32_t *nv = with_vals ? malloc((size_t)nc * sizeof *nv) : NULL;
    if (!ns || (with_vals && !nv)) { free(ns); free(nv); return -1; }
    for (uint32_t i = 0; i < s->cap; i++)
        if (s->slot[i]) {
            uint32_t h = (uint32_t)(s->slot[i] * 2654435761u) & (nc - 1);
            while (ns[h]) h = (h + 1) & (nc - 1);
            ns[h] = s->slot[i];
            if (with_vals) nv[h] = s->val[i];
        }
    free(s->slot); free(s->val);
    s->slot = ns; s->val = nv; s->cap = nc;
    return 0;
}
/* The slot of key id (inserted if absent and `insert`): its index in s->slot, or -1. */
static int64_t idset_find(IdSet *s, uint32_t id, int insert, int with_vals, int *added) {
    if (added) *added = 0;
    if (insert && 2 * (s->n + 1) > s->cap && idset_grow(s, with_vals)) return -2;
    if (!s->cap) return -1;
    uint64_t key = (uint64_t)id + 1;
    uint32_t h = (uint32_t)(key * 2654435761u) & (s->cap - 1);
    while (s->slot[h]) { if (s->slot[h] == key) return h; h = (h + 1) & (s->cap - 1); }
    if (!insert) return -1;
    s->slot[h] = key; s->n++;
    if (added) *added = 1;
    return h;
}
/* Adds id to a set of the ids seen (ALLOC/FREE tags: one call per event). Small ids, which are all a
   kit writes, pass a bitmap first, so that only a new id costs a hash insertion. */
enum { SEEN_IDS = 1 << 22 };
static int idset_add_slow(IdSet *s, uint32_t id);
static inline int idset_add(IdSet *s, uint32_t id) {
    if (id < SEEN_IDS && (id >> 6) < s->seen_words && (s->seen[id >> 6] >> (id & 63) & 1)) return 0;   /* seen */
    return idset_add_slow(s, id);
}
static int idset_add_slow(IdSet *s, uint32_t id) {
    if (id < SEEN_IDS) {
        uint32_t w = id >> 6;
        if (w >= s->seen_words) {
            uint32_t nw = s->seen_words ? s->seen_words : 64;
            while (nw <= w) nw *= 2;
            uint64_t *b = realloc(s->seen, (size_t)nw * sizeof *b);
            if (!b) return -1;
            memset(b + s->seen_words, 0, (size_t)(nw - s->seen_words) * sizeof *b);
            s->seen = b; s->seen_words = nw;
        }
        if (s->seen[w] >> (id & 63) & 1) return 0;
        s->seen[w] |= 1ull << (id & 63);
    }
    return idset_find(s, id, 1, 0, NULL) == -2 ? -1 : 0;
}

typedef struct { uint32_t id; uint64_t off; } StrRef;   /* off: into the string arena */
static int cmp_strref(const void *a, const void *b) {
    uint32_t x = ((const StrRef *)a)->id, y = ((const StrRef *)b)->id;
    if (x != y) return x < y ? -1 : 1;
    uint64_t u = ((const StrRef *)a)->off, v = ((const StrRef *)b)->off;   /* the first one in the file wins */
    return (u > v) - (u < v);
}

/* ---- where the bytes come from ---- */

struct DpmemLogSource {
    int fd;                   /* -1: the caller's bytes in mem */
    const uint8_t *mem;
    char *arena;              /* the strings and thread names, NUL-terminated */
    uint64_t arena_n, arena_cap;
    NameMap strings_by_text, cats_by_name;
    int32_t *index_of_id;     /* string id -> index, when the ids are dense (a kit's are 1, 2, 3...) */
    uint32_t n_index_of_id;
    int failed;
    char error[448];
};

static void src_fail(const DpmemLog *L, const char *fmt, const char *detail) {
    struct DpmemLogSource *S = L->src;
    if (S->failed) return;
    S->failed = 1;
    char what[200];
    snprintf(what, sizeof what, fmt, detail);
    snprintf(S->error, sizeof S->error, "%s: %s", L->path, what);
}

/* Up to n bytes at off into dst; how many there were (fewer: the file is shorter now). */
static size_t read_at(const DpmemLog *L, uint64_t off, void *dst, size_t n) {
    const struct DpmemLogSource *S = L->src;
    if (S->fd < 0) {
        if (off >= L->size) return 0;
        size_t k = L->size - off < n ? (size_t)(L->size - off) : n;
        memcpy(dst, S->mem + off, k);
        return k;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(S->fd, (uint8_t *)dst + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}

static int64_t arena_add(struct DpmemLogSource *S, const char *s, size_t len) {
    if (S->arena_n + len + 1 > S->arena_cap) {
        uint64_t nc = S->arena_cap ? S->arena_cap : 4096;
        while (nc < S->arena_n + len + 1) nc *= 2;
        char *a = realloc(S->arena, nc);
        if (!a) return -1;
        S->arena = a; S->arena_cap = nc;
    }
    int64_t off = (int64_t)S->arena_n;
    memcpy(S->arena + off, s, len);
    S->arena[off + (int64_t)len] = 0;
    S->arena_n += len + 1;
    return off;
}

/* A checksum of a chunk's 8-byte words that a chunk read again must reproduce: Fletcher's two sums
   (the second weights each word by its distance from the end, so moved words change it) in 4 lanes,
   which the compiler vectorizes; n is a multiple of 32 except at the end of a chunk, whose last words
   fold into lane 0. Pieces must start at multiples of 32 bytes (the scan's are multiples of 64 KiB). */
typedef struct { uint64_t a[4], b[4]; } ChunkSum;
static void sum_words(ChunkSum *s, const uint8_t *p, uint64_t n) {
    uint64_t a0 = s->a[0], a1 = s->a[1], a2 = s->a[2], a3 = s->a[3], b0 = s->b[0], b1 = s->b[1], b2 = s->b[2], b3 = s->b[3];
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32) {   /* in registers: 8 independent adds per 32 bytes */
        a0 += rd64(p + i); a1 += rd64(p + i + 8); a2 += rd64(p + i + 16); a3 += rd64(p + i + 24);
        b0 += a0; b1 += a1; b2 += a2; b3 += a3;
    }
    for (; i + 8 <= n; i += 8) { a0 += rd64(p + i); b0 += a0; }
    s->a[0] = a0; s->a[1] = a1; s->a[2] = a2; s->a[3] = a3; s->b[0] = b0; s->b[1] = b1; s->b[2] = b2; s->b[3] = b3;
}
static uint64_t sum_value(const ChunkSum *s) {
    uint64_t h = 0;
    for (int l = 0; l < 4; l++) h = (h ^ s->a[l]) * 0x9E3779B97F4A7C15ull ^ s->b[l];
    return h;
}

/* A window of the file, [start, start + len) in buf, read as the scan walks a chunk. */
typedef struct { uint8_t *buf; size_t cap; uint64_t start, len; } Window;
enum { WINDOW_AHEAD = 1 << 16 };

/* Pointer to the n bytes at off (reading ahead up to `limit`), or NULL when the file no longer has
   them (it shrank) or memory ran out (*oom set). */
static const uint8_t *window_read(const DpmemLog *L, Window *w, uint64_t off, size_t n, uint64_t limit, int *oom);
static inline const uint8_t *window_get(const DpmemLog *L, Window *w, uint64_t off, size_t n, uint64_t limit, int *oom) {
    if (off >= w->start && off + n <= w->start + w->len) return w->buf + (off - w->start);
    return window_read(L, w, off, n, limit, oom);
}
static const uint8_t *window_read(const DpmemLog *L, Window *w, uint64_t off, size_t n, uint64_t limit, int *oom) {
    size_t want = limit - off < WINDOW_AHEAD ? (size_t)(limit - off) : WINDOW_AHEAD;
    if (want < n) want = n;
    if (want > w->cap) {
        uint8_t *b = realloc(w->buf, want);
        if (!b) { *oom = 1; return NULL; }
        w->buf = b; w->cap = want;
    }
    w->start = off;
    w->len = read_at(L, off, w->buf, want);
    return w->len >= n ? w->buf : NULL;
}

static void mark_bad(DpmemLog *L, uint64_t off, const char *why) {
    L->corrupt = 1; L->bad_offset = off;
    snprintf(L->why, sizeof L->why, "%s", why);
}
static void mark_cut(DpmemLog *L, uint64_t off, const char *why) {
    L->bad_offset = off;
    snprintf(L->why, sizeof L->why, "%s", why);
}

enum { BACKWARDS_SLACK_NS = 1000 };

/* The scan's state: per thread slot, its last chunk, its clock and its name; the window; the room of
   the arrays it grows. */
typedef struct {
    DpmemLog *L;
    StrRef **strs;
    uint32_t *n_strs;
    IdSet *tags, *catids;
    uint32_t cap_str, cap_meta, cap_thr, cap_chk;
    uint32_t *last_chunk;         /* per thread slot */
    uint64_t *last_ts;            /* per thread slot */
    int64_t *name_off;            /* per thread slot: its name in the arena (-1: none) */
    IdSet slots;                  /* thread index -> slot */
    Window w;
    int oom;
} ScanState;

/* The slot of thread tidx, a new one at its first chunk; -1 when memory ran out. */
static int64_t thread_slot(ScanState *X, uint32_t tidx) {
    DpmemLog *L = X->L;
    int added;
    int64_t h = idset_find(&X->slots, tidx, 1, 1, &added);
    if (h < 0) return -1;
    if (!added) return X->slots.val[h];
    uint32_t had = X->cap_thr;
    if (grow((void **)&L->threads, L->n_threads, &X->cap_thr, sizeof *L->threads)) return -1;
    if (X->cap_thr != had) {   /* the per-slot arrays grow with it (only then: a realloc may copy) */
        uint32_t *lc = realloc(X->last_chunk, (size_t)X->cap_thr * sizeof *lc);
        if (lc) X->last_chunk = lc;
        uint64_t *lt = realloc(X->last_ts, (size_t)X->cap_thr * sizeof *lt);
        if (lt) X->last_ts = lt;
        int64_t *no = realloc(X->name_off, (size_t)X->cap_thr * sizeof *no);
        if (no) X->name_off = no;
        if (!lc || !lt || !no) return -1;
    }
    X->slots.val[h] = L->n_threads;
    L->threads[L->n_threads] = (DpmemThread){ .index = tidx, .name = "", .first_chunk = L->n_chunks };
    X->last_chunk[L->n_threads] = UINT32_MAX;
    X->last_ts[L->n_threads] = 0;
    X->name_off[L->n_threads] = -1;
    L->n_threads++;
    return X->slots.val[h];
}

/* What one event adds to the index: a string, a thread's name, a META, the tags and categories it
   names, the CLOSE record. -1 when memory ran out. */
static int index_event(ScanState *X, uint32_t type, uint32_t id, const uint8_t *p) {
    DpmemLog *L = X->L;
    struct DpmemLogSource *S = L->src;
    switch (type) {
    case DPMEM_EV_STRING: {
        int64_t a = arena_add(S, (const char *)p, strlen((const char *)p));
        if (a < 0 || grow((void **)X->strs, *X->n_strs, &X->cap_str, sizeof **X->strs)) return -1;
        (*X->strs)[(*X->n_strs)++] = (StrRef){ id, (uint64_t)a };
        return 0;
    }
    case DPMEM_EV_THREAD: {
        int64_t t = idset_find(&X->slots, id, 0, 1, NULL);
        if (t < 0) return 0;   /* a thread with no chunk (yet): nothing to name */
        uint32_t ts_slot = X->slots.val[t];
        int64_t a = arena_add(S, (const char *)p + 8, strlen((const char *)p + 8));
        if (a < 0) return -1;
        L->threads[ts_slot].os_tid = rd64(p);
        X->name_off[ts_slot] = a;
        return 0;
    }
    case DPMEM_EV_META:
        if (grow((void **)&L->meta, L->n_meta, &X->cap_meta, sizeof *L->meta)) return -1;
        L->meta[L->n_meta++] = (DpmemMeta){ id, rd32(p) };
        return 0;
    case DPMEM_EV_ALLOC: case DPMEM_EV_FREE:
        return idset_add(X->tags, id) ? -1 : 0;
    case DPMEM_EV_SNAPSHOT:
        for (uint32_t i = 0, nc = rd32(p + 24); i < nc; i++)
            if (idset_add(X->catids, rd32(p + 32 + 16 * (uint64_t)i))) return -1;
        return 0;
    case DPMEM_EV_OOM: {
        uint64_t ns = rd32(p + 24), nc = rd32(p + 28), nt = rd32(p + 32);
        const uint8_t *q = p + 40 + (ns * 4 + 7) / 8 * 8;
        if (idset_add(X->tags, id)) return -1;
        for (uint64_t i = 0; i < nc; i++)
            if (idset_add(X->catids, rd32(q + 16 * i))) return -1;
        for (uint64_t i = 0; i < nt; i++)
            if (idset_add(X->tags, rd32(q + 16 * nc + 16 * i))) return -1;
        return 0;
    }
    case DPMEM_EV_CLOSE:
        L->closed = 1;
        L->close_written = rd64(p);
        L->close_dropped = rd64(p + 8);
        return 0;
    default: return 0;
    }
}

/* The events of chunk ci (avail bytes at off, of thread `slot`), up to the first zero head or invalid
   byte (marked), and a cut in its last few bytes. -1 when memory ran out. */
static int scan_chunk_events(ScanState *X, uint64_t off, uint64_t avail, uint32_t ci, uint32_t slot) {
    DpmemLog *L = X->L;
    const uint64_t cb = L->chunk_bytes, limit = off + avail;
    uint64_t pos = 32;
    while (pos + 8 <= avail) {
        const uint8_t *c = window_get(L, &X->w, off + pos, 8, limit, &X->oom);
        if (!c) { if (X->oom) return -1; mark_cut(L, off + pos, "the file shrank while being read"); break; }
        uint32_t head_word = rd32(c);
        if (head_word == 0) break;
        uint32_t type = head_word & 0xff;
        uint64_t bytes = (uint64_t)(head_word >> 16) * 8;
        if (bytes < 16) { mark_bad(L, off + pos, "event shorter than 2 words"); break; }
        if (pos + bytes > cb) { mark_bad(L, off + pos, "event runs past its chunk"); break; }
        if (pos + bytes > avail) { mark_cut(L, off + pos, "cut in the middle of an event"); break; }
        c = window_get(L, &X->w, off + pos, (size_t)bytes, limit, &X->oom);
        if (!c) { if (X->oom) return -1; mark_cut(L, off + pos, "the file shrank while being read"); break; }
        const uint8_t *p = c + 16;
        uint64_t n = bytes - 16;
        uint32_t id = rd32(c + 4);
        uint64_t ts = rd64(c + 8);
        if (!payload_ok(type, p, n)) { mark_bad(L, off + pos, "event payload too short for its type"); break; }
        L->n_events++;
        if (type < DPMEM_EV_TYPES) L->count[type]++;
        if (ts < L->t_first) L->t_first = ts;
        if (ts > L->t_last) L->t_last = ts;
        /* A thread's clock never steps back; the kit's ALLOC/FREE stamps may run a nanosecond
           or so ahead of it (they are made unique across threads), hence the slack. STRING and
           THREAD events carry no time of their own (kits before the thread-order fix stamped
           them after the event they precede). */
        if (type != DPMEM_EV_STRING && type != DPMEM_EV_THREAD) {
            if (ts + BACKWARDS_SLACK_NS < X->last_ts[slot] && L->backwards++ == 0) L->backwards_offset = off + pos;
            X->last_ts[slot] = ts;
        }
        if (pos == 32) L->chunks[ci].first_ts = ts;
        if (index_event(X, type, id, p)) return -1;
        pos += bytes;
        L->chunks[ci].end = (uint32_t)pos;
    }
    if (!L->corrupt && !L->bad_offset && pos < avail && pos + 8 > avail) {   /* fewer than 8 bytes left */
        const uint8_t *c = window_get(L, &X->w, off + pos, (size_t)(avail - pos), limit, &X->oom);
        if (!c && X->oom) return -1;
        int tail_nonzero = 0;
        for (uint64_t i = 0; c && i < avail - pos; i++) tail_nonzero |= c[i];
        if (!c) mark_cut(L, off + pos, "the file shrank while being read");
        else if (tail_nonzero && avail < cb) mark_cut(L, off + pos, "cut in the middle of an event");
    }
    return 0;
}

/* The checksum of what was found valid in chunk ci, read back from the window in pieces of at most
   its read-ahead (a 64 KiB chunk: no read at all). -1 when memory ran out. */
static int chunk_checksum(ScanState *X, uint64_t off, uint32_t ci) {
    DpmemLog *L = X->L;
    ChunkSum cs = { { 0 }, { 0 } };
    for (uint64_t q = 0, end = L->chunks[ci].end; q < end;) {
        size_t piece = end - q < WINDOW_AHEAD ? (size_t)(end - q) : WINDOW_AHEAD;
        const uint8_t *c = window_get(L, &X->w, off + q, piece, off + end, &X->oom);
        if (!c) {
            if (X->oom) return -1;
            mark_cut(L, off + q, "the file shrank while being read");   /* (a chunk seen whole a moment ago) */
            L->chunks[ci].end = (uint32_t)q;
            break;
        }
        sum_words(&cs, c, piece);
        q += piece;
    }
    L->chunks[ci].sum = sum_value(&cs);
    return 0;
}

/* One pass over the chunks in file order; stops at the first invalid byte. */
static int scan(DpmemLog *L, StrRef **strs, uint32_t *n_strs, IdSet *tags, IdSet *catids) {
    struct DpmemLogSource *S = L->src;
    ScanState X = { .L = L, .strs = strs, .n_strs = n_strs, .tags = tags, .catids = catids };
    uint64_t hb = L->header_bytes, cb = L->chunk_bytes;
    int rc = 0, zero_run = 0;
    uint8_t head_buf[32];
    for (uint64_t k = 0; hb + k * cb < L->size && !L->corrupt; k++) {
        uint64_t off = hb + k * cb;
        uint64_t avail = L->size - off < cb ? L->size - off : cb;
        size_t hn = avail < 32 ? (size_t)avail : 32;
        /* The chunk in one read, header and events; but after a zero chunk only its 32-byte header,
           until a used one comes (a sparse log of dead chunks costs a tiny read each, not 64 KiB). */
        const uint8_t *head = zero_run ? (read_at(L, off, head_buf, hn) == hn ? head_buf : NULL)
                                       : window_get(L, &X.w, off, hn, off + avail, &X.oom);
        if (!head) { if (X.oom) { rc = -1; goto done; } mark_cut(L, off, "the file shrank while being read"); break; }
        if (avail < 32 || rd32(head) == 0) {
            if (avail < 32 && (avail < 4 || rd32(head) != 0)) { mark_cut(L, off, "cut inside a chunk header"); break; }
            zero_run = 1;
            /* A sparse file: the next chunk that holds data, not a read of every hole on the way
               (the last chunk is still looked at, for a cut). */
            if (S->fd >= 0 && off + cb < L->size) {
                off_t next = lseek(S->fd, (off_t)(off + cb), SEEK_DATA);
                if (next < 0 && errno == ENXIO) next = (off_t)L->size - 1;   /* holes to the end */
                if (next > (off_t)(off + cb) && (uint64_t)next < L->size) k = ((uint64_t)next - hb) / cb - 1;
            }
            continue;  /* never used */
        }
        zero_run = 0;
        if (rd32(head) != DPMEM_CHUNK_MAGIC) { mark_bad(L, off, "bad chunk magic"); break; }
        if (rd64(head + 8) != k) { mark_bad(L, off + 8, "chunk sequence number does not match its place"); break; }
        uint32_t tidx = rd32(head + 4);
        if (tidx == 0) { mark_bad(L, off + 4, "chunk of thread 0"); break; }
        int64_t slot = thread_slot(&X, tidx);
        if (slot < 0) { rc = -1; goto done; }
        if (grow((void **)&L->chunks, L->n_chunks, &X.cap_chk, sizeof *L->chunks)) { rc = -1; goto done; }
        uint32_t ci = L->n_chunks++;
        L->chunks[ci] = (DpmemChunk){ .offset = off, .thread = (uint32_t)slot, .next = UINT32_MAX, .end = 32 };
        if (X.last_chunk[slot] != UINT32_MAX) L->chunks[X.last_chunk[slot]].next = ci;
        X.last_chunk[slot] = ci;
        if (scan_chunk_events(&X, off, avail, ci, (uint32_t)slot) || chunk_checksum(&X, off, ci)) { rc = -1; goto done; }
        if (L->bad_offset) break;
    }
    /* The names, now that the arena no longer moves. */
    for (uint32_t t = 0; t < L->n_threads; t++)
        if (X.name_off[t] >= 0) L->threads[t].name = S->arena + X.name_off[t];
done:
    free(X.last_chunk); free(X.last_ts); free(X.name_off); free(X.slots.slot); free(X.slots.val); free(X.w.buf);
    return rc;
}

/* The categories: the part of each tag before its first '/' (the whole tag when there is none),
   and the category ids of SNAPSHOT and OOM events. Known ones in their fixed order first, then the
   others by name; a hash from name to index serves dpmem_log_category_index. */
typedef struct { char *name; int known; uint32_t first; } CatSort;
static int cmp_catsort(const void *a, const void *b) {
    const CatSort *x = a, *y = b;
    if (x->known >= 0 || y->known >= 0) {
        if (x->known < 0) return 1;
        if (y->known < 0) return -1;
        return (x->known > y->known) - (x->known < y->known);
    }
    return strcmp(x->name, y->name);
}

static int build_categories(DpmemLog *L, IdSet *tags, IdSet *catids) {
    struct DpmemLogSource *S = L->src;
    L->cat_of = malloc((L->n_strings ? L->n_strings : 1) * sizeof *L->cat_of);
    if (!L->cat_of) return -1;
    for (uint32_t i = 0; i < L->n_strings; i++) L->cat_of[i] = -1;
    NameMap tmp = { 0 };   /* name -> position in sorts (names not copied yet: they point into strings) */
    CatSort *sorts = NULL;
    uint32_t n = 0, cap = 0;
    int rc = -1;
    IdSet *sets[2] = { tags, catids };
    for (int s = 0; s < 2; s++)   /* tags first: a string that is also a category id ends as the whole string */
        for (uint32_t i = 0; i < sets[s]->cap; i++) {
            if (!sets[s]->slot[i]) continue;
            int32_t si = dpmem_log_string_index(L, (uint32_t)(sets[s]->slot[i] - 1));
            if (si < 0) continue;
            const char *str = L->strings[si];
            const char *slash = s == 0 ? strchr(str, '/') : NULL;
            size_t len = slash ? (size_t)(slash - str) : strlen(str);
            int32_t c = namemap_get(&tmp, str, len);
            if (c < 0) {
                if (grow((void **)&sorts, n, &cap, sizeof *sorts)) goto out;
                char *copy = malloc(len + 1);
                if (!copy) goto out;
                memcpy(copy, str, len); copy[len] = 0;
                sorts[n] = (CatSort){ copy, dpmem_known_category(copy), n };
                if (namemap_put(&tmp, copy, len, (int32_t)n) < 0) { free(copy); goto out; }
                c = (int32_t)n++;
            }
            L->cat_of[si] = c;   /* the position before sorting, mapped below */
        }
    if (n) qsort(sorts, n, sizeof *sorts, cmp_catsort);
    uint32_t *rank = malloc((n ? n : 1) * sizeof *rank);
    L->cats = malloc((n ? n : 1) * sizeof *L->cats);
    if (!rank || !L->cats) { free(rank); goto out; }
    for (uint32_t i = 0; i < n; i++) {
        rank[sorts[i].first] = i;
        L->cats[i] = sorts[i].name;
        sorts[i].name = NULL;
    }
    L->n_cats = n;
    for (uint32_t i = 0; i < L->n_strings; i++)
        if (L->cat_of[i] >= 0) L->cat_of[i] = (int32_t)rank[L->cat_of[i]];
    free(rank);
    for (uint32_t i = 0; i < n; i++)
        if (namemap_put(&S->cats_by_name, L->cats[i], strlen(L->cats[i]), (int32_t)i) < 0) goto out;
    rc = 0;
out:
    for (uint32_t i = 0; i < n; i++) free(sorts[i].name);
    free(sorts);
    namemap_free(&tmp);
    return rc;
}

static int open_source(DpmemLog *L, const char *name, char *err, size_t errlen);

int dpmem_log_open(DpmemLog *L, const char *path, char *err, size_t errlen) {
    memset(L, 0, sizeof *L);
    int fd;
    struct stat st;
    if (io_open_input(path, &fd, &st, err, errlen)) return -1;
    L->src = calloc(1, sizeof *L->src);
    if (!L->src) { close(fd); snprintf(err, errlen, "%s: out of memory", path); return -1; }
    L->src->fd = fd;
    L->size = (size_t)st.st_size;
    if (L->size < 48) {   /* what is really there: a pseudo-file (/proc) says 0 bytes and has some */
        uint8_t b[48];
        size_t n = 0;
        for (ssize_t k; n < sizeof b && ((k = read(fd, b + n, sizeof b - n)) > 0 || (k < 0 && errno == EINTR));)
            if (k > 0) n += (size_t)k;
        if (n >= 8 && memcmp(b, DPMEM_LOG_MAGIC, 8) != 0) snprintf(err, errlen, "%s: not a dpmem log (bad magic)", path);
        else snprintf(err, errlen, "%s: %s", path, n ? "too short to be a dpmem log" : "empty file");
        dpmem_log_close(L);
        return -1;
    }
    return open_source(L, path, err, errlen);
}

int dpmem_log_open_memory(DpmemLog *L, const void *data, size_t size, const char *name, char *err, size_t errlen) {
    memset(L, 0, sizeof *L);
    L->src = calloc(1, sizeof *L->src);
    if (!L->src) { snprintf(err, errlen, "%s: out of memory", name); return -1; }
    L->src->fd = -1;
    L->src->mem = data;
    L->size = size;
    return open_source(L, name, err, errlen);
}

static int open_source(DpmemLog *L, const char *name, char *err, size_t errlen) {
    struct DpmemLogSource *S = L->src;
    L->path = name;
    L->t_first = UINT64_MAX;
    uint8_t h[56];
    if (L->size < 48) {
        snprintf(err, errlen, "%s: %s", name, L->size ? "too short to be a dpmem log" : "empty file");
        goto fail;
    }
    memset(h, 0, sizeof h);
    if (read_at(L, 0, h, L->size < 56 ? 48 : 56) < 48) { snprintf(err, errlen, "%s: cannot read the header (the file shrank?)", name); goto fail; }
    if (memcmp(h, DPMEM_LOG_MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: not a dpmem log (bad magic)", name);
        goto fail;
    }
    L->version = rd32(h + 8);
    L->header_bytes = rd32(h + 12);
    L->chunk_bytes = rd32(h + 16);
    L->pid = rd64(h + 24);
    L->start_unix_ns = rd64(h + 32);
    L->start_ns = rd64(h + 40);
    if (L->version != 1) {
        snprintf(err, errlen, "%s: log format version %u; this reader knows version 1", name, L->version);
        goto fail;
    }
    if (L->header_bytes >= 56) L->header_dropped = rd64(h + 48);
    if (L->header_bytes < 48 || L->header_bytes % 8 || L->header_bytes > (1u << 20) ||
        L->chunk_bytes < 64 || L->chunk_bytes % 8 || L->chunk_bytes > (1u << 30)) {
        snprintf(err, errlen, "%s: corrupt header (header_bytes %u, chunk_bytes %u)", name,
                 L->header_bytes, L->chunk_bytes);
        goto fail;
    }
    StrRef *strs = NULL;
    uint32_t n_strs = 0;
    IdSet tags = { 0 }, catids = { 0 };
    int rc = scan(L, &strs, &n_strs, &tags, &catids);
    if (rc == 0) {
        if (n_strs) qsort(strs, n_strs, sizeof *strs, cmp_strref);
        L->string_ids = malloc((n_strs ? n_strs : 1) * sizeof *L->string_ids);
        L->strings = malloc((n_strs ? n_strs : 1) * sizeof *L->strings);
        if (!L->string_ids || !L->strings) rc = -1;
        for (uint32_t i = 0; rc == 0 && i < n_strs; i++) {
            if (L->n_strings && L->string_ids[L->n_strings - 1] == strs[i].id) continue;  /* first wins */
            L->string_ids[L->n_strings] = strs[i].id;
            L->strings[L->n_strings++] = S->arena + strs[i].off;
        }
        for (uint32_t i = 0; rc == 0 && i < L->n_strings; i++)
            if (namemap_put(&S->strings_by_text, L->strings[i], strlen(L->strings[i]), (int32_t)i) < 0) rc = -1;
        /* Ids to indexes by a table when they are dense (every event's tag is looked up), else by
           binary search. */
        uint32_t max_id = L->n_strings ? L->string_ids[L->n_strings - 1] : 0;
        if (rc == 0 && L->n_strings && max_id <= 4 * (uint64_t)L->n_strings + 1024) {
            S->index_of_id = malloc(((size_t)max_id + 1) * sizeof *S->index_of_id);
            if (S->index_of_id) {
                for (uint32_t i = 0; i <= max_id; i++) S->index_of_id[i] = -1;
                for (uint32_t i = 0; i < L->n_strings; i++) S->index_of_id[L->string_ids[i]] = (int32_t)i;
                S->n_index_of_id = max_id + 1;
            }
        }
        if (rc == 0) rc = build_categories(L, &tags, &catids);
    }
    free(strs); free(tags.slot); free(catids.slot); free(tags.seen); free(catids.seen);
    if (rc != 0) { snprintf(err, errlen, "%s: out of memory", name); goto fail; }
    L->t0 = L->start_ns <= L->t_first ? L->start_ns : L->t_first;
    return 0;
fail:
    dpmem_log_close(L);
    return -1;
}

void dpmem_log_close(DpmemLog *L) {
    if (L->src) {
        if (L->src->fd >= 0) close(L->src->fd);
        free(L->src->arena);
        free(L->src->index_of_id);
        namemap_free(&L->src->strings_by_text);
        namemap_free(&L->src->cats_by_name);
        free(L->src);
    }
    for (uint32_t i = 0; i < L->n_cats; i++) free(L->cats[i]);
    free(L->cats); free(L->cat_of); free(L->string_ids); free(L->strings);
    free(L->meta); free(L->threads); free(L->chunks);
    memset(L, 0, sizeof *L);
}

const char *dpmem_log_error(const DpmemLog *L) {
    return L->src && L->src->failed ? L->src->error : NULL;
}

uint64_t dpmem_log_dropped(const DpmemLog *L) {
    return L->close_dropped > L->header_dropped ? L->close_dropped : L->header_dropped;
}

void dpmem_log_warn(const DpmemLog *L, const char *tool) {
    char dropped[160] = "";
    if (dpmem_log_dropped(L))
        snprintf(dropped, sizeof dropped, "; the writer could not write %llu events (no space: a full disk or a size limit)",
                 (unsigned long long)dpmem_log_dropped(L));
    if (L->corrupt)
        fprintf(stderr, "%s: warning: %s: corrupt at byte %llu (%s); using the %llu events before it%s\n",
                tool, shown(L->path), (unsigned long long)L->bad_offset, shown(L->why), (unsigned long long)L->n_events, dropped);
    else if (!L->closed)
        fprintf(stderr, "%s: warning: %s: not closed cleanly (%s%s); using the %llu events up to the cut%s\n",
                tool, shown(L->path), L->bad_offset ? shown(L->why) : "no CLOSE event: the run died or is still running",
                L->bad_offset ? " at the end of the file" : "", (unsigned long long)L->n_events, dropped);
    else if (dropped[0])
        fprintf(stderr, "%s: warning: %s: %s\n", tool, shown(L->path), dropped + 2);
}

int32_t dpmem_log_string_index(const DpmemLog *L, uint32_t id) {
    if (L->src && L->src->index_of_id) return id < L->src->n_index_of_id ? L->src->index_of_id[id] : -1;
    uint32_t lo = 0, hi = L->n_strings;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (L->string_ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < L->n_strings && L->string_ids[lo] == id ? (int32_t)lo : -1;
}

const char *dpmem_log_string(const DpmemLog *L, uint32_t id) {
    int32_t i = dpmem_log_string_index(L, id);
    return i < 0 ? "?" : L->strings[i];
}

int32_t dpmem_log_find_string(const DpmemLog *L, const char *s) {
    return L->src ? namemap_get(&L->src->strings_by_text, s, strlen(s)) : -1;
}

int32_t dpmem_log_category_index(const DpmemLog *L, const char *name) {
    return L->src ? namemap_get(&L->src->cats_by_name, name, strlen(name)) : -1;
}

int32_t dpmem_log_category(const DpmemLog *L, uint32_t tag_id) {
    int32_t i = dpmem_log_string_index(L, tag_id);
    return i < 0 ? -1 : L->cat_of[i];
}

const char *dpmem_log_meta(const DpmemLog *L, const char *key) {
    for (uint32_t i = L->n_meta; i-- > 0;)
        if (strcmp(dpmem_log_string(L, L->meta[i].key), key) == 0) {
            int32_t v = dpmem_log_string_index(L, L->meta[i].value);
            return v < 0 ? NULL : L->strings[v];
        }
    return NULL;
}

const char *dpmem_log_run_name(const DpmemLog *L, char *buf, size_t n) {
    const char *run = dpmem_log_meta(L, "run");
    const char *world = dpmem_log_meta(L, "comm.world_size"), *rank = dpmem_log_meta(L, "comm.rank");
    if (run && *run && world && atoi(world) > 1 && rank) {   /* one rank of a data-parallel job */
        snprintf(buf, n, "%s [rank %s]", run, rank);
        return buf;
    }
    if (run && *run) return run;
    const char *base = strrchr(L->path, '/');
    base = base ? base + 1 : L->path;
    size_t len = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base) len = (size_t)(dot - base);
    if (len >= n) len = n - 1;
    memcpy(buf, base, len); buf[len] = 0;
    return buf;
}

/* ---- the merged iterator ---- */

static int heap_less(const DpmemIter *it, uint32_t a, uint32_t b) {
    return it->key[a] < it->key[b] || (it->key[a] == it->key[b] && a < b);
}
static void heap_down(DpmemIter *it, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < it->n_heap && heap_less(it, it->heap[l], it->heap[m])) m = l;
        if (r < it->n_heap && heap_less(it, it->heap[r], it->heap[m])) m = r;
        if (m == i) return;
        uint32_t t = it->heap[i]; it->heap[i] = it->heap[m]; it->heap[m] = t;
        i = m;
    }
}

/* The first chunk from c on (c itself included) that holds events, or UINT32_MAX. */
static uint32_t nonempty_from(const DpmemLog *L, uint32_t c) {
    while (c != UINT32_MAX && L->chunks[c].end <= 32) c = L->chunks[c].next;
    return c;
}

int dpmem_iter_begin(DpmemIter *it, const DpmemLog *L) {
    memset(it, 0, sizeof *it);
    it->log = L;
    size_t n = L->n_threads ? L->n_threads : 1;
    it->chunk = malloc(n * sizeof *it->chunk);
    it->pos = malloc(n * sizeof *it->pos);
    it->buf = calloc(n, sizeof *it->buf);
    it->key = malloc(n * sizeof *it->key);
    it->heap = malloc(n * sizeof *it->heap);
    if (!it->chunk || !it->pos || !it->buf || !it->key || !it->heap) { dpmem_iter_end(it); return -1; }
    for (uint32_t t = 0; t < L->n_threads; t++) {
        it->chunk[t] = nonempty_from(L, L->threads[t].first_chunk);
        it->pos[t] = 32;
        if (it->chunk[t] == UINT32_MAX) continue;
        it->key[t] = L->chunks[it->chunk[t]].first_ts;   /* its bytes are read when its turn comes */
        it->heap[it->n_heap++] = t;
    }
    for (uint32_t i = it->n_heap / 2; i-- > 0;) heap_down(it, i);
    return 0;
}

/* Reads chunk c for slot t and checks that it is what the first pass saw. */
static int load_chunk(DpmemIter *it, uint32_t t, uint32_t c) {
    const DpmemLog *L = it->log;
    const DpmemChunk *ch = &L->chunks[c];
    uint8_t *b = malloc(ch->end);
    if (!b) { src_fail(L, "%s", "out of memory"); return -1; }
    size_t got = read_at(L, ch->offset, b, ch->end);
    ChunkSum cs = { { 0 }, { 0 } };
    if (got == ch->end) sum_words(&cs, b, ch->end);
    if (got < ch->end || sum_value(&cs) != ch->sum) {
        free(b);
        char at[64];
        snprintf(at, sizeof at, "%llu", (unsigned long long)ch->offset);
        src_fail(L, "the file changed while being read (at byte %s): another process wrote or truncated it", at);
        return -1;
    }
    it->buf[t] = b;
    return 0;
}

int dpmem_iter_next(DpmemIter *it, DpmemEvent *e) {
    const DpmemLog *L = it->log;
    free(it->done);
    it->done = NULL;
    if (!it->n_heap || dpmem_log_error(L)) return 0;
    uint32_t t = it->heap[0], c = it->chunk[t];
    if (!it->buf[t] && load_chunk(it, t, c)) return 0;
    const DpmemChunk *ch = &L->chunks[c];
    const uint8_t *ev = it->buf[t] + it->pos[t];
    uint32_t head = rd32(ev), bytes = (head >> 16) * 8;
    /* The bytes passed the checksum, so this holds; checked again because a sum can collide (the
       payload's size need not be: every read of it through dpmem_ev_u32/u64 is bounded by e->n). */
    if (bytes < 16 || it->pos[t] + bytes > ch->end) {
        src_fail(L, "%s", "the file changed while being read: another process wrote it");
        return 0;
    }
    *e = (DpmemEvent){
        .type = head & 0xff, .aux = (head >> 8) & 0xff, .id = rd32(ev + 4),
        .thread = L->threads[t].index, .slot = t, .ts = rd64(ev + 8), .p = ev + 16, .n = bytes - 16,
        .offset = ch->offset + it->pos[t],
    };
    it->pos[t] += bytes;
    if (it->pos[t] + 16 <= ch->end) it->key[t] = rd64(it->buf[t] + it->pos[t] + 8);
    else {   /* this chunk is drained: its bytes go at the next step (e->p points into them) */
        it->done = it->buf[t];
        it->buf[t] = NULL;
        it->chunk[t] = nonempty_from(L, ch->next);
        it->pos[t] = 32;
        if (it->chunk[t] == UINT32_MAX) it->heap[0] = it->heap[--it->n_heap];
        else it->key[t] = L->chunks[it->chunk[t]].first_ts;
    }
    if (it->n_heap > 1) {   /* most steps leave the same thread on top: test before sifting */
        uint32_t l = it->heap[1], r = it->n_heap > 2 ? it->heap[2] : UINT32_MAX;
        if (heap_less(it, l, it->heap[0]) || (r != UINT32_MAX && heap_less(it, r, it->heap[0]))) heap_down(it, 0);
    }
    return 1;
}

void dpmem_iter_end(DpmemIter *it) {
    for (uint32_t t = 0; it->buf && it->log && t < it->log->n_threads; t++) free(it->buf[t]);
    free(it->done); free(it->chunk); free(it->pos); free(it->buf); free(it->key); free(it->heap);
    memset(it, 0, sizeof *it);
}
