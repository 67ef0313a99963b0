/* dpmem_read.h — the one reader of dpmem logs (docs/LOG_FORMAT.md, version 1) that every tool uses.

   dpmem_log_open checks the header and makes one validating pass over the chunks: it collects the
   strings, META pairs, thread names, the categories of the tags, the time span and the CLOSE event,
   and finds where the log stops being valid (the end of the data, a cut mid-event, or the byte
   offset where garbage starts). Nothing after that point is ever handed out, so the event iterator
   and the tools behind it can trust every length and every payload size they see.
   DpmemIter then streams the events of all threads merged by timestamp (a heap over the threads'
   next events: each step costs log(threads), whatever their number).

   The file is read with pread() into small buffers, never mapped: a log that another process
   truncates or rewrites while it is read (a trainer re-run on the same path) cannot raise SIGBUS.
   The first pass keeps a checksum of each chunk; the iterator reads a chunk again only when its
   thread's turn comes, checks it against that sum, and stops with dpmem_log_error() set if the
   file changed: the tools then fail with that one line rather than mix two runs. Memory is bounded
   by the strings and the chunks being merged at once, never by the file's size (a sparse log of
   zero chunks costs nothing), and a FIFO or a directory is refused before any read.

   It does not interpret events beyond their layout (replaying live bytes is the tools' business), and
   it never writes logs (dpmem.h does; tools/read/synthlog.h writes synthetic ones for tests and benches). */
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
    uint64_t first_ts;        /* ts of its first event (when end > 32) */
    uint64_t sum;             /* checksum of its first `end` bytes, to see a file that changed */
} DpmemChunk;

struct DpmemLogSource;        /* where the bytes come from, and the lookups (dpmem_read.c) */

typedef struct {
    const char *path;
    size_t size;              /* of the file when it was opened */
    uint32_t version, header_bytes, chunk_bytes;
    uint64_t pid, start_unix_ns, start_ns;

    uint32_t n_strings;       /* sorted by id */
    uint32_t *string_ids;
    const char **strings;     /* copies, valid until dpmem_log_close */

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
    uint64_t header_dropped;  /* the header's count of events the writer dropped (bytes 48..55; 0 in older logs) */
    int corrupt;              /* garbage found: valid data ends at bad_offset */
    uint64_t bad_offset;
    char why[160];            /* what was wrong there */
    uint64_t backwards;       /* events whose ts is before the previous event of their thread
                                 (by more than 1 us: the kit's ALLOC/FREE stamps may lead by ~1 ns) */
    uint64_t backwards_offset;/* the first of them */
    struct DpmemLogSource *src;
} DpmemLog;

/* Opens and validates. Returns 0, or -1 with a one-line reason in err (not a dpmem log, wrong
   version, unreadable, not a regular file...). A log that is truncated or corrupt after a valid
   header opens fine: see closed / corrupt, or print dpmem_log_warn(). */
int  dpmem_log_open(DpmemLog *log, const char *path, char *err, size_t errlen);
/* The same on bytes in memory (not copied: they must outlive the DpmemLog); name is for messages. */
int  dpmem_log_open_memory(DpmemLog *log, const void *data, size_t size, const char *name, char *err, size_t errlen);
void dpmem_log_close(DpmemLog *log);

/* Prints "warning: <path>: ..." to stderr when the log was not closed cleanly, is corrupt, or misses
   events the writer could not write. */
void dpmem_log_warn(const DpmemLog *log, const char *tool);
/* Events the writer could not write (no space), from its CLOSE event or the file header. */
uint64_t dpmem_log_dropped(const DpmemLog *log);

/* The string of an id; "?" when the log has none (a cut log may lose a STRING event). */
const char *dpmem_log_string(const DpmemLog *log, uint32_t id);
/* Index of a string id in log->strings, or -1. */
int32_t     dpmem_log_string_index(const DpmemLog *log, uint32_t id);
/* Index in log->strings of a string by its text (the first such), or -1. */
int32_t     dpmem_log_find_string(const DpmemLog *log, const char *s);
/* Category index of a tag id, or -1. */
int32_t     dpmem_log_category(const DpmemLog *log, uint32_t tag_id);
/* Category index of a category name, or -1. */
int32_t     dpmem_log_category_index(const DpmemLog *log, const char *name);
/* The value of a META key ("run", "config.seq_len", ...), or NULL. The last one written wins. */
const char *dpmem_log_meta(const DpmemLog *log, const char *key);
/* The run's name: META "run" (with " [rank R]" for one rank of a data-parallel job: META
   comm.world_size > 1), else the file name without directories and extension (into buf). */
const char *dpmem_log_run_name(const DpmemLog *log, char *buf, size_t n);

/* "host", "device", "pinned", "managed" for the memory spaces 0..3, else "unknown". */
const char *dpmem_space_name(uint32_t space);
/* Little-endian payload words; 0 past the payload's end. */
uint64_t dpmem_ev_u64(const DpmemEvent *e, uint32_t byte_offset);
uint32_t dpmem_ev_u32(const DpmemEvent *e, uint32_t byte_offset);

/* NULL, or one line saying why reading stopped after the log was opened (the file changed under
   the reader, a read error, out of memory): what the tools computed is then incomplete. */
const char *dpmem_log_error(const DpmemLog *log);

/* Events of all threads in timestamp order (ties: by thread slot, then file order). An event's
   payload (DpmemEvent.p) stays valid until the next dpmem_iter_next or dpmem_iter_end. */
typedef struct {
    const DpmemLog *log;
    uint32_t *chunk;          /* per thread slot: current chunk, or UINT32_MAX when done */
    uint32_t *pos;            /* per thread slot: offset of the next event in its chunk */
    uint8_t **buf;            /* per thread slot: its current chunk's bytes (NULL: not read yet) */
    uint64_t *key;            /* per thread slot: ts of its next event */
    uint32_t *heap, n_heap;   /* the slots with events left, by (key, slot) */
    uint8_t *done;            /* a drained chunk's bytes, freed at the next step */
} DpmemIter;

int  dpmem_iter_begin(DpmemIter *it, const DpmemLog *log);   /* 0, or -1 out of memory */
int  dpmem_iter_next(DpmemIter *it, DpmemEvent *e);          /* 1: an event, 0: the end (or dpmem_log_error) */
void dpmem_iter_end(DpmemIter *it);

/* The fixed order of the known categories (params, grads, optimizer, activations, ...): the order of
   the stacks in every picture and of the columns in every table. Index in that table, or -1. */
int  dpmem_known_category(const char *name);

#endif
