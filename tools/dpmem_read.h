/* dpmem_read.h — the one reader of dpmem logs (docs/LOG_FORMAT.md, version 1) that every tool uses.

   dpmem_log_open maps the file, checks the header, and makes one validating pass over the chunks: it
   collects the strings, META pairs, thread names, the categories of the tags, the time span and the
   CLOSE event, and finds where the log stops being valid (the end of the data, a cut mid-event, or the
   byte offset where garbage starts). Nothing after that point is ever handed out, so the event
   iterator and the tools behind it can trust every length and every payload size they see.
   DpmemIter then streams the events of all threads merged by timestamp (a k-way merge over the
   threads' chunk sequences): memory stays bounded by the number of chunks, whatever the log's size.

   It does not interpret events beyond their layout (replaying live bytes is the tools' business), and
   it never writes logs (dpmem.h does; tools/synthlog.h writes synthetic ones for tests and benches). */
#ifndef DPMEM_READ_H
#define DPMEM_READ_H

#include <stddef.h>
#include <stdint.h>

enum {
    DPMEM_EV_STRING = 1, DPMEM_EV_THREAD = 2, DPMEM_EV_META = 3, DPMEM_EV_BEGIN = 4, DPMEM_EV_END = 5,
    DPMEM_EV_ALLOC = 6, DPMEM_EV_FREE = 7, DPMEM_EV_WARN = 8, DPMEM_EV_SNAPSHOT = 9,
    DPMEM_EV_GPU_TIME = 10, DPMEM_EV_OOM = 11, DPMEM_EV_DEVICE = 12, DPMEM_EV_CLOSE = 13,
    DPMEM_EV_TYPES = 14
};

#define DPMEM_LOG_MAGIC   "DPMEMLOG"
#define DPMEM_CHUNK_MAGIC 0x4B435044u

typedef struct {
    uint32_t type, aux, id;   /* aux: the memory space of ALLOC/FREE/OOM */
    uint32_t thread;          /* the writer's thread index (from the chunk header) */
    uint32_t slot;            /* that thread's slot in DpmemLog.threads (0 .. n_threads-1) */
    uint64_t ts;              /* the writer's clock, ns */
    const uint8_t *p;         /* payload (validated: at least the fixed part of a known type) */
    uint32_t n;               /* payload bytes */
    uint64_t offset;          /* byte offset of the event in the file */
} DpmemEvent;

typedef struct { uint32_t key, value; } DpmemMeta;       /* string ids */

typedef struct {
    uint32_t index;           /* the writer's thread index */
    uint64_t os_tid;
    const char *name;         /* "" when the log has no THREAD event for it */
    uint32_t first_chunk;     /* position of its first chunk in DpmemLog.chunks */
} DpmemThread;

typedef struct {
    uint64_t offset;          /* of the chunk in the file */
    uint32_t thread;          /* slot in DpmemLog.threads */
    uint32_t next;            /* next chunk of the same thread (UINT32_MAX: none) */
    uint32_t end;             /* bytes of the chunk that hold valid events (from the chunk start) */
} DpmemChunk;

typedef struct {
    const char *path;
    const uint8_t *data;      /* the mapping (or the caller's bytes) */
    size_t size;
    int mapped;               /* data is our mapping, unmapped by dpmem_log_close */
    uint32_t version, header_bytes, chunk_bytes;
    uint64_t pid, start_unix_ns, start_ns;

    uint32_t n_strings;       /* sorted by id */
    uint32_t *string_ids;
    const char **strings;

    DpmemMeta *meta;          uint32_t n_meta;
    DpmemThread *threads;     uint32_t n_threads;
    DpmemChunk *chunks;       uint32_t n_chunks;

    /* Categories of the tags used by ALLOC/FREE/OOM: the known ones in their fixed order first, then
       the others sorted by name. cat_of[i] is the category of string i (-1: not a tag). */
    uint32_t n_cats;
    char **cats;
    int32_t *cat_of;

    uint64_t n_events, count[DPMEM_EV_TYPES];
    uint64_t t_first, t_last; /* min and max event ts (t_first > t_last: no events) */
    uint64_t t0;              /* the time origin the tools use: start_ns, or t_first if that is earlier */
    int closed;               /* a CLOSE event was found */
    uint64_t close_written, close_dropped;
    int corrupt;              /* garbage found: valid data ends at bad_offset */
    uint64_t bad_offset;
    char why[160];            /* what was wrong there */
} DpmemLog;

/* Opens and validates. Returns 0, or -1 with a one-line reason in err (not a dpmem log, wrong
   version, unreadable...). A log that is truncated or corrupt after a valid header opens fine: see
   closed / corrupt, or print dpmem_log_warn(). */
int  dpmem_log_open(DpmemLog *log, const char *path, char *err, size_t errlen);
/* The same on bytes in memory (not copied: they must outlive the DpmemLog); name is for messages. */
int  dpmem_log_open_memory(DpmemLog *log, const void *data, size_t size, const char *name, char *err, size_t errlen);
void dpmem_log_close(DpmemLog *log);

/* Prints "warning: <path>: ..." to stderr when the log was not closed cleanly or is corrupt. */
void dpmem_log_warn(const DpmemLog *log, const char *tool);

/* The string of an id; "?" when the log has none (a cut log may lose a STRING event). */
const char *dpmem_log_string(const DpmemLog *log, uint32_t id);
/* Index of a string id in log->strings, or -1. */
int32_t     dpmem_log_string_index(const DpmemLog *log, uint32_t id);
/* Category index of a tag id, or -1. */
int32_t     dpmem_log_category(const DpmemLog *log, uint32_t tag_id);
/* The value of a META key ("run", "config.seq_len", ...), or NULL. The last one written wins. */
const char *dpmem_log_meta(const DpmemLog *log, const char *key);
/* The run's name: META "run", else the file name without directories and extension (into buf). */
const char *dpmem_log_run_name(const DpmemLog *log, char *buf, size_t n);

/* "host", "device", "pinned", "managed" for the memory spaces 0..3, else "unknown". */
const char *dpmem_space_name(uint32_t space);
/* Little-endian payload words; 0 past the payload's end. */
uint64_t dpmem_ev_u64(const DpmemEvent *e, uint32_t byte_offset);
uint32_t dpmem_ev_u32(const DpmemEvent *e, uint32_t byte_offset);

/* The event at a file offset that an earlier pass handed out (DpmemEvent.offset), e.g. to print it in
   full later (thread and slot are not filled in). */
void dpmem_log_event_at(const DpmemLog *log, uint64_t offset, DpmemEvent *e);

/* Events of all threads in timestamp order (ties: by thread slot, then file order). */
typedef struct {
    const DpmemLog *log;
    uint32_t *chunk;          /* per thread slot: current chunk, or UINT32_MAX when done */
    uint32_t *pos;            /* per thread slot: offset of the next event in its chunk */
    uint32_t pending;         /* a finished chunk whose pages are dropped at the next step */
} DpmemIter;

int  dpmem_iter_begin(DpmemIter *it, const DpmemLog *log);   /* 0, or -1 out of memory */
int  dpmem_iter_next(DpmemIter *it, DpmemEvent *e);          /* 1: an event, 0: the end */
void dpmem_iter_end(DpmemIter *it);

/* The fixed order of the known categories (params, grads, optimizer, activations, ...): the order of
   the stacks in every picture and of the columns in every table. Index in that table, or -1. */
int  dpmem_known_category(const char *name);

#endif
