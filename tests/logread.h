/* logread.h — a small, strict reader of dpmem logs for the kit's own tests.

   It loads a whole log into memory and checks every structural rule of docs/LOG_FORMAT.md, so that
   a test can assert what the writer put there. It is deliberately simple and not what the tools use:
   tools/ has the streaming reader that copes with huge and damaged logs. */
#ifndef LOGREAD_H
#define LOGREAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t type, aux, id, thread;
    uint64_t ts, seq;       /* seq: position in the file, which is time order within a thread */
    const uint8_t *payload; /* into LogFile.data */
    uint32_t payload_bytes;
} LogEvent;

typedef struct {
    uint8_t *data; size_t size;
    LogEvent *ev; size_t nev;
    char **str; uint32_t nstr;     /* str[id], NULL where undefined */
    int closed;                    /* a CLOSE event was found */
    uint64_t chunks;
} LogFile;

static inline uint64_t lr_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t lr_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static inline int lr_cmp_ts(const void *a, const void *b) {
    const LogEvent *x = (const LogEvent *)a, *y = (const LogEvent *)b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq ? 1 : 0;
}

/* Returns 0, or -1 with a message in err. Events are sorted by (time, position in the file). */
static inline int log_read(const char *path, LogFile *lf, char *err, size_t errn) {
    memset(lf, 0, sizeof *lf);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errn, "cannot open %s", path); return -1; }
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    if (n < 4096) { fclose(f); snprintf(err, errn, "%s: %ld bytes, shorter than the header", path, n); return -1; }
    lf->data = (uint8_t *)malloc((size_t)n); lf->size = (size_t)n;
    if (fread(lf->data, 1, (size_t)n, f) != (size_t)n) { fclose(f); snprintf(err, errn, "short read"); return -1; }
    fclose(f);
    if (memcmp(lf->data, "DPMEMLOG", 8) || lr_u32(lf->data + 8) != 1) { snprintf(err, errn, "bad magic or version"); return -1; }
    uint32_t hb = lr_u32(lf->data + 12), cb = lr_u32(lf->data + 16);
    size_t cap = 1024;
    lf->ev = (LogEvent *)malloc(cap * sizeof *lf->ev);
    for (size_t off = hb; off + cb <= lf->size || off < lf->size; off += cb) {
        const uint8_t *c = lf->data + off;
        size_t avail = lf->size - off < cb ? lf->size - off : cb;
        if (avail < 32 || lr_u32(c) == 0) continue;
        if (lr_u32(c) != 0x4B435044u) { snprintf(err, errn, "bad chunk magic at %zu", off); return -1; }
        lf->chunks++;
        uint32_t thread = lr_u32(c + 4);
        for (size_t p = 32; p + 16 <= avail;) {
            uint32_t head = lr_u32(c + p);
            if (!head) break;
            uint32_t words = head >> 16;
            if (words < 2 || p + 8 * (size_t)words > avail) { snprintf(err, errn, "bad event length at %zu", off + p); return -1; }
            if (lf->nev == cap) { cap *= 2; lf->ev = (LogEvent *)realloc(lf->ev, cap * sizeof *lf->ev); }
            LogEvent *e = &lf->ev[lf->nev++];
            e->type = head & 255; e->aux = (head >> 8) & 255; e->id = lr_u32(c + p + 4);
            e->ts = lr_u64(c + p + 8); e->thread = thread; e->seq = lf->nev - 1;
            e->payload = c + p + 16; e->payload_bytes = 8 * words - 16;
            if (e->type == 1) {
                if (e->id >= lf->nstr) {
                    uint32_t nn = e->id + 64;
                    lf->str = (char **)realloc(lf->str, nn * sizeof *lf->str);
                    memset(lf->str + lf->nstr, 0, (nn - lf->nstr) * sizeof *lf->str);
                    lf->nstr = nn;
                }
                lf->str[e->id] = (char *)e->payload;
            }
            if (e->type == 13) lf->closed = 1;
            p += 8 * (size_t)words;
        }
        if (avail < cb) break;
    }
    qsort(lf->ev, lf->nev, sizeof *lf->ev, lr_cmp_ts);
    return 0;
}

static inline const char *log_str(const LogFile *lf, uint32_t id) {
    return id < lf->nstr && lf->str[id] ? lf->str[id] : "<undefined>";
}

static inline size_t log_count(const LogFile *lf, uint32_t type) {
    size_t n = 0;
    for (size_t i = 0; i < lf->nev; i++) n += lf->ev[i].type == type;
    return n;
}

static inline void log_free(LogFile *lf) { free(lf->data); free(lf->ev); free(lf->str); memset(lf, 0, sizeof *lf); }

#endif
