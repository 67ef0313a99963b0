/* dpmem_read.c — the log reader (see dpmem_read.h). Validation happens once, in dpmem_log_open;
   the iterator only walks the prefix of the file that was found valid. */
#include "dpmem_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

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

/* A set of u32 ids (the tags and category ids seen), open addressing; key k stored as k+1. */
typedef struct { uint64_t *slot; uint32_t cap, n; } IdSet;
static int idset_add(IdSet *s, uint32_t id) {
    if (2 * (s->n + 1) > s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 64;
        uint64_t *ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->slot[i]) {
                uint32_t h = (uint32_t)(s->slot[i] * 2654435761u) & (nc - 1);
                while (ns[h]) h = (h + 1) & (nc - 1);
                ns[h] = s->slot[i];
            }
        free(s->slot); s->slot = ns; s->cap = nc;
    }
    uint64_t key = (uint64_t)id + 1;
    uint32_t h = (uint32_t)(key * 2654435761u) & (s->cap - 1);
    while (s->slot[h]) { if (s->slot[h] == key) return 0; h = (h + 1) & (s->cap - 1); }
    s->slot[h] = key; s->n++;
    return 0;
}

typedef struct { uint32_t id; const char *s; } StrRef;
static int cmp_strref(const void *a, const void *b) {
    uint32_t x = ((const StrRef *)a)->id, y = ((const StrRef *)b)->id;
    return x < y ? -1 : x > y;
}
static int cmp_cat(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int kx = dpmem_known_category(x), ky = dpmem_known_category(y);
    if (kx >= 0 || ky >= 0) {
        if (kx < 0) return 1;
        if (ky < 0) return -1;
        return (kx > ky) - (kx < ky);
    }
    return strcmp(x, y);
}

/* Drops the whole pages of a chunk we are done with from our mapping: a file-backed page comes back
   from the page cache if touched again (strings point into the mapping), so this only keeps the
   resident set bounded on huge logs; it never changes what is read. */
static void release(const DpmemLog *L, uint64_t off, uint64_t len) {
    if (!L->mapped) return;
    uint64_t page = 4096, a = (off + page - 1) / page * page, b = (off + len) / page * page;
    if (b > L->size / page * page) b = L->size / page * page;
    if (b > a) madvise((void *)(L->data + a), b - a, MADV_DONTNEED);
}

static void mark_bad(DpmemLog *L, uint64_t off, const char *why) {
    L->corrupt = 1; L->bad_offset = off;
    snprintf(L->why, sizeof L->why, "%s", why);
}

/* One pass over the chunks in file order; stops at the first invalid byte. */
static int scan(DpmemLog *L, StrRef **strs, uint32_t *n_strs, IdSet *tags, IdSet *catids) {
    uint32_t cap_str = 0, cap_meta = 0, cap_thr = 0, cap_chk = 0;
    uint32_t *last_chunk = NULL;  /* per thread slot */
    uint64_t hb = L->header_bytes, cb = L->chunk_bytes;
    int rc = 0;
    for (uint64_t k = 0; hb + k * cb < L->size && !L->corrupt; k++) {
        uint64_t off = hb + k * cb;
        uint64_t avail = L->size - off < cb ? L->size - off : cb;
        const uint8_t *c = L->data + off;
        if (avail < 32 || rd32(c) == 0) {
            if (avail < 32 && (avail < 4 || rd32(c) != 0)) {
                snprintf(L->why, sizeof L->why, "cut inside a chunk header");
                L->bad_offset = off;
                break;
            }
            continue;  /* never used */
        }
        if (rd32(c) != DPMEM_CHUNK_MAGIC) { mark_bad(L, off, "bad chunk magic"); break; }
        if (rd64(c + 8) != k) { mark_bad(L, off + 8, "chunk sequence number does not match its place"); break; }
        uint32_t tidx = rd32(c + 4);
        if (tidx == 0) { mark_bad(L, off + 4, "chunk of thread 0"); break; }
        uint32_t slot = 0;
        while (slot < L->n_threads && L->threads[slot].index != tidx) slot++;
        if (slot == L->n_threads) {
            if (grow((void **)&L->threads, L->n_threads, &cap_thr, sizeof *L->threads)) { rc = -1; goto done; }
            uint32_t *lc = realloc(last_chunk, (size_t)cap_thr * sizeof *lc);
            if (!lc) { rc = -1; goto done; }
            last_chunk = lc;
            L->threads[slot] = (DpmemThread){ .index = tidx, .name = "", .first_chunk = L->n_chunks };
            last_chunk[slot] = UINT32_MAX;
            L->n_threads++;
        }
        if (grow((void **)&L->chunks, L->n_chunks, &cap_chk, sizeof *L->chunks)) { rc = -1; goto done; }
        uint32_t ci = L->n_chunks++;
        L->chunks[ci] = (DpmemChunk){ .offset = off, .thread = slot, .next = UINT32_MAX, .end = 32 };
        if (last_chunk[slot] != UINT32_MAX) L->chunks[last_chunk[slot]].next = ci;
        last_chunk[slot] = ci;

        uint64_t pos = 32;
        while (pos + 8 <= avail) {
            uint32_t head = rd32(c + pos);
            if (head == 0) break;
            uint32_t type = head & 0xff, aux = (head >> 8) & 0xff;
            uint64_t bytes = (uint64_t)(head >> 16) * 8;
            if (bytes < 16) { mark_bad(L, off + pos, "event shorter than 2 words"); break; }
            if (pos + bytes > cb) { mark_bad(L, off + pos, "event runs past its chunk"); break; }
            if (pos + bytes > avail) {
                snprintf(L->why, sizeof L->why, "cut in the middle of an event");
                L->bad_offset = off + pos;
                break;
            }
            const uint8_t *p = c + pos + 16;
            uint64_t n = bytes - 16;
            uint32_t id = rd32(c + pos + 4);
            uint64_t ts = rd64(c + pos + 8);
            if (!payload_ok(type, p, n)) { mark_bad(L, off + pos, "event payload too short for its type"); break; }
            L->n_events++;
            if (type < DPMEM_EV_TYPES) L->count[type]++;
            if (ts < L->t_first) L->t_first = ts;
            if (ts > L->t_last) L->t_last = ts;
            switch (type) {
            case DPMEM_EV_STRING:
                if (grow((void **)strs, *n_strs, &cap_str, sizeof **strs)) { rc = -1; goto done; }
                (*strs)[(*n_strs)++] = (StrRef){ id, (const char *)p };
                break;
            case DPMEM_EV_THREAD:
                for (uint32_t t = 0; t < L->n_threads; t++)
                    if (L->threads[t].index == id) {
                        L->threads[t].os_tid = rd64(p);
                        L->threads[t].name = (const char *)p + 8;
                    }
                break;
            case DPMEM_EV_META:
                if (grow((void **)&L->meta, L->n_meta, &cap_meta, sizeof *L->meta)) { rc = -1; goto done; }
                L->meta[L->n_meta++] = (DpmemMeta){ id, rd32(p) };
                break;
            case DPMEM_EV_ALLOC: case DPMEM_EV_FREE:
                if (idset_add(tags, id)) { rc = -1; goto done; }
                break;
            case DPMEM_EV_SNAPSHOT:
                for (uint32_t i = 0, nc = rd32(p + 24); i < nc; i++)
                    if (idset_add(catids, rd32(p + 32 + 16 * (uint64_t)i))) { rc = -1; goto done; }
                break;
            case DPMEM_EV_OOM: {
                uint64_t ns = rd32(p + 24), nc = rd32(p + 28), nt = rd32(p + 32);
                const uint8_t *q = p + 40 + (ns * 4 + 7) / 8 * 8;
                if (idset_add(tags, id)) { rc = -1; goto done; }
                for (uint64_t i = 0; i < nc; i++)
                    if (idset_add(catids, rd32(q + 16 * i))) { rc = -1; goto done; }
                for (uint64_t i = 0; i < nt; i++)
                    if (idset_add(tags, rd32(q + 16 * nc + 16 * i))) { rc = -1; goto done; }
                break;
            }
            case DPMEM_EV_CLOSE:
                L->closed = 1;
                L->close_written = rd64(p);
                L->close_dropped = rd64(p + 8);
                break;
            default: break;
            }
            (void)aux;
            pos += bytes;
            L->chunks[ci].end = (uint32_t)pos;
        }
        int tail_nonzero = 0;
        for (uint64_t i = pos; !L->corrupt && pos + 8 > avail && i < avail; i++) tail_nonzero |= c[i];
        if (tail_nonzero && avail < cb) {
            snprintf(L->why, sizeof L->why, "cut in the middle of an event");
            L->bad_offset = off + pos;
        }
        release(L, off, avail);
        if (L->bad_offset) break;
    }
done:
    free(last_chunk);
    return rc;
}

static int add_cat(DpmemLog *L, uint32_t *cap, const char *name, size_t len) {
    for (uint32_t i = 0; i < L->n_cats; i++)
        if (strlen(L->cats[i]) == len && memcmp(L->cats[i], name, len) == 0) return 0;
    if (grow((void **)&L->cats, L->n_cats, cap, sizeof *L->cats)) return -1;
    char *s = malloc(len + 1);
    if (!s) return -1;
    memcpy(s, name, len); s[len] = 0;
    L->cats[L->n_cats++] = s;
    return 0;
}

static int find_cat(const DpmemLog *L, const char *name, size_t len) {
    for (uint32_t i = 0; i < L->n_cats; i++)
        if (strlen(L->cats[i]) == len && memcmp(L->cats[i], name, len) == 0) return (int)i;
    return -1;
}

static int build_categories(DpmemLog *L, IdSet *tags, IdSet *catids) {
    uint32_t cap = 0;
    L->cat_of = malloc((L->n_strings ? L->n_strings : 1) * sizeof *L->cat_of);
    if (!L->cat_of) return -1;
    for (uint32_t i = 0; i < L->n_strings; i++) L->cat_of[i] = -1;
    IdSet *sets[2] = { tags, catids };
    for (int pass = 0; pass < 2; pass++) {   /* collect names, sort, then map */
        for (int s = 0; s < 2; s++)
            for (uint32_t i = 0; i < sets[s]->cap; i++) {
                if (!sets[s]->slot[i]) continue;
                int32_t si = dpmem_log_string_index(L, (uint32_t)(sets[s]->slot[i] - 1));
                if (si < 0) continue;
                const char *str = L->strings[si];
                const char *slash = s == 0 ? strchr(str, '/') : NULL;
                size_t len = slash ? (size_t)(slash - str) : strlen(str);
                if (pass == 0) { if (add_cat(L, &cap, str, len)) return -1; }
                else L->cat_of[si] = find_cat(L, str, len);
            }
        if (pass == 0 && L->n_cats) qsort(L->cats, L->n_cats, sizeof *L->cats, cmp_cat);
    }
    return 0;
}

static int open_bytes(DpmemLog *L, const void *data, size_t size, int mapped, const char *name, char *err, size_t errlen);

int dpmem_log_open(DpmemLog *L, const char *path, char *err, size_t errlen) {
    memset(L, 0, sizeof *L);
    int fd = open(path, O_RDONLY);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (size < 48) {
        snprintf(err, errlen, "%s: %s", path, size ? "too short to be a dpmem log" : "empty file");
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) { snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno)); return -1; }
    madvise(m, size, MADV_SEQUENTIAL);
    int rc = open_bytes(L, m, size, 1, path, err, errlen);
    if (rc) munmap(m, size);
    return rc;
}

int dpmem_log_open_memory(DpmemLog *L, const void *data, size_t size, const char *name, char *err, size_t errlen) {
    return open_bytes(L, data, size, 0, name, err, errlen);
}

static int open_bytes(DpmemLog *L, const void *data, size_t size, int mapped, const char *name, char *err, size_t errlen) {
    memset(L, 0, sizeof *L);
    L->mapped = mapped;
    L->path = name;
    L->t_first = UINT64_MAX;
    L->data = data;
    L->size = size;
    if (L->size < 48) {
        snprintf(err, errlen, "%s: %s", name, L->size ? "too short to be a dpmem log" : "empty file");
        goto fail;
    }
    if (memcmp(L->data, DPMEM_LOG_MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: not a dpmem log (bad magic)", name);
        goto fail;
    }
    L->version = rd32(L->data + 8);
    L->header_bytes = rd32(L->data + 12);
    L->chunk_bytes = rd32(L->data + 16);
    L->pid = rd64(L->data + 24);
    L->start_unix_ns = rd64(L->data + 32);
    L->start_ns = rd64(L->data + 40);
    if (L->version != 1) {
        snprintf(err, errlen, "%s: log format version %u; this reader knows version 1", name, L->version);
        goto fail;
    }
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
            L->strings[L->n_strings++] = strs[i].s;
        }
        if (rc == 0) rc = build_categories(L, &tags, &catids);
    }
    free(strs); free(tags.slot); free(catids.slot);
    if (rc != 0) { snprintf(err, errlen, "%s: out of memory", name); goto fail; }
    L->t0 = L->start_ns <= L->t_first ? L->start_ns : L->t_first;
    return 0;
fail:
    L->data = NULL;   /* the caller owns the bytes */
    dpmem_log_close(L);
    return -1;
}

void dpmem_log_close(DpmemLog *L) {
    if (L->data && L->mapped) munmap((void *)L->data, L->size);
    for (uint32_t i = 0; i < L->n_cats; i++) free(L->cats[i]);
    free(L->cats); free(L->cat_of); free(L->string_ids); free(L->strings);
    free(L->meta); free(L->threads); free(L->chunks);
    memset(L, 0, sizeof *L);
}

void dpmem_log_warn(const DpmemLog *L, const char *tool) {
    if (L->corrupt)
        fprintf(stderr, "%s: warning: %s: corrupt at byte %llu (%s); using the %llu events before it\n",
                tool, L->path, (unsigned long long)L->bad_offset, L->why, (unsigned long long)L->n_events);
    else if (!L->closed)
        fprintf(stderr, "%s: warning: %s: not closed cleanly (%s%s); using the %llu events up to the cut\n",
                tool, L->path, L->bad_offset ? L->why : "no CLOSE event: the run died or is still running",
                L->bad_offset ? " at the end of the file" : "", (unsigned long long)L->n_events);
    else if (L->close_dropped)
        fprintf(stderr, "%s: warning: %s: the writer dropped %llu events\n", tool, L->path,
                (unsigned long long)L->close_dropped);
}

int32_t dpmem_log_string_index(const DpmemLog *L, uint32_t id) {
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

void dpmem_log_event_at(const DpmemLog *L, uint64_t offset, DpmemEvent *e) {
    const uint8_t *ev = L->data + offset;
    uint32_t head = rd32(ev);
    *e = (DpmemEvent){ .type = head & 0xff, .aux = (head >> 8) & 0xff, .id = rd32(ev + 4), .ts = rd64(ev + 8),
                       .p = ev + 16, .n = (head >> 16) * 8 - 16, .offset = offset };
}

/* ---- the merged iterator ---- */

static void first_event_from(const DpmemLog *L, uint32_t *chunk, uint32_t *pos) {
    while (*chunk != UINT32_MAX && *pos >= L->chunks[*chunk].end) {
        *chunk = L->chunks[*chunk].next;
        *pos = 32;
    }
}

int dpmem_iter_begin(DpmemIter *it, const DpmemLog *L) {
    it->log = L;
    it->pending = UINT32_MAX;
    size_t n = L->n_threads ? L->n_threads : 1;
    it->chunk = malloc(n * sizeof *it->chunk);
    it->pos = malloc(n * sizeof *it->pos);
    if (!it->chunk || !it->pos) { dpmem_iter_end(it); return -1; }
    for (uint32_t t = 0; t < L->n_threads; t++) {
        it->chunk[t] = L->threads[t].first_chunk;
        it->pos[t] = 32;
        first_event_from(L, &it->chunk[t], &it->pos[t]);
    }
    return 0;
}

int dpmem_iter_next(DpmemIter *it, DpmemEvent *e) {
    const DpmemLog *L = it->log;
    uint32_t best = UINT32_MAX;
    uint64_t best_ts = 0;
    for (uint32_t t = 0; t < L->n_threads; t++) {
        if (it->chunk[t] == UINT32_MAX) continue;
        uint64_t ts = rd64(L->data + L->chunks[it->chunk[t]].offset + it->pos[t] + 8);
        if (best == UINT32_MAX || ts < best_ts) { best = t; best_ts = ts; }
    }
    if (best == UINT32_MAX) return 0;
    const DpmemChunk *c = &L->chunks[it->chunk[best]];
    const uint8_t *ev = L->data + c->offset + it->pos[best];
    uint32_t head = rd32(ev), bytes = (head >> 16) * 8;
    *e = (DpmemEvent){
        .type = head & 0xff, .aux = (head >> 8) & 0xff, .id = rd32(ev + 4),
        .thread = L->threads[best].index, .slot = best, .ts = best_ts, .p = ev + 16, .n = bytes - 16,
        .offset = c->offset + it->pos[best],
    };
    it->pos[best] += bytes;
    uint32_t was = it->chunk[best];
    first_event_from(L, &it->chunk[best], &it->pos[best]);
    if (it->chunk[best] != was) {
        /* The event handed out lies in chunk `was`: release it at the next call, not now (touching a
           released page faults its neighbours back in, the whole chunk). */
        if (it->pending != UINT32_MAX) release(L, L->chunks[it->pending].offset, L->chunks[it->pending].end);
        it->pending = was;
    }
    return 1;
}

void dpmem_iter_end(DpmemIter *it) {
    if (it->log && it->pending != UINT32_MAX) release(it->log, it->log->chunks[it->pending].offset, it->log->chunks[it->pending].end);
    it->pending = UINT32_MAX;
    free(it->chunk); free(it->pos);
    it->chunk = it->pos = NULL;
}
