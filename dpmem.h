/* dpmem.h — memory and time instrumentation for (DP-SGD) training loops, one header.

   Tagged allocations give live and peak bytes per category (params, grads, optimizer, activations,
   per_sample_grads, ghost, ...), named scopes give ranges (also NVTX ranges, so they show in Nsight
   Systems), and everything goes to a crash-safe binary log that the tools in tools/ turn into
   timelines, reports and Perfetto traces.

   USE
     In exactly one C or C++ file:
         #define DPMEM_IMPLEMENTATION
         #include "dpmem.h"
     everywhere else just #include "dpmem.h". Link with -ldl -lpthread (NVTX's loader needs -ldl).

         void train_step(void) {
             DPMEM_SCOPE("step");                       // closes when the block ends, however left
             float *h = malloc(n * sizeof *h);
             DPMEM_TAG_ALLOC(h, n * sizeof *h, "activations/layers.3.ffn_hidden");
             { DPMEM_SCOPE("forward"); ... }
             DPMEM_TAG_FREE(h); free(h);
         }
         dpmem_open("run.log");   // or run with DPMEM_LOG=run.log and change nothing
         ...
         printf("peak %zu bytes, of it grads %zu\n", dpmem_peak_bytes(NULL), dpmem_bytes_at_peak("grads"));

   OPTIONS (define before including)
     DPMEM_DISABLE       every macro and function compiles to nothing: no dpmem or NVTX symbol remains.
     DPMEM_NO_NVTX       no NVTX at all: pure C, no CUDA toolkit headers needed, no -ldl.
     DPMEM_DEF           linkage of the public functions (default: extern).
     DPMEM_MAX_DEPTH     scope nesting remembered per thread (default 64; deeper scopes still balance).

   ENVIRONMENT
     DPMEM_LOG=path      open the log at the first event, close it at exit, with no code change.

   THE LOG
     An append-only, versioned binary file written through a shared mapping: after abort(), a segfault,
     exit() without dpmem_close() and even SIGKILL, every event completely written is in the file (at
     most the one event per thread being written at that instant is lost). docs/LOG_FORMAT.md has the
     format. Without a log the kit still keeps its counters and emits NVTX ranges.

   THREADS
     Scopes are per thread (each thread its own stack, its own log chunk: no lock, no atomic).
     Tagged allocations take one short spin lock, so that live and peak bytes and the breakdown at the
     peak are exact whatever the interleaving.

   LIMITS
     DPMEM_SCOPE caches the name's id per call site: the name must be the same string each time the
     site runs (a literal). For a name computed at run time use DPMEM_SCOPE_DYN. One scope macro per
     source line. longjmp() out of a scope skips its end (as it skips any cleanup); C++ exceptions do not.

   LICENCE: MIT. */

#ifndef DPMEM_H
#define DPMEM_H

/* The implementation needs POSIX (mmap, pthreads, clock_gettime); this takes effect when dpmem.h is
   the first header of the implementation file, else compile that file with -D_GNU_SOURCE. */
#if defined(DPMEM_IMPLEMENTATION) && !defined(DPMEM_DISABLE) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <stdint.h>

#ifndef DPMEM_DEF
#define DPMEM_DEF extern
#endif

/* The kit never reads the memory it tags: say so, or GCC >= 11 warns about tagging fresh malloc()
   memory ("may be used uninitialized") through the const pointer. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define DPMEM__NOACCESS(n) __attribute__((access(none, n)))
#else
#define DPMEM__NOACCESS(n)
#endif

/* Memory spaces of a tagged allocation (dpmem_cuda.h uses the others). */
enum { DPMEM_HOST = 0, DPMEM_DEVICE = 1, DPMEM_PINNED = 2, DPMEM_MANAGED = 3 };

/* Hooks for layers such as dpmem_cuda.h. */
typedef void (*dpmem_scope_hook_fn)(void *user, int begin, uint32_t name_id, uint64_t ts_ns);
typedef int  (*dpmem_device_info_fn)(void *user, size_t *used, size_t *total);
typedef void (*dpmem_close_hook_fn)(void *user);

#ifndef DPMEM_DISABLE

#ifdef __cplusplus
extern "C" {
#endif

/* The log. dpmem_open returns 0, or -1 with a one-line message on stderr. Opening when a log is open
   closes the old one first. Counters are kept whether or not a log is open. */
DPMEM_DEF int         dpmem_open(const char *path);
DPMEM_DEF void        dpmem_close(void);
DPMEM_DEF int         dpmem_logging(void);
DPMEM_DEF void        dpmem_meta(const char *key, const char *value);     /* run configuration */
DPMEM_DEF void        dpmem_meta_int(const char *key, long long value);

/* Ranges. Prefer DPMEM_SCOPE; these are for compilers without the cleanup attribute. */
DPMEM_DEF void        dpmem_range_push(const char *name);
DPMEM_DEF void        dpmem_range_pop(void);

/* Tagged memory. tag = "category/name". Freeing an unknown pointer records a WARN and returns 0. */
DPMEM_DEF void        dpmem_tag_alloc(const void *ptr, size_t bytes, const char *tag) DPMEM__NOACCESS(1);
DPMEM_DEF void        dpmem_tag_alloc_space(const void *ptr, size_t bytes, const char *tag, int space) DPMEM__NOACCESS(1);
DPMEM_DEF size_t      dpmem_tag_free(const void *ptr) DPMEM__NOACCESS(1);
DPMEM_DEF void        dpmem_snapshot(const char *label);

/* Queries. category NULL = the total over all categories. */
DPMEM_DEF size_t      dpmem_live_bytes(const char *category);
DPMEM_DEF size_t      dpmem_peak_bytes(const char *category);   /* the category's own high-water mark */
DPMEM_DEF size_t      dpmem_bytes_at_peak(const char *category);/* its live bytes when the total peaked */
DPMEM_DEF size_t      dpmem_live_bytes_in(int space);           /* live bytes in one memory space */
DPMEM_DEF int         dpmem_category_count(void);               /* categories seen so far ...      */
DPMEM_DEF const char *dpmem_category_name(int i);               /* ... by index, 0 <= i < count    */
DPMEM_DEF size_t      dpmem_tag_bytes(const void *ptr) DPMEM__NOACCESS(1); /* bytes of a live allocation, or 0 */
DPMEM_DEF void        dpmem_reset_peak(void);                   /* peaks := live (per-phase peaks)  */

/* Post-mortem of a failed allocation: an OOM event (request, live by category, the largest buffers,
   the scope stack, device figures) flushed to the log, and a one-paragraph report on stderr. Called
   by dpmem_cuda.h on cudaErrorMemoryAllocation and by allocators that enforce a memory limit. */
DPMEM_DEF void        dpmem_oom(size_t bytes, const char *tag, int space, size_t device_used, size_t device_total);

/* Time and threads. */
DPMEM_DEF uint64_t    dpmem_now_ns(void);
DPMEM_DEF void        dpmem_thread_name(const char *name);
DPMEM_DEF uint32_t    dpmem_thread_index(void);

/* For layers (dpmem_cuda.h): a hook on every scope begin/end, device figures for snapshots, and
   events that such a layer writes. */
DPMEM_DEF void        dpmem_set_scope_hook(dpmem_scope_hook_fn fn, void *user);
DPMEM_DEF void        dpmem_set_device_info(dpmem_device_info_fn fn, void *user);
DPMEM_DEF void        dpmem_set_close_hook(dpmem_close_hook_fn fn, void *user); /* runs first in dpmem_close */
DPMEM_DEF void        dpmem_log_gpu_time(uint32_t thread, uint32_t name_id, uint64_t begin_ts_ns, uint64_t gpu_ns);
DPMEM_DEF void        dpmem_log_device_sample(size_t used, size_t total);
DPMEM_DEF void        dpmem_warn(const char *message, uint64_t value);
DPMEM_DEF uint32_t    dpmem_intern(const char *s);               /* string -> id (stable for the run) */
DPMEM_DEF const char *dpmem_string(uint32_t id);
DPMEM_DEF int         dpmem_scope_stack(uint32_t *ids, int max);  /* this thread's open scopes      */

/* Internals the macros expand to. */
DPMEM_DEF uint32_t    dpmem__scope_begin(uint32_t *site_id, const char *name);
DPMEM_DEF void        dpmem__scope_end(uint32_t *unused);

#ifdef __cplusplus
}
#endif

#define DPMEM__CAT2(a, b) a##b
#define DPMEM__CAT(a, b) DPMEM__CAT2(a, b)

#if defined(__cplusplus)
struct dpmem__scoped {
    explicit dpmem__scoped(uint32_t *site, const char *name) { dpmem__scope_begin(site, name); }
    ~dpmem__scoped() { dpmem__scope_end(nullptr); }
    dpmem__scoped(const dpmem__scoped &) = delete;
    dpmem__scoped &operator=(const dpmem__scoped &) = delete;
};
#define DPMEM_SCOPE(name)                                                                          \
    static uint32_t DPMEM__CAT(dpmem__site_, __LINE__);                                            \
    dpmem__scoped DPMEM__CAT(dpmem__scope_, __LINE__)(&DPMEM__CAT(dpmem__site_, __LINE__), (name))
#define DPMEM_SCOPE_DYN(name) dpmem__scoped DPMEM__CAT(dpmem__scope_, __LINE__)(nullptr, (name))
#elif defined(__GNUC__) || defined(__clang__)
#define DPMEM_SCOPE(name)                                                                          \
    static uint32_t DPMEM__CAT(dpmem__site_, __LINE__);                                            \
    uint32_t DPMEM__CAT(dpmem__scope_, __LINE__) __attribute__((cleanup(dpmem__scope_end), unused)) = \
        dpmem__scope_begin(&DPMEM__CAT(dpmem__site_, __LINE__), (name))
#define DPMEM_SCOPE_DYN(name)                                                                      \
    uint32_t DPMEM__CAT(dpmem__scope_, __LINE__) __attribute__((cleanup(dpmem__scope_end), unused)) = \
        dpmem__scope_begin(NULL, (name))
#else
#error "DPMEM_SCOPE needs C++ or a C compiler with __attribute__((cleanup)); use dpmem_range_push/pop"
#endif

#define DPMEM_TAG_ALLOC(ptr, bytes, tag) dpmem_tag_alloc((ptr), (bytes), (tag))
#define DPMEM_TAG_FREE(ptr)              ((void)dpmem_tag_free(ptr))
#define DPMEM_SNAPSHOT(label)            dpmem_snapshot(label)

#else /* DPMEM_DISABLE: everything is a no-op expression; nothing is emitted, no symbol remains. */

/* A value that may also stand alone as a statement without -Wunused-value. */
#if defined(__cplusplus) || !defined(__GNUC__)
#define DPMEM__VALUE(v) ((void)0, (v))
#else
#define DPMEM__VALUE(v) (__extension__({ (v); }))
#endif

#define DPMEM_SCOPE(name)                ((void)0)
#define DPMEM_SCOPE_DYN(name)            ((void)0)
#define DPMEM_TAG_ALLOC(ptr, bytes, tag) ((void)0)
#define DPMEM_TAG_FREE(ptr)              ((void)0)
#define DPMEM_SNAPSHOT(label)            ((void)0)
#define dpmem_open(path)                 DPMEM__VALUE(0)
#define dpmem_close()                    ((void)0)
#define dpmem_logging()                  DPMEM__VALUE(0)
#define dpmem_meta(k, v)                 ((void)0)
#define dpmem_meta_int(k, v)             ((void)0)
#define dpmem_range_push(name)           ((void)0)
#define dpmem_range_pop()                ((void)0)
#define dpmem_tag_alloc(p, n, t)         ((void)0)
#define dpmem_tag_alloc_space(p, n, t, s) ((void)0)
#define dpmem_tag_free(p)                DPMEM__VALUE((size_t)0)
#define dpmem_snapshot(label)            ((void)0)
#define dpmem_live_bytes(c)              DPMEM__VALUE((size_t)0)
#define dpmem_peak_bytes(c)              DPMEM__VALUE((size_t)0)
#define dpmem_bytes_at_peak(c)           DPMEM__VALUE((size_t)0)
#define dpmem_live_bytes_in(s)           DPMEM__VALUE((size_t)0)
#define dpmem_category_count()           DPMEM__VALUE(0)
#define dpmem_category_name(i)           DPMEM__VALUE((const char *)0)
#define dpmem_tag_bytes(p)               DPMEM__VALUE((size_t)0)
#define dpmem_reset_peak()               ((void)0)
#define dpmem_oom(n, t, s, u, tot)       ((void)0)
#define dpmem_now_ns()                   DPMEM__VALUE((uint64_t)0)
#define dpmem_thread_name(n)             ((void)0)
#define dpmem_thread_index()             DPMEM__VALUE((uint32_t)0)
#define dpmem_set_scope_hook(f, u)       ((void)0)
#define dpmem_set_device_info(f, u)      ((void)0)
#define dpmem_set_close_hook(f, u)       ((void)0)
#define dpmem_log_gpu_time(a, b, c, d)   ((void)0)
#define dpmem_log_device_sample(u, t)    ((void)0)
#define dpmem_warn(m, v)                 ((void)0)
#define dpmem_intern(s)                  DPMEM__VALUE((uint32_t)0)
#define dpmem_string(id)                 DPMEM__VALUE((const char *)0)
#define dpmem_scope_stack(ids, max)      DPMEM__VALUE(0)

#endif /* DPMEM_DISABLE */
#endif /* DPMEM_H */

/* ============================================================================================== */
/*                                       IMPLEMENTATION                                           */
/* ============================================================================================== */
#if defined(DPMEM_IMPLEMENTATION) && !defined(DPMEM_DISABLE) && !defined(DPMEM__IMPLEMENTED)
#define DPMEM__IMPLEMENTED
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifndef DPMEM_NO_NVTX
/* NVIDIA's loader casts dlsym()'s result to a function pointer, which ISO C calls pedantic. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
#include <nvtx3/nvToolsExt.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

#ifndef DPMEM_MAX_DEPTH
#define DPMEM_MAX_DEPTH 64
#endif

#if defined(__cplusplus)
#define DPMEM__TLS thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define DPMEM__TLS _Thread_local
#else
#define DPMEM__TLS __thread
#endif

#define DPMEM__LIKELY(x)   __builtin_expect(!!(x), 1)
#define DPMEM__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define DPMEM__LOAD(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define DPMEM__RELAXED(p)  __atomic_load_n((p), __ATOMIC_RELAXED)
#define DPMEM__STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* ---- log format (docs/LOG_FORMAT.md) ---------------------------------------------------------- */
enum {
    DPMEM__EV_STRING = 1, DPMEM__EV_THREAD, DPMEM__EV_META, DPMEM__EV_BEGIN, DPMEM__EV_END,
    DPMEM__EV_ALLOC, DPMEM__EV_FREE, DPMEM__EV_WARN, DPMEM__EV_SNAPSHOT, DPMEM__EV_GPU_TIME,
    DPMEM__EV_OOM, DPMEM__EV_DEVICE, DPMEM__EV_CLOSE
};
#define DPMEM__VERSION      1u
#define DPMEM__HEADER_BYTES 4096u
#define DPMEM__CHUNK_BYTES  65536u
#define DPMEM__CHUNK_HEAD   32u
#define DPMEM__CHUNK_MAGIC  0x4B435044u
#define DPMEM__MAX_STRING   1024u /* longer strings are cut in the log */
#define DPMEM__PAGE_BITS    10u
#define DPMEM__MAX_PAGES    1024u /* up to ~1M distinct strings */
#define DPMEM__MAX_SEGMENTS 1024u /* 1024 segments of at most 64 MiB: a log of up to ~64 GiB */

/* ---- state ------------------------------------------------------------------------------------ */
typedef struct {
    const char *s;
    uint32_t    len, hash;
    uint32_t    logged_gen; /* log generation in which its STRING event was written */
    int32_t     tag_cat;    /* category index when used as a tag, -1 before */
    uint32_t    color;      /* ARGB, stable per name */
#ifndef DPMEM_NO_NVTX
    nvtxStringHandle_t nvtx;
#endif
} dpmem__str;

typedef struct { uint64_t addr, bytes; uint32_t tag, cat; int space, used; } dpmem__rec;
typedef struct { uint32_t name; uint64_t live, peak, at_peak; } dpmem__cat;
typedef struct { uint8_t *base; uint64_t first_chunk, nchunks; } dpmem__segment;

typedef struct {
    uint32_t gen;               /* log generation of the chunk below; the log is open while G.gen is odd */
    uint32_t pos, cap;
    uint8_t *chunk;
    uint32_t index;             /* thread index, 1-based */
    uint32_t announced;         /* generation in which THREAD was written */
    uint32_t depth;
    uint32_t stack[DPMEM_MAX_DEPTH];
    char     name[32];
    struct { const char *ptr; uint32_t id; } tags[16]; /* tag pointer -> id, checked by content */
} dpmem__thread;

static struct {
    /* hot, read on every event */
    uint32_t gen;               /* odd: a log is open */
    int      ready;             /* init done */
    dpmem_scope_hook_fn scope_hook; void *scope_hook_user;
#ifndef DPMEM_NO_NVTX
    nvtxDomainHandle_t domain;  /* NULL when no NVTX tool is attached: NVTX calls are skipped */
#endif
    double   ns_per_tick;
    uint64_t tick0, ns0;
    int      use_tsc;

    /* one spin lock for strings and accounting, on a cache line of its own: every event reads the
       line above (gen, ready, ...), and a lock word there would make each acquisition evict it */
    char     pad0[64];
    int      lock;
    char     pad1[60];
    dpmem__str *pages[DPMEM__MAX_PAGES];
    uint32_t nstr;              /* ids 1..nstr */
    uint32_t *index; uint32_t index_cap;       /* open addressing: string ids by hash */
    dpmem__rec *recs; uint64_t rec_cap, nrec;  /* live allocations by address */
    dpmem__cat *cats; int ncat, cat_cap;
    uint64_t live, peak, live_space[4];
    uint64_t last_alloc_ts;
    uint32_t *meta; int nmeta, meta_cap;       /* (key, value) ids, re-emitted at each open */

    /* the log file; chunk allocation under log_mu */
    pthread_mutex_t log_mu;
    int      fd;
    char    *path;
    uint64_t next_chunk, mapped_chunks, populated;
    dpmem__segment seg[DPMEM__MAX_SEGMENTS]; int nseg;
    pthread_t pf_thread; pthread_cond_t pf_cv; int pf_run, pf_started; /* the prefault thread */
    uint64_t dropped;
    uint32_t next_thread;

    dpmem_device_info_fn device_info; void *device_info_user;
    dpmem_close_hook_fn close_hook; void *close_hook_user;
} dpmem__G; /* zero-initialised; log_mu is initialised in dpmem__init_once */

static DPMEM__TLS dpmem__thread dpmem__T;
static pthread_once_t dpmem__once = PTHREAD_ONCE_INIT;

/* ---- clock: rdtsc where it is invariant, else CLOCK_MONOTONIC --------------------------------- */
static uint64_t dpmem__mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline uint64_t dpmem__now(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (DPMEM__LIKELY(dpmem__G.use_tsc))
        return dpmem__G.ns0 + (uint64_t)((double)(int64_t)(__builtin_ia32_rdtsc() - dpmem__G.tick0) * dpmem__G.ns_per_tick);
#endif
    return dpmem__mono_ns();
}
static void dpmem__clock_init(void) {
    dpmem__G.ns0 = dpmem__mono_ns();
#if defined(__x86_64__) || defined(__i386__)
    const char *want = getenv("DPMEM_CLOCK");
    int invariant = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5)) { invariant = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc"); break; }
        fclose(f);
    }
    if (want && !strcmp(want, "monotonic")) invariant = 0;
    if (!invariant) return;
    /* Calibrate ticks against CLOCK_MONOTONIC over ~2 ms (error ~1e-5). */
    uint64_t n0 = dpmem__mono_ns(), t0 = __builtin_ia32_rdtsc(), n1, t1;
    do { n1 = dpmem__mono_ns(); t1 = __builtin_ia32_rdtsc(); } while (n1 - n0 < 2000000);
    if (t1 <= t0) return;
    dpmem__G.ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
    dpmem__G.tick0 = t1;
    dpmem__G.ns0 = n1;
    dpmem__G.use_tsc = 1;
#endif
}

/* ---- the spin lock (short critical sections; yields when the holder is descheduled) ----------- */
static inline void dpmem__lock(void) {
    for (int spins = 0; __atomic_exchange_n(&dpmem__G.lock, 1, __ATOMIC_ACQUIRE); ) {
        while (DPMEM__RELAXED(&dpmem__G.lock)) {
            if (++spins > 64) { sched_yield(); spins = 0; }
#if defined(__x86_64__) || defined(__i386__)
            else __builtin_ia32_pause();
#endif
        }
    }
}
static inline void dpmem__unlock(void) { __atomic_store_n(&dpmem__G.lock, 0, __ATOMIC_RELEASE); }

/* ---- writing events into this thread's chunk -------------------------------------------------- */
static uint8_t *dpmem__chunk_addr(uint64_t k) {
    for (int i = 0; i < dpmem__G.nseg; i++) {
        dpmem__segment *s = &dpmem__G.seg[i];
        if (k >= s->first_chunk && k < s->first_chunk + s->nchunks)
            return s->base + (k - s->first_chunk) * DPMEM__CHUNK_BYTES;
    }
    return NULL;
}

static void dpmem__emit_thread(dpmem__thread *t);

/* Grows the file by a new segment (1 MiB, doubling to 64 MiB) and maps it; log_mu held. The space
   is reserved with posix_fallocate: a store into a sparse mapping on a full disk would be a SIGBUS. */
static int dpmem__grow_locked(void) {
    uint64_t n = dpmem__G.nseg ? dpmem__G.seg[dpmem__G.nseg - 1].nchunks * 2 : 16;
    if (n > 1024) n = 1024;
    off_t off = (off_t)DPMEM__HEADER_BYTES + (off_t)(dpmem__G.mapped_chunks * DPMEM__CHUNK_BYTES);
    void *base = MAP_FAILED;
    int err = 0;
    if (dpmem__G.nseg < (int)DPMEM__MAX_SEGMENTS &&
        (err = posix_fallocate(dpmem__G.fd, off, (off_t)(n * DPMEM__CHUNK_BYTES))) == 0)
        base = mmap(NULL, n * DPMEM__CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, dpmem__G.fd, off);
    if (base == MAP_FAILED) {
        if (!dpmem__G.dropped) {
            if (dpmem__G.nseg >= (int)DPMEM__MAX_SEGMENTS)
                fprintf(stderr, "dpmem: the log %s reached its size limit (%d segments): further events are dropped\n",
                        dpmem__G.path ? dpmem__G.path : "", (int)DPMEM__MAX_SEGMENTS);
            else
                fprintf(stderr, "dpmem: cannot grow the log %s (%s): further events are dropped\n",
                        dpmem__G.path ? dpmem__G.path : "", strerror(err ? err : errno));
        }
        dpmem__G.dropped++;
        return -1;
    }
    dpmem__segment *sg = &dpmem__G.seg[dpmem__G.nseg++];
    sg->base = (uint8_t *)base; sg->first_chunk = dpmem__G.mapped_chunks; sg->nchunks = n;
    dpmem__G.mapped_chunks += n;
    return 0;
}

/* Maps the pages of chunks [from, to) in one call each, instead of a page fault (and the kernel
   zeroing a page) every 4 KiB on the hot path. Linux >= 5.14; elsewhere pages fault in as touched. */
static void dpmem__populate(uint64_t from, uint64_t to) {
#ifdef MADV_POPULATE_WRITE
    for (uint64_t k = from; k < to; k++) madvise(dpmem__chunk_addr(k), DPMEM__CHUNK_BYTES, MADV_POPULATE_WRITE);
#else
    (void)from; (void)to;
#endif
}

/* The prefault thread keeps DPMEM__AHEAD chunks beyond the last one handed out mapped and
   populated, so that writers never wait on the kernel. It only touches chunks nobody owns yet. */
#define DPMEM__AHEAD 32u
static void *dpmem__prefault_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&dpmem__G.log_mu);
    while (dpmem__G.pf_run) {
        uint64_t target = dpmem__G.next_chunk + DPMEM__AHEAD;
        if (dpmem__G.populated >= target) { pthread_cond_wait(&dpmem__G.pf_cv, &dpmem__G.log_mu); continue; }
        while (dpmem__G.mapped_chunks < target) if (dpmem__grow_locked() != 0) { dpmem__G.pf_run = 0; break; }
        if (!dpmem__G.pf_run) break;
        uint64_t from = dpmem__G.populated > dpmem__G.next_chunk ? dpmem__G.populated : dpmem__G.next_chunk;
        dpmem__G.populated = target;          /* claimed: writers that get there first populate their own */
        pthread_mutex_unlock(&dpmem__G.log_mu);
        dpmem__populate(from, target);
        pthread_mutex_lock(&dpmem__G.log_mu);
    }
    pthread_mutex_unlock(&dpmem__G.log_mu);
    return NULL;
}

/* Takes a fresh chunk for this thread (log_mu held inside). NULL when no log is open. */
static uint8_t *dpmem__reserve_slow(dpmem__thread *t, uint32_t bytes) {
    if (bytes > DPMEM__CHUNK_BYTES - DPMEM__CHUNK_HEAD) { __atomic_fetch_add(&dpmem__G.dropped, 1, __ATOMIC_RELAXED); return NULL; }
    pthread_mutex_lock(&dpmem__G.log_mu);
    uint32_t gen = dpmem__G.gen;
    if (!(gen & 1)) { pthread_mutex_unlock(&dpmem__G.log_mu); return NULL; }
    if (dpmem__G.next_chunk == dpmem__G.mapped_chunks && dpmem__grow_locked() != 0) {
        pthread_mutex_unlock(&dpmem__G.log_mu);
        return NULL;
    }
    uint64_t k = dpmem__G.next_chunk++;
    uint8_t *c = dpmem__chunk_addr(k);
    int populated = k < dpmem__G.populated;
    if (dpmem__G.pf_run && k + DPMEM__AHEAD / 2 >= dpmem__G.populated) pthread_cond_signal(&dpmem__G.pf_cv);
    pthread_mutex_unlock(&dpmem__G.log_mu);
    if (!populated) dpmem__populate(k, k + 1);

    if (!t->index) t->index = __atomic_add_fetch(&dpmem__G.next_thread, 1, __ATOMIC_RELAXED);
    uint64_t ts = dpmem__now();
    memcpy(c + 4, &t->index, 4);
    memcpy(c + 8, &k, 8);
    memcpy(c + 16, &ts, 8);
    uint32_t magic = DPMEM__CHUNK_MAGIC;
    __atomic_store_n((uint32_t *)(void *)c, magic, __ATOMIC_RELEASE);
    t->chunk = c; t->pos = DPMEM__CHUNK_HEAD; t->cap = DPMEM__CHUNK_BYTES; t->gen = gen;
    if (t->announced != gen) { t->announced = gen; dpmem__emit_thread(t); }
    uint8_t *p = t->chunk + t->pos;
    t->pos += bytes;
    return p;
}

/* Space for an event of `bytes` (a multiple of 8) in this thread's chunk, or NULL (no log). */
static inline uint8_t *dpmem__reserve(dpmem__thread *t, uint32_t bytes) {
    if (DPMEM__LIKELY(t->gen == DPMEM__LOAD(&dpmem__G.gen) && t->pos + bytes <= t->cap)) {
        uint8_t *p = t->chunk + t->pos;
        t->pos += bytes;
        return p;
    }
    return dpmem__reserve_slow(t, bytes);
}

/* Publishes an event whose payload is written: the head word goes last, so a reader (or a process
   killed in between) never sees half an event. */
static inline void dpmem__commit(uint8_t *p, uint32_t type, uint32_t aux, uint32_t bytes, uint32_t id, uint64_t ts) {
    memcpy(p + 4, &id, 4);
    memcpy(p + 8, &ts, 8);
    __atomic_store_n((uint32_t *)(void *)p, type | (aux << 8) | ((bytes / 8) << 16), __ATOMIC_RELEASE);
}

static inline int dpmem__log_open(void) { return DPMEM__RELAXED(&dpmem__G.gen) & 1; }

static inline dpmem__str *dpmem__S(uint32_t id) {
    dpmem__str *page = DPMEM__LOAD(&dpmem__G.pages[id >> DPMEM__PAGE_BITS]);
    return &page[id & ((1u << DPMEM__PAGE_BITS) - 1)];
}

static const char *dpmem__name(uint32_t id) { return id ? dpmem__S(id)->s : "?"; }

/* Writes the STRING event of `id` into this log if this log does not have it yet. */
static void dpmem__ensure_string_at(dpmem__thread *t, uint32_t id, uint64_t ts);
static void dpmem__ensure_string(dpmem__thread *t, uint32_t id) { dpmem__ensure_string_at(t, id, 0); }
/* ts 0: now. An event stamped before its STRING was written (an ALLOC reads the clock before the lock,
   a BEGIN before the string) passes its own ts, so that the thread's events stay in time order. */
static void dpmem__ensure_string_at(dpmem__thread *t, uint32_t id, uint64_t ts) {
    if (!id) return;
    dpmem__str *s = dpmem__S(id);
    uint32_t gen = DPMEM__RELAXED(&dpmem__G.gen);
    if (DPMEM__LIKELY(DPMEM__RELAXED(&s->logged_gen) == gen)) return;
    uint32_t len = s->len < DPMEM__MAX_STRING ? s->len : DPMEM__MAX_STRING;
    uint32_t bytes = 16 + ((len + 1 + 7) & ~7u);
    uint8_t *p = dpmem__reserve(t, bytes);
    if (!p) return;
    memcpy(p + 16, s->s, len);
    memset(p + 16 + len, 0, bytes - 16 - len);
    dpmem__commit(p, DPMEM__EV_STRING, 0, bytes, id, ts ? ts : dpmem__now());
    __atomic_store_n(&s->logged_gen, gen, __ATOMIC_RELAXED);
}

static void dpmem__emit_thread(dpmem__thread *t) {
    size_t nlen = strlen(t->name);
    uint32_t bytes = 24 + (uint32_t)((nlen + 1 + 7) & ~(size_t)7);
    uint8_t *p = dpmem__reserve(t, bytes);
    if (!p) return;
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    memcpy(p + 16, &tid, 8);
    memset(p + 24, 0, bytes - 24);
    memcpy(p + 24, t->name, nlen);
    dpmem__commit(p, DPMEM__EV_THREAD, 0, bytes, t->index, dpmem__now());
}

/* A fixed-size event: head, id, ts, then n 64-bit payload words. */
static void dpmem__emit(uint32_t type, uint32_t aux, uint32_t id, uint64_t ts, const uint64_t *w, int n) {
    dpmem__thread *t = &dpmem__T;
    dpmem__ensure_string_at(t, id, ts);
    uint32_t bytes = 16 + 8 * (uint32_t)n;
    uint8_t *p = dpmem__reserve(t, bytes);
    if (!p) return;
    if (n) memcpy(p + 16, w, 8 * (size_t)n);
    dpmem__commit(p, type, aux, bytes, id, ts);
}

/* ---- strings ---------------------------------------------------------------------------------- */
static uint32_t dpmem__hash(const char *s, uint32_t *len) {
    uint32_t h = 2166136261u; const char *p = s;
    for (; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    *len = (uint32_t)(p - s);
    return h ? h : 1;
}

static uint32_t dpmem__color(uint32_t h) {
    static const uint32_t palette[16] = {
        0xFF4E79A7, 0xFFF28E2B, 0xFFE15759, 0xFF76B7B2, 0xFF59A14F, 0xFFEDC948, 0xFFB07AA1, 0xFFFF9DA7,
        0xFF9C755F, 0xFFBAB0AC, 0xFF1F77B4, 0xFF2CA02C, 0xFFD62728, 0xFF9467BD, 0xFF8C564B, 0xFF17BECF };
    return palette[(h ^ (h >> 16)) & 15];
}

/* string -> id, with the lock held. 0 when the table is full. */
static uint32_t dpmem__intern_locked(const char *s) {
    uint32_t len, h = dpmem__hash(s, &len);
    if (dpmem__G.index_cap) {
        uint32_t mask = dpmem__G.index_cap - 1;
        for (uint32_t i = h & mask;; i = (i + 1) & mask) {
            uint32_t id = dpmem__G.index[i];
            if (!id) break;
            dpmem__str *e = dpmem__S(id);
            if (e->hash == h && e->len == len && !memcmp(e->s, s, len)) return id;
        }
    }
    uint32_t id = dpmem__G.nstr + 1;
    if ((id >> DPMEM__PAGE_BITS) >= DPMEM__MAX_PAGES) return 0;
    if (2 * (id + 1) > dpmem__G.index_cap) { /* rehash at half load */
        uint32_t cap = dpmem__G.index_cap ? dpmem__G.index_cap * 2 : 1024;
        uint32_t *ix = (uint32_t *)calloc(cap, sizeof *ix);
        if (!ix) return 0;
        for (uint32_t j = 1; j < id; j++) {
            uint32_t k = dpmem__S(j)->hash & (cap - 1);
            while (ix[k]) k = (k + 1) & (cap - 1);
            ix[k] = j;
        }
        free(dpmem__G.index);
        dpmem__G.index = ix; dpmem__G.index_cap = cap;
    }
    uint32_t pg = id >> DPMEM__PAGE_BITS;
    if (!dpmem__G.pages[pg]) {
        dpmem__str *page = (dpmem__str *)calloc((size_t)1 << DPMEM__PAGE_BITS, sizeof(dpmem__str));
        if (!page) return 0;
        DPMEM__STORE(&dpmem__G.pages[pg], page);
    }
    char *copy = (char *)malloc(len + 1);
    if (!copy) return 0;
    memcpy(copy, s, len + 1);
    dpmem__str *e = dpmem__S(id);
    e->s = copy; e->len = len; e->hash = h; e->tag_cat = -1; e->color = dpmem__color(h);
#ifndef DPMEM_NO_NVTX
    if (dpmem__G.domain) e->nvtx = nvtxDomainRegisterStringA(dpmem__G.domain, copy);
#endif
    uint32_t k = h & (dpmem__G.index_cap - 1);
    while (dpmem__G.index[k]) k = (k + 1) & (dpmem__G.index_cap - 1);
    dpmem__G.index[k] = id;
    DPMEM__STORE(&dpmem__G.nstr, id);
    return id;
}

/* A tag's id without hashing it: most programs pass the same few tag strings again and again, so
   each thread remembers the id last seen at a pointer and checks the bytes (a buffer may have been
   rewritten since). Interned strings never move or change, so they are read without the lock. */
static uint32_t dpmem__tag_id(const char *tag) {
    dpmem__thread *t = &dpmem__T;
    unsigned slot = (unsigned)(((uintptr_t)tag >> 3) & 15);
    uint32_t id = t->tags[slot].id;
    if (t->tags[slot].ptr == tag && id) {
        const dpmem__str *e = dpmem__S(id);
        if (!memcmp(e->s, tag, e->len + 1)) return id;
    }
    dpmem__lock();
    id = dpmem__intern_locked(tag);
    dpmem__unlock();
    t->tags[slot].ptr = tag; t->tags[slot].id = id;
    return id;
}

/* ---- accounting ------------------------------------------------------------------------------- */
static int dpmem__category_of_tag_locked(uint32_t tag) {
    dpmem__str *e = dpmem__S(tag);
    if (e->tag_cat >= 0) return e->tag_cat;
    char buf[256];
    const char *slash = (const char *)memchr(e->s, '/', e->len);
    size_t n = slash ? (size_t)(slash - e->s) : e->len;
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, e->s, n); buf[n] = 0;
    uint32_t cid = dpmem__intern_locked(buf);
    int c;
    for (c = 0; c < dpmem__G.ncat; c++) if (dpmem__G.cats[c].name == cid) break;
    if (c == dpmem__G.ncat) {
        if (dpmem__G.ncat == dpmem__G.cat_cap) {
            int cap = dpmem__G.cat_cap ? 2 * dpmem__G.cat_cap : 32;
            dpmem__cat *nc = (dpmem__cat *)realloc(dpmem__G.cats, (size_t)cap * sizeof *nc);
            if (!nc) return 0;
            dpmem__G.cats = nc; dpmem__G.cat_cap = cap;
        }
        dpmem__cat z = { cid, 0, 0, 0 };
        dpmem__G.cats[dpmem__G.ncat++] = z;
    }
    /* re-read: intern may have moved nothing, but the entry pointer stays valid (pages never move) */
    dpmem__S(tag)->tag_cat = c;
    return c;
}

static inline uint64_t dpmem__addr_hash(uint64_t a) { a ^= a >> 33; a *= 0xff51afd7ed558ccdull; a ^= a >> 33; return a; }

static dpmem__rec *dpmem__rec_find_locked(uint64_t addr) {
    if (!dpmem__G.rec_cap) return NULL;
    uint64_t mask = dpmem__G.rec_cap - 1;
    for (uint64_t i = dpmem__addr_hash(addr) & mask;; i = (i + 1) & mask) {
        dpmem__rec *r = &dpmem__G.recs[i];
        if (!r->used) return NULL;
        if (r->addr == addr) return r;
    }
}

static int dpmem__rec_insert_locked(const dpmem__rec *nr) {
    if (2 * (dpmem__G.nrec + 1) > dpmem__G.rec_cap) {
        uint64_t cap = dpmem__G.rec_cap ? 2 * dpmem__G.rec_cap : 1024;
        dpmem__rec *recs = (dpmem__rec *)calloc(cap, sizeof *recs);
        if (!recs) return -1;
        for (uint64_t i = 0; i < dpmem__G.rec_cap; i++) {
            if (!dpmem__G.recs[i].used) continue;
            uint64_t k = dpmem__addr_hash(dpmem__G.recs[i].addr) & (cap - 1);
            while (recs[k].used) k = (k + 1) & (cap - 1);
            recs[k] = dpmem__G.recs[i];
        }
        free(dpmem__G.recs);
        dpmem__G.recs = recs; dpmem__G.rec_cap = cap;
    }
    uint64_t mask = dpmem__G.rec_cap - 1, k = dpmem__addr_hash(nr->addr) & mask;
    while (dpmem__G.recs[k].used) k = (k + 1) & mask;
    dpmem__G.recs[k] = *nr;
    dpmem__G.recs[k].used = 1;
    dpmem__G.nrec++;
    return 0;
}

/* Linear probing removal by backward shift: no tombstones, lookups stay short. */
static void dpmem__rec_remove_locked(dpmem__rec *r) {
    uint64_t mask = dpmem__G.rec_cap - 1, i = (uint64_t)(r - dpmem__G.recs), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!dpmem__G.recs[j].used) break;
        uint64_t k = dpmem__addr_hash(dpmem__G.recs[j].addr) & mask;
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            dpmem__G.recs[i] = dpmem__G.recs[j];
            i = j;
        }
    }
    dpmem__G.recs[i].used = 0;
    dpmem__G.nrec--;
}

static void dpmem__account_locked(int cat, int space, uint64_t bytes, int add) {
    dpmem__cat *c = &dpmem__G.cats[cat];
    if (add) {
        c->live += bytes; dpmem__G.live += bytes; dpmem__G.live_space[space & 3] += bytes;
        if (c->live > c->peak) c->peak = c->live;
        if (dpmem__G.live > dpmem__G.peak) {
            dpmem__G.peak = dpmem__G.live;
            for (int i = 0; i < dpmem__G.ncat; i++) dpmem__G.cats[i].at_peak = dpmem__G.cats[i].live;
        }
    } else {
        c->live -= bytes; dpmem__G.live -= bytes; dpmem__G.live_space[space & 3] -= bytes;
    }
}

/* ALLOC/FREE timestamps are strictly increasing across threads (made so under the lock), so a reader
   that sorts them by time replays the accounting exactly. The clock is read before the lock is
   taken, where its latency overlaps the lock's. */
static inline uint64_t dpmem__alloc_ts_locked(uint64_t ts) {
    if (ts <= dpmem__G.last_alloc_ts) ts = dpmem__G.last_alloc_ts + 1;
    dpmem__G.last_alloc_ts = ts;
    return ts;
}

static void dpmem__warn_locked(const char *msg, uint64_t value) {
    uint32_t id = dpmem__intern_locked(msg);
    if (dpmem__log_open()) dpmem__emit(DPMEM__EV_WARN, 0, id, dpmem__now(), &value, 1);
}

/* ---- init, open, close ------------------------------------------------------------------------ */
static void dpmem__atexit(void) { dpmem_close(); }
static void dpmem__atfork_child(void) {
    /* The child must not write into (or truncate) the parent's log: it starts with no log. */
    dpmem__G.gen += (dpmem__G.gen & 1);
    if (dpmem__G.fd >= 0) close(dpmem__G.fd);
    dpmem__G.fd = -1; dpmem__G.nseg = 0; dpmem__G.next_chunk = dpmem__G.mapped_chunks = dpmem__G.populated = 0;
    dpmem__G.pf_run = dpmem__G.pf_started = 0; /* the prefault thread was not copied into the child */
    pthread_mutex_init(&dpmem__G.log_mu, NULL);
    pthread_cond_init(&dpmem__G.pf_cv, NULL);
    dpmem__G.lock = 0;
}

static void dpmem__init_once(void) {
    pthread_mutex_init(&dpmem__G.log_mu, NULL);
    pthread_cond_init(&dpmem__G.pf_cv, NULL);
    dpmem__G.fd = -1;
    dpmem__clock_init();
#ifndef DPMEM_NO_NVTX
    nvtxInitialize(NULL);
    dpmem__G.domain = nvtxDomainCreateA("dpmem");
#endif
    pthread_atfork(NULL, NULL, dpmem__atfork_child);
    atexit(dpmem__atexit);
    DPMEM__STORE(&dpmem__G.ready, 1);
    const char *env = getenv("DPMEM_LOG");
    if (env && *env) dpmem_open(env);
}
static inline void dpmem__init(void) {
    if (DPMEM__UNLIKELY(!DPMEM__LOAD(&dpmem__G.ready))) pthread_once(&dpmem__once, dpmem__init_once);
}

DPMEM_DEF int dpmem_open(const char *path) {
    dpmem__init();
    if (dpmem__log_open()) dpmem_close();
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "dpmem: cannot log to %s: not a regular file (the log is written through a memory mapping)\n", path);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { fprintf(stderr, "dpmem: cannot open log %s: %s\n", path, strerror(errno)); return -1; }
    uint8_t head[DPMEM__HEADER_BYTES];
    memset(head, 0, sizeof head);
    uint32_t u32[4] = { DPMEM__VERSION, DPMEM__HEADER_BYTES, DPMEM__CHUNK_BYTES, 0 };
    struct timespec rt; clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t u64[3] = { (uint64_t)getpid(), (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec, dpmem__now() };
    memcpy(head, "DPMEMLOG", 8); memcpy(head + 8, u32, 16); memcpy(head + 24, u64, 24);
    if (pwrite(fd, head, sizeof head, 0) != (ssize_t)sizeof head) {
        fprintf(stderr, "dpmem: cannot write log %s: %s\n", path, strerror(errno ? errno : EIO));
        close(fd); return -1;
    }
    pthread_mutex_lock(&dpmem__G.log_mu);
    free(dpmem__G.path);
    dpmem__G.path = strdup(path);
    dpmem__G.fd = fd; dpmem__G.nseg = 0; dpmem__G.next_chunk = dpmem__G.mapped_chunks = dpmem__G.populated = 0;
    dpmem__G.dropped = 0;
    DPMEM__STORE(&dpmem__G.gen, dpmem__G.gen + 1);
    dpmem__G.pf_run = 1;
    dpmem__G.pf_started = pthread_create(&dpmem__G.pf_thread, NULL, dpmem__prefault_main, NULL) == 0;
    if (!dpmem__G.pf_started) dpmem__G.pf_run = 0;  /* writers populate their own chunks then */
    pthread_mutex_unlock(&dpmem__G.log_mu);
    /* The run's configuration set before the log was opened goes in too. */
    dpmem__lock();
    for (int i = 0; i < dpmem__G.nmeta; i++) {
        uint64_t v = dpmem__G.meta[2 * i + 1];
        dpmem__ensure_string(&dpmem__T, (uint32_t)v);
        dpmem__emit(DPMEM__EV_META, 0, dpmem__G.meta[2 * i], dpmem__now(), &v, 1);
    }
    dpmem__unlock();
    return 0;
}

DPMEM_DEF void dpmem_close(void) {
    if (!DPMEM__LOAD(&dpmem__G.ready) || !dpmem__log_open()) return;
    /* a layer's last words first (dpmem_cuda.h writes the GPU times still pending) */
    dpmem_close_hook_fn hook = DPMEM__LOAD(&dpmem__G.close_hook);
    if (hook) hook(dpmem__G.close_hook_user);
    uint64_t w[2] = { dpmem__G.next_chunk, DPMEM__RELAXED(&dpmem__G.dropped) };
    dpmem__emit(DPMEM__EV_CLOSE, 0, 0, dpmem__now(), w, 2);
    pthread_mutex_lock(&dpmem__G.log_mu);
    if (dpmem__G.pf_started) {
        dpmem__G.pf_run = dpmem__G.pf_started = 0;
        pthread_cond_signal(&dpmem__G.pf_cv);
        pthread_mutex_unlock(&dpmem__G.log_mu);
        pthread_join(dpmem__G.pf_thread, NULL);
        pthread_mutex_lock(&dpmem__G.log_mu);
    }
    if (dpmem__G.gen & 1) {
        DPMEM__STORE(&dpmem__G.gen, dpmem__G.gen + 1);
        /* The mappings stay: a thread that is writing its last event right now must not fault. Only
           the unused space is cut off; no chunk beyond next_chunk was ever handed out. */
        if (ftruncate(dpmem__G.fd, (off_t)DPMEM__HEADER_BYTES + (off_t)(dpmem__G.next_chunk * DPMEM__CHUNK_BYTES)) != 0)
            fprintf(stderr, "dpmem: cannot trim log %s: %s\n", dpmem__G.path, strerror(errno));
        close(dpmem__G.fd);
        dpmem__G.fd = -1;
    }
    pthread_mutex_unlock(&dpmem__G.log_mu);
}

DPMEM_DEF int dpmem_logging(void) { dpmem__init(); return dpmem__log_open(); }

DPMEM_DEF uint32_t dpmem_intern(const char *s) {
    dpmem__init();
    if (!s) s = "(null)";
    dpmem__lock();
    uint32_t id = dpmem__intern_locked(s);
    dpmem__unlock();
    return id;
}

DPMEM_DEF const char *dpmem_string(uint32_t id) {
    if (!id || id > DPMEM__LOAD(&dpmem__G.nstr)) return NULL;
    return dpmem__S(id)->s;
}

DPMEM_DEF void dpmem_meta(const char *key, const char *value) {
    dpmem__init();
    dpmem__lock();
    uint32_t k = dpmem__intern_locked(key ? key : "(null)"), v = dpmem__intern_locked(value ? value : "");
    int i;
    for (i = 0; i < dpmem__G.nmeta; i++) if (dpmem__G.meta[2 * i] == k) break;
    if (i == dpmem__G.nmeta) {
        if (dpmem__G.nmeta == dpmem__G.meta_cap) {
            int cap = dpmem__G.meta_cap ? 2 * dpmem__G.meta_cap : 32;
            uint32_t *m = (uint32_t *)realloc(dpmem__G.meta, (size_t)cap * 2 * sizeof *m);
            if (!m) { dpmem__unlock(); return; }
            dpmem__G.meta = m; dpmem__G.meta_cap = cap;
        }
        dpmem__G.nmeta++;
    }
    dpmem__G.meta[2 * i] = k; dpmem__G.meta[2 * i + 1] = v;
    if (dpmem__log_open()) {
        uint64_t w = v;
        dpmem__ensure_string(&dpmem__T, v);
        dpmem__emit(DPMEM__EV_META, 0, k, dpmem__now(), &w, 1);
    }
    dpmem__unlock();
}

DPMEM_DEF void dpmem_meta_int(const char *key, long long value) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", value);
    dpmem_meta(key, buf);
}

/* ---- scopes ----------------------------------------------------------------------------------- */
static inline void dpmem__push(uint32_t id) {
    dpmem__thread *t = &dpmem__T;
    if (DPMEM__LIKELY(t->depth < DPMEM_MAX_DEPTH)) t->stack[t->depth] = id;
    t->depth++;
    uint64_t ts = 0;
    if (dpmem__log_open()) {
        ts = dpmem__now();
        dpmem__ensure_string_at(t, id, ts);   /* (its STRING no later than the BEGIN) */
        uint8_t *p = dpmem__reserve(t, 16);
        if (p) dpmem__commit(p, DPMEM__EV_BEGIN, 0, 16, id, ts);
    }
#ifndef DPMEM_NO_NVTX
    if (dpmem__G.domain && id) {
        nvtxEventAttributes_t a;
        memset(&a, 0, sizeof a);
        a.version = NVTX_VERSION; a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.colorType = NVTX_COLOR_ARGB; a.color = dpmem__S(id)->color;
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED; a.message.registered = dpmem__S(id)->nvtx;
        nvtxDomainRangePushEx(dpmem__G.domain, &a);
    }
#endif
    dpmem_scope_hook_fn hook = DPMEM__RELAXED(&dpmem__G.scope_hook);
    if (DPMEM__UNLIKELY(hook != NULL)) hook(dpmem__G.scope_hook_user, 1, id, ts ? ts : dpmem__now());
}

static inline void dpmem__pop(void) {
    dpmem__thread *t = &dpmem__T;
    if (DPMEM__UNLIKELY(!t->depth)) {
        dpmem__lock(); dpmem__warn_locked("range pop without a push", 0); dpmem__unlock();
        return;
    }
    t->depth--;
    uint32_t id = t->depth < DPMEM_MAX_DEPTH ? t->stack[t->depth] : 0;
    uint64_t ts = 0;
    dpmem_scope_hook_fn hook = DPMEM__RELAXED(&dpmem__G.scope_hook);
    if (DPMEM__UNLIKELY(hook != NULL)) { ts = dpmem__now(); hook(dpmem__G.scope_hook_user, 0, id, ts); }
    if (dpmem__log_open()) {
        uint8_t *p = dpmem__reserve(t, 16);
        if (p) dpmem__commit(p, DPMEM__EV_END, 0, 16, id, ts ? ts : dpmem__now());
    }
#ifndef DPMEM_NO_NVTX
    if (dpmem__G.domain) nvtxDomainRangePop(dpmem__G.domain);
#endif
}

DPMEM_DEF uint32_t dpmem__scope_begin(uint32_t *site, const char *name) {
    dpmem__init();
    uint32_t id;
    if (site) {
        id = DPMEM__RELAXED(site);
        if (DPMEM__UNLIKELY(!id)) { id = dpmem_intern(name); __atomic_store_n(site, id, __ATOMIC_RELAXED); }
    } else {
        id = dpmem_intern(name);
    }
    dpmem__push(id);
    return id;
}
DPMEM_DEF void dpmem__scope_end(uint32_t *unused) { (void)unused; dpmem__pop(); }
DPMEM_DEF void dpmem_range_push(const char *name) { dpmem__init(); dpmem__push(dpmem_intern(name)); }
DPMEM_DEF void dpmem_range_pop(void) { dpmem__init(); dpmem__pop(); }

DPMEM_DEF int dpmem_scope_stack(uint32_t *ids, int max) {
    dpmem__thread *t = &dpmem__T;
    int n = (int)(t->depth < DPMEM_MAX_DEPTH ? t->depth : DPMEM_MAX_DEPTH);
    for (int i = 0; i < n && i < max; i++) ids[i] = t->stack[i];
    return n < max ? n : max;
}

/* ---- tagged memory ---------------------------------------------------------------------------- */
DPMEM_DEF void dpmem_tag_alloc_space(const void *ptr, size_t bytes, const char *tag, int space) {
    dpmem__init();
    if (!tag) tag = "untagged";
    if (!ptr) { dpmem_warn("tag of a NULL pointer ignored", 0); return; }
    uint32_t tid = dpmem__tag_id(tag);
    uint64_t now = dpmem__log_open() ? dpmem__now() : 0;
    dpmem__lock();
    int cat = dpmem__category_of_tag_locked(tid);
    int sp = space & 3;
    dpmem__rec *old = dpmem__rec_find_locked((uint64_t)(uintptr_t)ptr);
    if (old) { /* tagged twice without a free: the old record is freed first, with a warning */
        dpmem__rec prev = *old;
        dpmem__warn_locked("address tagged again without a free", prev.addr);
        dpmem__rec_remove_locked(old);
        dpmem__account_locked((int)prev.cat, prev.space, prev.bytes, 0);
        if (dpmem__log_open()) {
            uint64_t w[2] = { prev.addr, prev.bytes };
            dpmem__emit(DPMEM__EV_FREE, (uint32_t)prev.space, prev.tag, dpmem__alloc_ts_locked(now), w, 2);
        }
    }
    dpmem__rec r = { (uint64_t)(uintptr_t)ptr, (uint64_t)bytes, tid, (uint32_t)cat, sp, 1 };
    if (dpmem__rec_insert_locked(&r) != 0) { dpmem__unlock(); return; }
    dpmem__account_locked(cat, sp, bytes, 1);
    if (dpmem__log_open()) {
        uint64_t w[2] = { (uint64_t)(uintptr_t)ptr, (uint64_t)bytes };
        dpmem__emit(DPMEM__EV_ALLOC, (uint32_t)sp, tid, dpmem__alloc_ts_locked(now), w, 2);
    }
    dpmem__unlock();
}
DPMEM_DEF void dpmem_tag_alloc(const void *ptr, size_t bytes, const char *tag) {
    dpmem_tag_alloc_space(ptr, bytes, tag, DPMEM_HOST);
}

DPMEM_DEF size_t dpmem_tag_free(const void *ptr) {
    dpmem__init();
    if (!ptr) return 0; /* free(NULL) is fine in C, and so here */
    uint64_t now = dpmem__log_open() ? dpmem__now() : 0;
    dpmem__lock();
    dpmem__rec *r = dpmem__rec_find_locked((uint64_t)(uintptr_t)ptr);
    if (!r) {
        dpmem__warn_locked("free of an unknown or already freed address", (uint64_t)(uintptr_t)ptr);
        dpmem__unlock();
        return 0;
    }
    dpmem__rec rec = *r;
    dpmem__rec_remove_locked(r);
    dpmem__account_locked((int)rec.cat, rec.space, rec.bytes, 0);
    if (dpmem__log_open()) {
        uint64_t w[2] = { rec.addr, rec.bytes };
        dpmem__emit(DPMEM__EV_FREE, (uint32_t)rec.space, rec.tag, dpmem__alloc_ts_locked(now), w, 2);
    }
    dpmem__unlock();
    return (size_t)rec.bytes;
}

DPMEM_DEF size_t dpmem_tag_bytes(const void *ptr) {
    dpmem__init();
    dpmem__lock();
    dpmem__rec *r = dpmem__rec_find_locked((uint64_t)(uintptr_t)ptr);
    size_t n = r ? (size_t)r->bytes : 0;
    dpmem__unlock();
    return n;
}

/* ---- queries ---------------------------------------------------------------------------------- */
static int dpmem__find_cat_locked(const char *category) {
    for (int i = 0; i < dpmem__G.ncat; i++)
        if (!strcmp(dpmem__S(dpmem__G.cats[i].name)->s, category)) return i;
    return -1;
}
/* which: 0 live, 1 peak, 2 at the total's peak */
static size_t dpmem__query(const char *category, int which) {
    dpmem__init();
    dpmem__lock();
    size_t v = 0;
    if (!category) {
        v = (size_t)(which == 0 ? dpmem__G.live : dpmem__G.peak);
    } else {
        int c = dpmem__find_cat_locked(category);
        if (c >= 0) v = (size_t)(which == 0 ? dpmem__G.cats[c].live : which == 1 ? dpmem__G.cats[c].peak : dpmem__G.cats[c].at_peak);
    }
    dpmem__unlock();
    return v;
}
DPMEM_DEF size_t dpmem_live_bytes(const char *category) { return dpmem__query(category, 0); }
DPMEM_DEF size_t dpmem_peak_bytes(const char *category) { return dpmem__query(category, 1); }
DPMEM_DEF size_t dpmem_bytes_at_peak(const char *category) { return dpmem__query(category, 2); }
DPMEM_DEF size_t dpmem_live_bytes_in(int space) {
    dpmem__init();
    dpmem__lock();
    size_t v = (size_t)dpmem__G.live_space[space & 3];
    dpmem__unlock();
    return v;
}
DPMEM_DEF int dpmem_category_count(void) {
    dpmem__init();
    dpmem__lock();
    int n = dpmem__G.ncat;
    dpmem__unlock();
    return n;
}
DPMEM_DEF const char *dpmem_category_name(int i) {
    dpmem__init();
    dpmem__lock();
    const char *s = (i >= 0 && i < dpmem__G.ncat) ? dpmem__S(dpmem__G.cats[i].name)->s : NULL;
    dpmem__unlock();
    return s;
}
DPMEM_DEF void dpmem_reset_peak(void) {
    dpmem__init();
    dpmem__lock();
    dpmem__G.peak = dpmem__G.live;
    for (int i = 0; i < dpmem__G.ncat; i++) dpmem__G.cats[i].peak = dpmem__G.cats[i].at_peak = dpmem__G.cats[i].live;
    dpmem__unlock();
}

/* ---- snapshots, OOM, layer events -------------------------------------------------------------- */
DPMEM_DEF void dpmem_snapshot(const char *label) {
    dpmem__init();
    size_t used = 0, total = 0;
    dpmem_device_info_fn info = DPMEM__RELAXED(&dpmem__G.device_info);
    if (info && info(dpmem__G.device_info_user, &used, &total) != 0) used = total = 0;
    dpmem__lock();
    uint32_t lid = dpmem__intern_locked(label ? label : "");
    if (dpmem__log_open()) {
        dpmem__thread *t = &dpmem__T;
        dpmem__ensure_string(t, lid);
        for (int i = 0; i < dpmem__G.ncat; i++) dpmem__ensure_string(t, dpmem__G.cats[i].name);
        int n = dpmem__G.ncat;
        if (n > 2000) n = 2000; /* an event must fit in a chunk */
        uint32_t bytes = 48 + 16 * (uint32_t)n;
        uint8_t *p = dpmem__reserve(t, bytes);
        if (p) {
            uint64_t w[3] = { (uint64_t)used, (uint64_t)total, dpmem__G.live_space[DPMEM_DEVICE] };
            uint32_t nn[2] = { (uint32_t)n, 0 };
            memcpy(p + 16, w, 24); memcpy(p + 40, nn, 8);
            for (int i = 0; i < n; i++) {
                uint32_t c[2] = { dpmem__G.cats[i].name, 0 };
                memcpy(p + 48 + 16 * i, c, 8); memcpy(p + 56 + 16 * i, &dpmem__G.cats[i].live, 8);
            }
            dpmem__commit(p, DPMEM__EV_SNAPSHOT, 0, bytes, lid, dpmem__now());
        }
    }
    dpmem__unlock();
}

static void dpmem__fmt_bytes(char *buf, size_t n, uint64_t b) {
    if (b >= (1ull << 30)) snprintf(buf, n, "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    else if (b >= (1ull << 10)) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
}

DPMEM_DEF void dpmem_oom(size_t bytes, const char *tag, int space, size_t device_used, size_t device_total) {
    enum { TOP = 10 };
    dpmem__init();
    dpmem__thread *t = &dpmem__T;
    dpmem__lock();
    uint32_t tid = dpmem__intern_locked(tag ? tag : "untagged");
    /* the largest live buffers */
    dpmem__rec top[TOP]; int ntop = 0;
    for (uint64_t i = 0; i < dpmem__G.rec_cap; i++) {
        const dpmem__rec *r = &dpmem__G.recs[i];
        if (!r->used) continue;
        if (ntop == TOP && r->bytes <= top[TOP - 1].bytes) continue;   /* not among the largest */
        int j = ntop < TOP ? ntop++ : TOP - 1;                          /* insertion sort, descending */
        while (j > 0 && top[j - 1].bytes < r->bytes) { top[j] = top[j - 1]; j--; }
        top[j] = *r;
    }
    int depth = (int)(t->depth < DPMEM_MAX_DEPTH ? t->depth : DPMEM_MAX_DEPTH);
    int ncat = dpmem__G.ncat < 1000 ? dpmem__G.ncat : 1000;
    if (dpmem__log_open()) {
        dpmem__ensure_string(t, tid);
        for (int i = 0; i < depth; i++) dpmem__ensure_string(t, t->stack[i]);
        for (int i = 0; i < ncat; i++) dpmem__ensure_string(t, dpmem__G.cats[i].name);
        for (int i = 0; i < ntop; i++) dpmem__ensure_string(t, top[i].tag);
        uint32_t stack_bytes = (uint32_t)((4 * depth + 7) & ~7);
        uint32_t total_bytes = 56 + stack_bytes + 16 * (uint32_t)ncat + 16 * (uint32_t)ntop;
        uint8_t *p = dpmem__reserve(t, total_bytes);
        if (p) {
            memset(p + 16, 0, total_bytes - 16);
            uint64_t w[3] = { (uint64_t)bytes, (uint64_t)device_used, (uint64_t)device_total };
            uint32_t n[4] = { (uint32_t)depth, (uint32_t)ncat, (uint32_t)ntop, 0 };
            memcpy(p + 16, w, 24); memcpy(p + 40, n, 16);
            uint8_t *q = p + 56;
            memcpy(q, t->stack, 4 * (size_t)depth); q += stack_bytes;
            for (int i = 0; i < ncat; i++, q += 16) { memcpy(q, &dpmem__G.cats[i].name, 4); memcpy(q + 8, &dpmem__G.cats[i].live, 8); }
            for (int i = 0; i < ntop; i++, q += 16) { memcpy(q, &top[i].tag, 4); memcpy(q + 8, &top[i].bytes, 8); }
            dpmem__commit(p, DPMEM__EV_OOM, (uint32_t)(space & 3), total_bytes, tid, dpmem__now());
            /* The page cache already survives the process; this also survives the machine. */
            uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
            msync((void *)page, (size_t)((uintptr_t)p + total_bytes - page), MS_SYNC);
        }
    }
    /* the report on stderr, one paragraph */
    char line[4096], b[32]; size_t len = 0;
    dpmem__fmt_bytes(b, sizeof b, bytes);
    len += (size_t)snprintf(line + len, sizeof line - len, "dpmem: OOM in %s: asked %s for %s; live:",
                            depth ? dpmem__name(t->stack[depth - 1]) : "(no scope)", b, dpmem__name(tid));
    for (int i = 0; i < ncat && len < sizeof line - 64; i++) {
        if (!dpmem__G.cats[i].live) continue;
        dpmem__fmt_bytes(b, sizeof b, dpmem__G.cats[i].live);
        len += (size_t)snprintf(line + len, sizeof line - len, " %s %s,", dpmem__name(dpmem__G.cats[i].name), b);
    }
    dpmem__fmt_bytes(b, sizeof b, dpmem__G.live);
    len += (size_t)snprintf(line + len, sizeof line - len, " total %s", b);
    if (device_total && len < sizeof line - 64) {
        char u[32]; dpmem__fmt_bytes(u, sizeof u, device_used); dpmem__fmt_bytes(b, sizeof b, device_total);
        len += (size_t)snprintf(line + len, sizeof line - len, "; device %s used of %s", u, b);
    }
    for (int i = 0; i < ntop && i < 3 && len < sizeof line - 128; i++) {
        dpmem__fmt_bytes(b, sizeof b, top[i].bytes);
        len += (size_t)snprintf(line + len, sizeof line - len, "%s %s %s", i ? "," : "; largest:", dpmem__name(top[i].tag), b);
    }
    dpmem__unlock();
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

DPMEM_DEF uint64_t dpmem_now_ns(void) { dpmem__init(); return dpmem__now(); }
DPMEM_DEF uint32_t dpmem_thread_index(void) {
    dpmem__init();
    dpmem__thread *t = &dpmem__T;
    if (!t->index) t->index = __atomic_add_fetch(&dpmem__G.next_thread, 1, __ATOMIC_RELAXED);
    return t->index;
}
DPMEM_DEF void dpmem_thread_name(const char *name) {
    dpmem__init();
    dpmem__thread *t = &dpmem__T;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    if (dpmem__log_open() && t->announced == DPMEM__RELAXED(&dpmem__G.gen)) dpmem__emit_thread(t);
}
DPMEM_DEF void dpmem_set_scope_hook(dpmem_scope_hook_fn fn, void *user) {
    dpmem__init();
    dpmem__G.scope_hook_user = user;
    __atomic_store_n(&dpmem__G.scope_hook, fn, __ATOMIC_RELEASE);
}
DPMEM_DEF void dpmem_set_device_info(dpmem_device_info_fn fn, void *user) {
    dpmem__init();
    dpmem__G.device_info_user = user;
    __atomic_store_n(&dpmem__G.device_info, fn, __ATOMIC_RELEASE);
}
DPMEM_DEF void dpmem_set_close_hook(dpmem_close_hook_fn fn, void *user) {
    dpmem__init();
    dpmem__G.close_hook_user = user;
    __atomic_store_n(&dpmem__G.close_hook, fn, __ATOMIC_RELEASE);
}
DPMEM_DEF void dpmem_log_gpu_time(uint32_t thread, uint32_t name_id, uint64_t begin_ts_ns, uint64_t gpu_ns) {
    dpmem__init();
    if (!dpmem__log_open()) return;
    uint64_t w[3] = { (uint64_t)thread, begin_ts_ns, gpu_ns };
    dpmem__emit(DPMEM__EV_GPU_TIME, 0, name_id, dpmem__now(), w, 3);
}
DPMEM_DEF void dpmem_log_device_sample(size_t used, size_t total) {
    dpmem__init();
    if (!dpmem__log_open()) return;
    uint64_t w[2] = { (uint64_t)used, (uint64_t)total };
    dpmem__emit(DPMEM__EV_DEVICE, 0, 0, dpmem__now(), w, 2);
}
DPMEM_DEF void dpmem_warn(const char *message, uint64_t value) {
    dpmem__init();
    dpmem__lock();
    dpmem__warn_locked(message ? message : "", value);
    dpmem__unlock();
}
#endif
