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
     Include it first in that file (or compile that file with -D_GNU_SOURCE): under -std=c11/c99 an
     earlier header hides POSIX declarations the implementation needs, and it stops with an #error.
     One copy of the implementation per process: a library or plugin that has its own must be loaded
     by a program linked with -rdynamic (its calls then go to the program's copy); else each copy
     counts on its own, and the second to open the log writes its own file (and says so).

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
     DPMEM_LOG=path      open the log at the first event, close it at exit, with no code change. If
                         another process (or copy of the kit) is writing that file, this one writes
                         path with ".<pid>" before the extension instead, and says so on stderr. A
                         program that calls dpmem_open(other) logs there instead, saying so in one
                         line (DPMEM_LOG's file is not created when dpmem_open is the first call).

   THE LOG
     An append-only, versioned binary file written through a shared mapping: after abort(), a segfault,
     exit() without dpmem_close() and even SIGKILL, every event completely written is in the file (at
     most the one event per thread being written at that instant is lost). docs/LOG_FORMAT.md has the
     format. Without a log the kit still keeps its counters and emits NVTX ranges. The file is locked
     while written: dpmem_open on a path another run is writing fails with one line (nothing is
     truncated). When the disk is full, events are dropped and counted (the counters stay exact; the
     disk is asked again after a back-off, not at every event), and the log says how many.

   THREADS
     Scopes are per thread (each thread its own stack, its own log chunk: no lock, no atomic).
     Tagged allocations take one short spin lock, so that live and peak bytes and the breakdown at the
     peak are exact whatever the interleaving.
     Any thread may log while another closes or reopens the log. A writer in the middle of an event
     when the log closes finishes it into memory that no file backs any more (the event is lost with
     that log, as at a crash); its next event goes to the log open then, if any. The rule inside the
     kit: a thread stores into a log's chunk only after it has put that log's generation in its own
     `busy` slot and then seen that log still open, until its commit clears the slot, and it keeps no
     pointer into a log across events; dpmem_close unmaps a closed log's memory only when no writer's
     slot names that log, however long a writer stalls (a grace period counted in writers: the slots
     are read after membarrier(2), so a writer pays two stores to its own slot (plain moves on x86)
     and no fence; where the kernel has no membarrier, closed logs stay mapped as anonymous memory).

   LIMITS
     DPMEM_SCOPE caches the name's id per call site: the name must be the same string each time the
     site runs (a literal). For a name computed at run time use DPMEM_SCOPE_DYN. One scope macro per
     source line. longjmp() out of a scope skips its end (as it skips any cleanup); C++ exceptions do not.
     About a million distinct strings (tags, scope and META names); past that, new ones count as
     "overflow" (one warning; totals stay exact). A category name keeps at most 1024 bytes, as the log.

   LICENCE: MIT. */

#ifndef DPMEM_H
#define DPMEM_H

/* The implementation needs POSIX and GNU declarations (mmap, pthreads, clock_gettime, O_CLOEXEC,
   posix_fallocate, pwrite, flock); this takes effect when dpmem.h is the first header of the
   implementation file, else that file must be compiled with -D_GNU_SOURCE (under -std=c11 or -std=c99
   an earlier header hides them: the implementation then stops with an #error that says so). */
#if (defined(DPMEM_IMPLEMENTATION) || defined(DPMEM_CUDA_IMPLEMENTATION)) && !defined(DPMEM_DISABLE) && !defined(_GNU_SOURCE)
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

/* Compiled out, each macro and function is an expression that evaluates none of its arguments, yet
   names each one (a variable or a static function used only as an argument of the kit is not
   "unused"), and that may stand alone as a statement without a warning under gcc, clang, g++,
   clang++ and nvcc. The arguments sit in the branch of `1 ? ... : ...` that is never taken (not under
   sizeof: clang then calls a static function that only they use "not needed"); a value comes out of a
   statement expression in C. nvcc's front end sees through the dead branch ("set but never used")
   and calls a bare value "an expression with no effect" (#174-D): there a lambda that is never called
   names the arguments, and the value comes from an inline function (inlined even at -O0: no symbol).
   DPMEM__USES(uses) names the arguments (uses: DPMEM__U(a) joined by DPMEM__AND), DPMEM__THEN(e,
   uses) names them and gives e, DPMEM__ZERO(T, v, uses) gives the constant v of type T, and
   DPMEM__CONST(T, v) the same for a call without arguments (no lambda: it may stand at file scope). */
#define DPMEM__U(a)            (void)(a)
#if defined(__CUDACC__)
extern "C++" {
template <class T> static inline __attribute__((always_inline, unused)) T dpmem__value(T v) { return v; }
}
#define DPMEM__AND             ;
#define DPMEM__USES(...)       ((void)[&] { __VA_ARGS__; })
#define DPMEM__THEN(e, ...)    (DPMEM__USES(__VA_ARGS__), (e))
#define DPMEM__ZERO(T, v, ...) (DPMEM__USES(__VA_ARGS__), dpmem__value<T>(v))
#define DPMEM__CONST(T, v)     dpmem__value<T>(v)
#else
#define DPMEM__AND             ,
#define DPMEM__USES(...)       (1 ? (void)0 : (__VA_ARGS__))
#if defined(__GNUC__) && !defined(__cplusplus)
#define DPMEM__THEN(e, ...)    (__extension__({ DPMEM__USES(__VA_ARGS__); (e); }))
#define DPMEM__CONST(T, v)     (__extension__({ (T)(v); }))
#else
#define DPMEM__THEN(e, ...)    (DPMEM__USES(__VA_ARGS__), (e))
#define DPMEM__CONST(T, v)     ((void)0, (T)(v))
#endif
#define DPMEM__ZERO(T, v, ...) DPMEM__THEN((T)(v), __VA_ARGS__)
#endif
#define DPMEM__U2(a, b)        DPMEM__U(a) DPMEM__AND DPMEM__U(b)
#define DPMEM__U3(a, b, c)     DPMEM__U2(a, b) DPMEM__AND DPMEM__U(c)
#define DPMEM__U4(a, b, c, d)  DPMEM__U3(a, b, c) DPMEM__AND DPMEM__U(d)

#define DPMEM_SCOPE(name)                DPMEM__USES(DPMEM__U(name))
#define DPMEM_SCOPE_DYN(name)            DPMEM__USES(DPMEM__U(name))
#define DPMEM_TAG_ALLOC(ptr, bytes, tag) DPMEM__USES(DPMEM__U3(ptr, bytes, tag))
#define DPMEM_TAG_FREE(ptr)              DPMEM__USES(DPMEM__U(ptr))
#define DPMEM_SNAPSHOT(label)            DPMEM__USES(DPMEM__U(label))
#define dpmem_open(path)                 DPMEM__ZERO(int, 0, DPMEM__U(path))
#define dpmem_close()                    ((void)0)
#define dpmem_logging()                  DPMEM__CONST(int, 0)
#define dpmem_meta(k, v)                 DPMEM__USES(DPMEM__U2(k, v))
#define dpmem_meta_int(k, v)             DPMEM__USES(DPMEM__U2(k, v))
#define dpmem_range_push(name)           DPMEM__USES(DPMEM__U(name))
#define dpmem_range_pop()                ((void)0)
#define dpmem_tag_alloc(p, n, t)         DPMEM__USES(DPMEM__U3(p, n, t))
#define dpmem_tag_alloc_space(p, n, t, s) DPMEM__USES(DPMEM__U4(p, n, t, s))
#define dpmem_tag_free(p)                DPMEM__ZERO(size_t, 0, DPMEM__U(p))
#define dpmem_snapshot(label)            DPMEM__USES(DPMEM__U(label))
#define dpmem_live_bytes(c)              DPMEM__ZERO(size_t, 0, DPMEM__U(c))
#define dpmem_peak_bytes(c)              DPMEM__ZERO(size_t, 0, DPMEM__U(c))
#define dpmem_bytes_at_peak(c)           DPMEM__ZERO(size_t, 0, DPMEM__U(c))
#define dpmem_live_bytes_in(s)           DPMEM__ZERO(size_t, 0, DPMEM__U(s))
#define dpmem_category_count()           DPMEM__CONST(int, 0)
#define dpmem_category_name(i)           DPMEM__ZERO(const char *, 0, DPMEM__U(i))
#define dpmem_tag_bytes(p)               DPMEM__ZERO(size_t, 0, DPMEM__U(p))
#define dpmem_reset_peak()               ((void)0)
#define dpmem_oom(n, t, s, u, tot)       DPMEM__USES(DPMEM__U4(n, t, s, u) DPMEM__AND DPMEM__U(tot))
#define dpmem_now_ns()                   DPMEM__CONST(uint64_t, 0)
#define dpmem_thread_name(n)             DPMEM__USES(DPMEM__U(n))
#define dpmem_thread_index()             DPMEM__CONST(uint32_t, 0)
#define dpmem_set_scope_hook(f, u)       DPMEM__USES(DPMEM__U2(f, u))
#define dpmem_set_device_info(f, u)      DPMEM__USES(DPMEM__U2(f, u))
#define dpmem_set_close_hook(f, u)       DPMEM__USES(DPMEM__U2(f, u))
#define dpmem_log_gpu_time(a, b, c, d)   DPMEM__USES(DPMEM__U4(a, b, c, d))
#define dpmem_log_device_sample(u, t)    DPMEM__USES(DPMEM__U2(u, t))
#define dpmem_warn(m, v)                 DPMEM__USES(DPMEM__U2(m, v))
#define dpmem_intern(s)                  DPMEM__ZERO(uint32_t, 0, DPMEM__U(s))
#define dpmem_string(id)                 DPMEM__ZERO(const char *, 0, DPMEM__U(id))
#define dpmem_scope_stack(ids, max)      DPMEM__ZERO(int, 0, DPMEM__U2(ids, max))

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
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if !defined(O_CLOEXEC) || !defined(MAP_ANONYMOUS) || !defined(CLOCK_MONOTONIC) || !defined(LOCK_NB)
#error "dpmem.h: the implementation needs POSIX and GNU declarations (O_CLOEXEC, posix_fallocate, pwrite, ...) that a header included before it hid under -std=c11/-std=c99: include dpmem.h first in this file, or compile this file with -D_GNU_SOURCE"
#define DPMEM__NO_POSIX
#endif
#endif
#if defined(DPMEM__IMPLEMENTED) && !defined(DPMEM__NO_POSIX) && !defined(DPMEM__BODY)
#define DPMEM__BODY
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
#define DPMEM__OVERFLOW_ID  ((DPMEM__MAX_PAGES << DPMEM__PAGE_BITS) - 1u) /* "overflow": the last id */
#define DPMEM__OWN_IDS      32u   /* the ids below it: the kit's own messages once the table is full */
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
typedef struct { uint8_t *base; size_t bytes; uint32_t gen; } dpmem__retired;  /* a closed log's mapping */

typedef struct dpmem__thread {
    uint32_t gen;               /* log generation of the chunk below; the log is open while G.gen is odd */
    uint32_t busy;              /* generation whose memory it may be storing into right now, 0 between events */
    uint32_t pos, cap;
    uint8_t *chunk;
    uint32_t index;             /* thread index, 1-based */
    uint32_t announced;         /* generation in which THREAD was written */
    uint32_t depth;
    uint32_t stack[DPMEM_MAX_DEPTH];
    int      key_set;           /* its exit is seen (dpmem__thread_exit) */
    int      listed;            /* in G.writers, where dpmem_close reads its `busy` */
    unsigned exits;             /* times dpmem__thread_exit ran for it */
    struct dpmem__thread *next_writer, *prev_writer;
    uint64_t last_ts;           /* of its last event */
    char     name[32];
    struct { const char *ptr; uint32_t id; } tags[16]; /* tag pointer -> id, checked by content */
} dpmem__thread;

/* The chunk of a thread that exited, with room left, for the next new thread (and its index). */
#define DPMEM__SPARES 64
typedef struct { uint8_t *chunk; uint32_t index, pos; uint64_t last_ts; } dpmem__spare;

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
    uint32_t nstr;              /* ids 1..nstr, and DPMEM__OVERFLOW_ID */
    int      table_full;        /* said so */
    int      rows_cut;          /* a breakdown had more categories than an event holds: said so */
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
    int      log_from_env;      /* the open log is DPMEM_LOG's (dpmem_open then says it replaces it) */
    int      explicit_first;    /* the first kit call is dpmem_open: DPMEM_LOG's log is not created at all */
    uint64_t next_chunk, mapped_chunks, populated;
    dpmem__segment seg[DPMEM__MAX_SEGMENTS]; int nseg;
    dpmem__retired retired[DPMEM__MAX_SEGMENTS]; int nretired; /* closed logs', now anonymous memory */
    dpmem__thread *writers;     /* every thread that took a chunk and has not exited (dpmem__list_locked) */
    int      untracked;         /* a thread writes that is not in `writers`: retired memory is never unmapped */
    int      membarrier;        /* 0 not tried, 1 registered, -1 not available */
    pthread_t pf_thread; pthread_cond_t pf_cv; int pf_run, pf_started; /* the prefault thread */
    uint64_t start_ns;          /* the event clock when this log was opened */
    uint64_t dropped;           /* events of this log that could not be written */
    uint64_t no_space_until;    /* when the log had no space: no new segment is tried before then */
    uint64_t backoff_ns;
    int      dropping;          /* said on stderr; a WARN event with the count when space comes back */
    int      closing;           /* dpmem_close is writing the CLOSE event */
    uint32_t dropped_msg;       /* that WARN's message */
    dpmem__spare spare[DPMEM__SPARES]; int nspare;
    pthread_key_t thread_key; int thread_key_ok;
    uint32_t next_thread;

    dpmem_device_info_fn device_info; void *device_info_user;
    dpmem_close_hook_fn close_hook; void *close_hook_user;
} dpmem__G; /* zero-initialised; log_mu is initialised in dpmem__init_once */

static DPMEM__TLS dpmem__thread dpmem__T;
static dpmem__str dpmem__last_page[1u << DPMEM__PAGE_BITS]; /* holds "overflow": never a failed calloc */
static pthread_once_t dpmem__once = PTHREAD_ONCE_INIT;

/* ---- clock: rdtsc where it is invariant, else CLOCK_MONOTONIC --------------------------------- */
static uint64_t dpmem__mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline uint64_t dpmem__now(void) {
#ifdef DPMEM_TEST_CLOCK   /* tests only: a clock of their own (one that steps back, as a lagging CPU's) */
    { uint64_t t; if (DPMEM_TEST_CLOCK(&t)) return t; }
#endif
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

/* Grows the file by a new segment (1 MiB, doubling to 64 MiB; when that fails, 1 MiB, then one chunk:
   what a nearly full disk still holds) and maps it; log_mu held. 0, or why not (an errno). The space
   is reserved with posix_fallocate: a store into a sparse mapping on a full disk would be a SIGBUS. */
static int dpmem__grow_locked(void) {
    if (dpmem__G.nseg >= (int)DPMEM__MAX_SEGMENTS) return EFBIG;
    uint64_t n = dpmem__G.nseg ? dpmem__G.seg[dpmem__G.nseg - 1].nchunks * 2 : 16;
    if (n > 1024) n = 1024;
    off_t off = (off_t)DPMEM__HEADER_BYTES + (off_t)(dpmem__G.mapped_chunks * DPMEM__CHUNK_BYTES);
    int err = posix_fallocate(dpmem__G.fd, off, (off_t)(n * DPMEM__CHUNK_BYTES));
    if (err && n > 16) { n = 16; err = posix_fallocate(dpmem__G.fd, off, (off_t)(n * DPMEM__CHUNK_BYTES)); }
    if (err && n > 1) { n = 1; err = posix_fallocate(dpmem__G.fd, off, (off_t)DPMEM__CHUNK_BYTES); }
    if (err) return err;
    void *base = mmap(NULL, n * DPMEM__CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, dpmem__G.fd, off);
    if (base == MAP_FAILED) return errno ? errno : ENOMEM;
    dpmem__segment *sg = &dpmem__G.seg[dpmem__G.nseg++];
    sg->base = (uint8_t *)base; sg->first_chunk = dpmem__G.mapped_chunks; sg->nchunks = n;
    dpmem__G.mapped_chunks += n;
    return 0;
}

/* The count of dropped events into the file header (bytes 48..55), where it stays readable when the
   CLOSE event itself finds no space, or the run dies; log_mu held. The header's block exists since
   dpmem_open wrote it, so this needs no new space. */
static void dpmem__header_dropped_locked(void) {
    uint64_t d = __atomic_load_n(&dpmem__G.dropped, __ATOMIC_RELAXED);
    if (dpmem__G.fd >= 0 && pwrite(dpmem__G.fd, &d, 8, 48) != 8) { /* nothing more to do: CLOSE has it too */ }
}

/* The log found no space for a new segment (a full disk, a file size limit, the log's own size limit):
   events are dropped and counted, and a new segment is tried again only after a back-off (1 ms,
   doubling to 1 s), not on every event: each try costs a posix_fallocate under log_mu, which the
   writers and the accounting lock behind them would wait on. log_mu held. */
static void dpmem__no_space_locked(int err) {
    dpmem__G.backoff_ns = dpmem__G.backoff_ns ? dpmem__G.backoff_ns * 2 : 1000000u;
    if (dpmem__G.backoff_ns > 1000000000u) dpmem__G.backoff_ns = 1000000000u;
    __atomic_store_n(&dpmem__G.no_space_until, dpmem__now() + dpmem__G.backoff_ns, __ATOMIC_RELAXED);
    if (!dpmem__G.dropping) {
        dpmem__G.dropping = 1;
        if (err == EFBIG && dpmem__G.nseg >= (int)DPMEM__MAX_SEGMENTS)
            fprintf(stderr, "dpmem: the log %s reached its size limit (%d segments): further events are dropped and counted\n",
                    dpmem__G.path ? dpmem__G.path : "", (int)DPMEM__MAX_SEGMENTS);
        else
            fprintf(stderr, "dpmem: cannot grow the log %s (%s): events are dropped and counted until there is space "
                    "again (the counters and the OOM report stay exact)\n", dpmem__G.path ? dpmem__G.path : "", strerror(err));
    }
    dpmem__header_dropped_locked();
}

/* Maps the pages of n chunks in one call each, instead of a page fault (and the kernel zeroing a
   page) every 4 KiB on the hot path. Linux >= 5.14; elsewhere pages fault in as touched. The chunks'
   addresses are looked up under log_mu by the caller: the segment table changes under that lock. */
static void dpmem__populate(uint8_t *const *chunks, int n) {
#ifdef MADV_POPULATE_WRITE
    for (int i = 0; i < n; i++) if (chunks[i]) madvise(chunks[i], DPMEM__CHUNK_BYTES, MADV_POPULATE_WRITE);
#else
    (void)chunks; (void)n;
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
        /* no space: the thread stops; writers then try themselves, with a back-off (no events lost here) */
        while (dpmem__G.mapped_chunks < target) if (dpmem__grow_locked() != 0) { dpmem__G.pf_run = 0; break; }
        if (!dpmem__G.pf_run) break;
        uint64_t from = dpmem__G.populated > dpmem__G.next_chunk ? dpmem__G.populated : dpmem__G.next_chunk;
        dpmem__G.populated = target;          /* claimed: writers that get there first populate their own */
        uint8_t *chunks[DPMEM__AHEAD];        /* (target - from <= DPMEM__AHEAD) */
        int n = 0;
        for (uint64_t k = from; k < target; k++) chunks[n++] = dpmem__chunk_addr(k);
        pthread_mutex_unlock(&dpmem__G.log_mu);
        dpmem__populate(chunks, n);
        pthread_mutex_lock(&dpmem__G.log_mu);
    }
    pthread_mutex_unlock(&dpmem__G.log_mu);
    return NULL;
}

static inline uint8_t *dpmem__reserve(dpmem__thread *t, uint32_t bytes);
static inline uint8_t *dpmem__reserve_n(dpmem__thread *t, uint32_t bytes, int count);
static void dpmem__emit(uint32_t type, uint32_t aux, uint32_t id, uint64_t ts, const uint64_t *w, int n);

/* Puts this thread in G.writers, where dpmem_close reads which log's memory it may be storing into;
   log_mu held. It leaves the list when it exits (dpmem__thread_exit). A thread whose exit the kit
   cannot surely see (no thread key; or it logs again from a later key destructor, which the C library
   may not follow by another round of them) would leave a dangling entry: it is not listed, and no
   closed log's memory is unmapped any more (it stays anonymous memory: only address space). */
static void dpmem__list_locked(dpmem__thread *t) {
    if (t->listed || dpmem__G.untracked) return;
    if (!t->key_set || t->exits) { dpmem__G.untracked = 1; return; }
    t->prev_writer = NULL; t->next_writer = dpmem__G.writers;
    if (dpmem__G.writers) dpmem__G.writers->prev_writer = t;
    dpmem__G.writers = t;
    t->listed = 1;
}
static void dpmem__unlist_locked(dpmem__thread *t) {
    if (!t->listed) return;
    if (t->prev_writer) t->prev_writer->next_writer = t->next_writer; else dpmem__G.writers = t->next_writer;
    if (t->next_writer) t->next_writer->prev_writer = t->prev_writer;
    t->next_writer = t->prev_writer = NULL;
    t->listed = 0;
}

/* A new thread (no index yet) takes over the chunk and index of a thread that exited, if one left
   room; log_mu held. It announces itself by a THREAD event, as a thread taking its first chunk does. */
static int dpmem__adopt_locked(dpmem__thread *t, uint32_t gen) {
    if (!dpmem__G.nspare) return 0;
    dpmem__spare sp = dpmem__G.spare[--dpmem__G.nspare];
    t->index = sp.index; t->chunk = sp.chunk; t->pos = sp.pos; t->cap = DPMEM__CHUNK_BYTES; t->gen = gen;
    if (t->last_ts < sp.last_ts) t->last_ts = sp.last_ts;
    return 1;
}

/* Takes a fresh chunk for this thread (log_mu held inside). NULL when no log is open, or when there
   is no space: the event is then counted as dropped (`count`; not a STRING event, which is tried
   again at the next use of its string). */
static uint8_t *dpmem__reserve_slow(dpmem__thread *t, uint32_t bytes, int count) {
    __atomic_store_n(&t->busy, 0, __ATOMIC_RELAXED);   /* in no log's memory until a chunk is handed out below */
    if (bytes > DPMEM__CHUNK_BYTES - DPMEM__CHUNK_HEAD) { __atomic_fetch_add(&dpmem__G.dropped, 1, __ATOMIC_RELAXED); return NULL; }
    if (!(DPMEM__LOAD(&dpmem__G.gen) & 1)) return NULL;
    uint64_t until = DPMEM__RELAXED(&dpmem__G.no_space_until);
    int closing = DPMEM__RELAXED(&dpmem__G.closing);
    if (until && !closing && dpmem__now() < until) { __atomic_fetch_add(&dpmem__G.dropped, (uint64_t)count, __ATOMIC_RELAXED); return NULL; }
    pthread_mutex_lock(&dpmem__G.log_mu);
    uint32_t gen = dpmem__G.gen;
    if (!(gen & 1)) { pthread_mutex_unlock(&dpmem__G.log_mu); return NULL; }
    if (!t->key_set && dpmem__G.thread_key_ok) t->key_set = pthread_setspecific(dpmem__G.thread_key, t) == 0;
    dpmem__list_locked(t);
    if (!t->index && dpmem__adopt_locked(t, gen)) {
        pthread_mutex_unlock(&dpmem__G.log_mu);
        t->announced = gen;
        dpmem__emit_thread(t);
        return dpmem__reserve_n(t, bytes, count);   /* in the adopted chunk, or (full) in a fresh one */
    }
    /* The last chunk mapped is kept for the CLOSE event: a log that ran out of space still ends with
       one (and its count of dropped events). */
    int err = 0;
    if (dpmem__G.next_chunk + (closing ? 0 : 1) >= dpmem__G.mapped_chunks && (err = dpmem__grow_locked()) != 0) {
        __atomic_fetch_add(&dpmem__G.dropped, (uint64_t)count, __ATOMIC_RELAXED);
        dpmem__no_space_locked(err);
        pthread_mutex_unlock(&dpmem__G.log_mu);
        return NULL;
    }
    int resumed = dpmem__G.dropping;   /* space again after events were dropped: say how many */
    dpmem__G.dropping = 0; dpmem__G.backoff_ns = 0;
    __atomic_store_n(&dpmem__G.no_space_until, 0, __ATOMIC_RELAXED);
    uint64_t k = dpmem__G.next_chunk++;
    uint8_t *c = dpmem__chunk_addr(k);
    int populated = k < dpmem__G.populated;
    if (dpmem__G.pf_run && k + DPMEM__AHEAD / 2 >= dpmem__G.populated) pthread_cond_signal(&dpmem__G.pf_cv);
    __atomic_store_n(&t->busy, gen, __ATOMIC_RELAXED);   /* before the unlock: a close after it sees this */
    pthread_mutex_unlock(&dpmem__G.log_mu);
    if (!populated) dpmem__populate(&c, 1);

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
    if (resumed) {   /* after the caller's event, which is written before it is committed */
        uint64_t n = __atomic_load_n(&dpmem__G.dropped, __ATOMIC_RELAXED);
        dpmem__emit(DPMEM__EV_WARN, 0, dpmem__G.dropped_msg, dpmem__now(), &n, 1);
    }
    /* The THREAD and WARN events above left `busy` 0 at their commit: say again where the caller will
       store, then check that this log is still open (else nothing of it reaches the file anyway). */
    __atomic_store_n(&t->busy, gen, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (DPMEM__UNLIKELY(DPMEM__LOAD(&dpmem__G.gen) != gen)) { __atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE); return NULL; }
    return p;
}

/* Space for an event of `bytes` (a multiple of 8) in this thread's chunk, or NULL (no log, no space).
   The thread first says whose memory it is about to store into (`busy`, its chunk's generation), then
   checks that this log is still open; dpmem__commit sets it back to 0. A close that sees the log's
   generation in a writer's `busy` keeps that log's memory mapped (dpmem__in_use_locked). Only a
   compiler barrier here: the closer's membarrier() orders this store before the load for it. */
static inline uint8_t *dpmem__reserve_n(dpmem__thread *t, uint32_t bytes, int count) {
    __atomic_store_n(&t->busy, t->gen, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (DPMEM__LIKELY(t->gen == DPMEM__LOAD(&dpmem__G.gen) && t->pos + bytes <= t->cap)) {
        uint8_t *p = t->chunk + t->pos;
        t->pos += bytes;
        return p;
    }
    return dpmem__reserve_slow(t, bytes, count);
}
static inline uint8_t *dpmem__reserve(dpmem__thread *t, uint32_t bytes) { return dpmem__reserve_n(t, bytes, 1); }

/* The time stamp of a STRING or THREAD event, which a thread writes just before the event that needs
   it, whose time was taken before: that of its previous event (or the log's opening), so that every
   thread's events stay in time order and a reader's merge by time keeps ALLOC/FREE in their order. */
static inline uint64_t dpmem__meta_ts(const dpmem__thread *t) {
    uint64_t start = DPMEM__RELAXED(&dpmem__G.start_ns);   /* (dpmem_open may be setting it) */
    return t->last_ts > start ? t->last_ts : start;
}

/* Publishes an event whose payload is written: the head word goes last, so a reader (or a process
   killed in between) never sees half an event. */
static inline void dpmem__commit(dpmem__thread *t, uint8_t *p, uint32_t type, uint32_t aux, uint32_t bytes, uint32_t id, uint64_t ts) {
    /* A thread's stamps never step back: the TSC of the CPU a thread moves to may lag the last one's
       (vCPUs of a VM: microseconds), which a reader would take for a broken clock. */
    if (ts < t->last_ts) ts = t->last_ts;
    t->last_ts = ts;
#ifdef DPMEM_TEST_BEFORE_COMMIT   /* tests only: stall a writer between its reservation and its stores */
    DPMEM_TEST_BEFORE_COMMIT(p, type);
#endif
    memcpy(p + 4, &id, 4);
    memcpy(p + 8, &ts, 8);
    __atomic_store_n((uint32_t *)(void *)p, type | (aux << 8) | ((bytes / 8) << 16), __ATOMIC_RELEASE);
    __atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);   /* out of the log's memory: a close may unmap it */
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
/* ts 0: the thread's last event's time. An event stamped before its STRING was written (an ALLOC reads the clock before the lock,
   a BEGIN before the string) passes its own ts, so that the thread's events stay in time order. */
static void dpmem__ensure_string_at(dpmem__thread *t, uint32_t id, uint64_t ts) {
    if (!id) return;
    dpmem__str *s = dpmem__S(id);
    uint32_t gen = DPMEM__RELAXED(&dpmem__G.gen);
    if (DPMEM__LIKELY(DPMEM__RELAXED(&s->logged_gen) == gen)) return;
    uint32_t len = s->len < DPMEM__MAX_STRING ? s->len : DPMEM__MAX_STRING;
    uint32_t bytes = 16 + ((len + 1 + 7) & ~7u);
    uint8_t *p = dpmem__reserve_n(t, bytes, 0);
    if (!p) return;
    memcpy(p + 16, s->s, len);
    memset(p + 16 + len, 0, bytes - 16 - len);
    dpmem__commit(t, p, DPMEM__EV_STRING, 0, bytes, id, ts ? ts : dpmem__meta_ts(t));
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
    dpmem__commit(t, p, DPMEM__EV_THREAD, 0, bytes, t->index, dpmem__meta_ts(t));
}

/* A fixed-size event: head, id, ts, then n 64-bit payload words. */
static void dpmem__emit(uint32_t type, uint32_t aux, uint32_t id, uint64_t ts, const uint64_t *w, int n) {
    dpmem__thread *t = &dpmem__T;
    dpmem__ensure_string_at(t, id, ts);
    uint32_t bytes = 16 + 8 * (uint32_t)n;
    uint8_t *p = dpmem__reserve(t, bytes);
    if (!p) return;
    if (n) memcpy(p + 16, w, 8 * (size_t)n);
    dpmem__commit(t, p, type, aux, bytes, id, ts);
}

/* ---- strings ---------------------------------------------------------------------------------- */
static uint32_t dpmem__hash(const char *s, uint32_t len) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h ? h : 1;
}

static uint32_t dpmem__color(uint32_t h) {
    static const uint32_t palette[16] = {
        0xFF4E79A7, 0xFFF28E2B, 0xFFE15759, 0xFF76B7B2, 0xFF59A14F, 0xFFEDC948, 0xFFB07AA1, 0xFFFF9DA7,
        0xFF9C755F, 0xFFBAB0AC, 0xFF1F77B4, 0xFF2CA02C, 0xFFD62728, 0xFF9467BD, 0xFF8C564B, 0xFF17BECF };
    return palette[(h ^ (h >> 16)) & 15];
}

/* The first `len` bytes of s -> id, with the lock held; 0 when the table has no room (or memory)
   for it. Only the kit's own strings (`own`) may take the last DPMEM__OWN_IDS ids. */
static uint32_t dpmem__intern_n_locked(const char *s, uint32_t len, int own) {
    uint32_t h = dpmem__hash(s, len);
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
    if (id >= DPMEM__OVERFLOW_ID - (own ? 0 : DPMEM__OWN_IDS)) return 0;
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
    char *copy = (char *)malloc((size_t)len + 1);
    if (!copy) return 0;
    memcpy(copy, s, len);
    copy[len] = 0;
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

static void dpmem__warn_locked(const char *msg, uint64_t value);

/* What a string stands for once the table is full (about a million distinct strings): the reserved
   id of "overflow" (a tag of category "overflow", a scope or META name "overflow"), so that no byte
   is ever counted under another category's name. Said once, on stderr and by a WARN event. */
static uint32_t dpmem__overflow_locked(void) {
    if (!dpmem__G.table_full) {
        dpmem__G.table_full = 1;
        fprintf(stderr, "dpmem: the string table is full (%u strings): new tags count as category 'overflow', new "
                "scope and META names read 'overflow'; totals stay exact\n", dpmem__G.nstr);
        dpmem__warn_locked("string table full: new tags count as category overflow", dpmem__G.nstr);
    }
    return DPMEM__OVERFLOW_ID;
}

/* string -> id, with the lock held; the id of "overflow" when the table is full. */
static uint32_t dpmem__intern_locked(const char *s) {
    uint32_t id = dpmem__intern_n_locked(s, (uint32_t)strlen(s), 0);
    return id ? id : dpmem__overflow_locked();
}

/* A tag -> id, its category interned first: a tag whose category finds no room counts as "overflow"
   as a whole, so that the kit and a reader (which derives the category from the tag's text) agree. */
static uint32_t dpmem__tag_intern_locked(const char *tag) {
    uint32_t len = (uint32_t)strlen(tag);
    const char *slash = (const char *)memchr(tag, '/', len);
    uint32_t n = slash ? (uint32_t)(slash - tag) : len;
    if (n > DPMEM__MAX_STRING) n = DPMEM__MAX_STRING;   /* the category as the log keeps it */
    uint32_t id = dpmem__intern_n_locked(tag, n, 0) ? dpmem__intern_n_locked(tag, len, 0) : 0;
    return id ? id : dpmem__overflow_locked();
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
    id = dpmem__tag_intern_locked(tag);
    dpmem__unlock();
    t->tags[slot].ptr = tag; t->tags[slot].id = id;
    return id;
}

/* ---- accounting ------------------------------------------------------------------------------- */
/* The category index of a category name id, added when new. The array keeps one spare slot, so that
   the "overflow" category can always be added when growing it fails. -1: no memory. */
static int dpmem__category_locked(uint32_t cid) {
    int c;
    for (c = 0; c < dpmem__G.ncat; c++) if (dpmem__G.cats[c].name == cid) return c;
    if (dpmem__G.ncat + 2 > dpmem__G.cat_cap) {
        int cap = dpmem__G.cat_cap ? 2 * dpmem__G.cat_cap : 32;
        dpmem__cat *nc = (dpmem__cat *)realloc(dpmem__G.cats, (size_t)cap * sizeof *nc);
        if (nc) { dpmem__G.cats = nc; dpmem__G.cat_cap = cap; }
        else if (cid != DPMEM__OVERFLOW_ID || dpmem__G.ncat == dpmem__G.cat_cap) return -1;
    }
    dpmem__cat z = { cid, 0, 0, 0 };
    dpmem__G.cats[dpmem__G.ncat++] = z;
    return c;
}

static int dpmem__category_of_tag_locked(uint32_t tag) {
    dpmem__str *e = dpmem__S(tag);
    if (e->tag_cat >= 0) return e->tag_cat;
    uint32_t cid = DPMEM__OVERFLOW_ID;
    if (tag != DPMEM__OVERFLOW_ID) {   /* the part before the first '/', as the log keeps it */
        const char *slash = (const char *)memchr(e->s, '/', e->len);
        uint32_t n = slash ? (uint32_t)(slash - e->s) : e->len;
        if (n > DPMEM__MAX_STRING) n = DPMEM__MAX_STRING;
        if (n == 8 && !memcmp(e->s, "overflow", 8)) cid = DPMEM__OVERFLOW_ID;   /* one "overflow", as readers see it */
        else if (!(cid = dpmem__intern_n_locked(e->s, n, 0))) cid = dpmem__overflow_locked();   /* (there already) */
    }
    int c = dpmem__category_locked(cid);
    if (c < 0) {   /* out of memory: counted, but as overflow */
        c = dpmem__category_locked(dpmem__overflow_locked());
        return c;
    }
    e->tag_cat = c;
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
    if (ts < dpmem__T.last_ts) ts = dpmem__T.last_ts;   /* not before the thread's last event (dpmem__commit) */
    if (ts <= dpmem__G.last_alloc_ts) ts = dpmem__G.last_alloc_ts + 1;
    dpmem__G.last_alloc_ts = ts;
    return ts;
}

/* A WARN event of one of the kit's own messages (they may take the ids kept for them). */
static void dpmem__warn_locked(const char *msg, uint64_t value) {
    uint32_t id = dpmem__intern_n_locked(msg, (uint32_t)strlen(msg), 1);
    if (!id) id = DPMEM__OVERFLOW_ID;
    if (dpmem__log_open()) dpmem__emit(DPMEM__EV_WARN, 0, id, dpmem__now(), &value, 1);
}

/* ---- init, open, close ------------------------------------------------------------------------ */
static void dpmem__atexit(void) {
    dpmem_close();
    /* the destructor below lives in this copy of the kit: a library unloaded by dlclose() runs this */
    if (dpmem__G.thread_key_ok) { dpmem__G.thread_key_ok = 0; pthread_key_delete(dpmem__G.thread_key); }
    /* no thread's exit is seen from now on: the list of writers would keep entries of dead threads */
    pthread_mutex_lock(&dpmem__G.log_mu);
    dpmem__G.untracked = 1; dpmem__G.writers = NULL;
    pthread_mutex_unlock(&dpmem__G.log_mu);
}

/* A thread that logged exits: its chunk, with the room left in it, goes to the next new thread, which
   takes over its index (and announces itself by a THREAD event), so that short-lived threads do not
   cost a 64 KiB chunk each. Not when it exits inside a scope (the next one would seem nested in it). */
static void dpmem__thread_exit(void *arg) {
    dpmem__thread *t = (dpmem__thread *)arg;
    t->key_set = 0;
    pthread_mutex_lock(&dpmem__G.log_mu);
    if ((t->gen & 1) && t->gen == dpmem__G.gen && t->chunk && !t->depth && t->pos + 256 <= t->cap &&
        dpmem__G.nspare < DPMEM__SPARES) {
        dpmem__spare sp = { t->chunk, t->index, t->pos, t->last_ts };
        dpmem__G.spare[dpmem__G.nspare++] = sp;
        t->chunk = NULL; t->pos = t->cap = 0; t->gen = 0; t->index = 0; t->announced = 0;
    }
    /* Out of the list of writers (its memory goes with the thread). Should a later destructor log, it
       takes the slow path (gen 0), which sets the key again but leaves it unlisted (dpmem__list_locked). */
    t->exits++;
    dpmem__unlist_locked(t);
    t->gen = 0;
    pthread_mutex_unlock(&dpmem__G.log_mu);
}

static void dpmem__atfork_child(void) {
    /* The child must not write into (or truncate) the parent's log: it starts with no log, and
       without the parent's mappings (it has one thread: nobody writes into them). */
    dpmem__G.gen += (dpmem__G.gen & 1);
    if (dpmem__G.fd >= 0) close(dpmem__G.fd);
    for (int i = 0; i < dpmem__G.nseg; i++) munmap(dpmem__G.seg[i].base, dpmem__G.seg[i].nchunks * DPMEM__CHUNK_BYTES);
    for (int i = 0; i < dpmem__G.nretired; i++) munmap(dpmem__G.retired[i].base, dpmem__G.retired[i].bytes);
    dpmem__G.fd = -1; dpmem__G.nseg = dpmem__G.nretired = dpmem__G.nspare = 0;
    dpmem__G.writers = NULL;   /* the other threads were not copied; this one is listed again when it logs */
    dpmem__T.listed = 0; dpmem__T.next_writer = dpmem__T.prev_writer = NULL; dpmem__T.busy = 0;
    dpmem__G.membarrier = 0;   /* registered for the parent's address space, not for this one */
    dpmem__G.next_chunk = dpmem__G.mapped_chunks = dpmem__G.populated = 0;
    dpmem__G.pf_run = dpmem__G.pf_started = 0; /* the prefault thread was not copied into the child */
    pthread_mutex_init(&dpmem__G.log_mu, NULL);
    pthread_cond_init(&dpmem__G.pf_cv, NULL);
    dpmem__G.lock = 0;
}

static int dpmem__open(const char *path, int from_env);

static void dpmem__init_once(void) {
    pthread_mutex_init(&dpmem__G.log_mu, NULL);
    pthread_cond_init(&dpmem__G.pf_cv, NULL);
    dpmem__G.fd = -1;
    dpmem__clock_init();
#ifndef DPMEM_NO_NVTX
    nvtxInitialize(NULL);
    dpmem__G.domain = nvtxDomainCreateA("dpmem");
#endif
    dpmem__G.pages[DPMEM__MAX_PAGES - 1] = dpmem__last_page;
    dpmem__str *o = dpmem__S(DPMEM__OVERFLOW_ID);
    o->s = "overflow"; o->len = 8; o->hash = dpmem__hash(o->s, 8); o->tag_cat = -1; o->color = dpmem__color(o->hash);
#ifndef DPMEM_NO_NVTX
    if (dpmem__G.domain) o->nvtx = nvtxDomainRegisterStringA(dpmem__G.domain, o->s);
#endif
    dpmem__G.thread_key_ok = pthread_key_create(&dpmem__G.thread_key, dpmem__thread_exit) == 0;
    pthread_atfork(NULL, NULL, dpmem__atfork_child);
    atexit(dpmem__atexit);
    DPMEM__STORE(&dpmem__G.ready, 1);
    const char *env = getenv("DPMEM_LOG");
    if (env && *env && !DPMEM__LOAD(&dpmem__G.explicit_first)) dpmem__open(env, 1);
}
static inline void dpmem__init(void) {
    if (DPMEM__UNLIKELY(!DPMEM__LOAD(&dpmem__G.ready))) pthread_once(&dpmem__once, dpmem__init_once);
}

/* Opens, locks and starts the log file at path: its fd, -1 (said on stderr), or -2 when another
   writer holds the file (*owner: its pid from the header, 0 if not known yet). The lock (flock, on
   this open file) comes before the truncation: a second run on the same path, or a second copy of the
   kit in this process, must not destroy the log being written. */
static int dpmem__open_file(const char *path, uint64_t *owner, uint64_t *start_ns) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "dpmem: cannot log to %s: not a regular file (the log is written through a memory mapping)\n", path);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) { fprintf(stderr, "dpmem: cannot open log %s: %s\n", path, strerror(errno)); return -1; }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {   /* (no locks on this file system: go on) */
        *owner = 0;
        if (pread(fd, owner, 8, 24) != 8) *owner = 0;
        close(fd);
        return -2;
    }
    uint8_t head[DPMEM__HEADER_BYTES];
    memset(head, 0, sizeof head);
    uint32_t u32[4] = { DPMEM__VERSION, DPMEM__HEADER_BYTES, DPMEM__CHUNK_BYTES, 0 };
    struct timespec rt; clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t u64[3] = { (uint64_t)getpid(), (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec, dpmem__now() };
    memcpy(head, "DPMEMLOG", 8); memcpy(head + 8, u32, 16); memcpy(head + 24, u64, 24);
    *start_ns = u64[2];
    errno = 0;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, head, sizeof head, 0) != (ssize_t)sizeof head) {
        fprintf(stderr, "dpmem: cannot write log %s: %s\n", path, strerror(errno ? errno : EIO));
        close(fd); return -1;
    }
    return fd;
}

/* path with ".<pid>" (k = 1) or ".<pid>-<k>" before its extension: run.log -> run.4242.log */
static void dpmem__alt_path(char *buf, size_t n, const char *path, int k) {
    const char *base = strrchr(path, '/'), *dot = strrchr(base ? base + 1 : path, '.');
    size_t stem = dot && dot != (base ? base + 1 : path) ? (size_t)(dot - path) : strlen(path);
    char tail[48];
    if (k == 1) snprintf(tail, sizeof tail, ".%ld", (long)getpid());
    else snprintf(tail, sizeof tail, ".%ld-%d", (long)getpid(), k);
    snprintf(buf, n, "%.*s%s%s", (int)stem, path, tail, path + stem);
}

/* from_env: the path came from DPMEM_LOG (no code of the program checks dpmem_open's result): when
   another writer holds it, this process writes its own file beside it and says where. */
static int dpmem__open(const char *path, int from_env) {
    if (dpmem__log_open()) dpmem_close();
    uint64_t owner = 0, start_ns = 0;
    int fd = dpmem__open_file(path, &owner, &start_ns);
    char alt[4200], who[200];
    const char *used = path;
    if (fd == -2) {
        if (owner == (uint64_t)getpid())
            snprintf(who, sizeof who, "another copy of dpmem in this process (a library or plugin built with its own "
                     "DPMEM_IMPLEMENTATION; link the program with -rdynamic so that it uses the program's copy)");
        else if (owner)
            snprintf(who, sizeof who, "process %llu (two runs on one log path)", (unsigned long long)owner);
        else
            snprintf(who, sizeof who, "another process (two runs on one log path)");
        if (!from_env) {
            fprintf(stderr, "dpmem: cannot log to %s: %s is writing it; give this run another log\n", path, who);
            return -1;
        }
        for (int k = 1; fd == -2 && k <= 16; k++) {
            dpmem__alt_path(alt, sizeof alt, path, k);
            fd = dpmem__open_file(alt, &owner, &start_ns);
        }
        if (fd < 0) {
            if (fd == -2) fprintf(stderr, "dpmem: cannot log to %s: %s is writing it, and %s is taken too\n", path, who, alt);
            return -1;
        }
        fprintf(stderr, "dpmem: %s is being written by %s: this %s logs to %s\n", path, who,
                owner == (uint64_t)getpid() ? "copy" : "process", alt);
        used = alt;
    }
    if (fd < 0) return -1;
    pthread_mutex_lock(&dpmem__G.log_mu);
    free(dpmem__G.path);
    dpmem__G.path = strdup(used);
    dpmem__G.log_from_env = from_env;
    dpmem__G.fd = fd; dpmem__G.nseg = 0; dpmem__G.next_chunk = dpmem__G.mapped_chunks = dpmem__G.populated = 0;
    __atomic_store_n(&dpmem__G.start_ns, start_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&dpmem__G.dropped, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&dpmem__G.no_space_until, 0, __ATOMIC_RELAXED);
    dpmem__G.backoff_ns = 0; dpmem__G.dropping = 0; dpmem__G.nspare = 0;
    __atomic_store_n(&dpmem__G.closing, 0, __ATOMIC_RELAXED);
    DPMEM__STORE(&dpmem__G.gen, dpmem__G.gen + 1);
    dpmem__G.pf_run = 1;
    dpmem__G.pf_started = pthread_create(&dpmem__G.pf_thread, NULL, dpmem__prefault_main, NULL) == 0;
    if (!dpmem__G.pf_started) dpmem__G.pf_run = 0;  /* writers populate their own chunks then */
    pthread_mutex_unlock(&dpmem__G.log_mu);
    /* The run's configuration set before the log was opened goes in too. */
    dpmem__lock();
    static const char dropped_msg[] = "log events dropped: no space to write them (the value: how many so far)";
    dpmem__G.dropped_msg = dpmem__intern_n_locked(dropped_msg, (uint32_t)sizeof dropped_msg - 1, 1);
    if (!dpmem__G.dropped_msg) dpmem__G.dropped_msg = DPMEM__OVERFLOW_ID;
    for (int i = 0; i < dpmem__G.nmeta; i++) {
        uint64_t v = dpmem__G.meta[2 * i + 1];
        dpmem__ensure_string(&dpmem__T, (uint32_t)v);
        dpmem__emit(DPMEM__EV_META, 0, dpmem__G.meta[2 * i], dpmem__now(), &v, 1);
    }
    dpmem__unlock();
    return 0;
}

/* The program's own dpmem_open wins over DPMEM_LOG (its code asked for that file), and says so in one
   line: one log, not DPMEM_LOG's file beside it with nothing but an open and a close. When DPMEM_LOG's
   log already holds the program's earlier events, it ends there and keeps them. */
DPMEM_DEF int dpmem_open(const char *path) {
    const char *env = getenv("DPMEM_LOG");
    if (!DPMEM__LOAD(&dpmem__G.ready)) DPMEM__STORE(&dpmem__G.explicit_first, 1);   /* (before init reads it) */
    dpmem__init();
    const int env_open = dpmem__log_open() && dpmem__G.log_from_env;
    const char *env_path = env_open ? dpmem__G.path : env;
    if (env && *env && (env_open || DPMEM__LOAD(&dpmem__G.explicit_first)) && strcmp(path, env_path) != 0) {
        if (env_open)
            fprintf(stderr, "dpmem: the program opens its own log %s (dpmem_open): DPMEM_LOG's %s ends here, with the events "
                    "before it\n", path, dpmem__G.path);
        else
            fprintf(stderr, "dpmem: DPMEM_LOG=%s is not used: the program opens its own log %s (dpmem_open)\n", env, path);
    }
    DPMEM__STORE(&dpmem__G.explicit_first, 0);   /* said once; a later dpmem_open is the program's own affair */
    return dpmem__open(path, 0);
}

/* After the close's generation store: makes every writer's `busy` stored before its load of the
   generation visible here (membarrier(2): each running thread of the process passes a full barrier;
   the writers need none on their hot path). 0 where the kernel has no membarrier: then nothing is
   unmapped (the closed logs stay anonymous memory). */
static int dpmem__writer_fence(void) {
#if defined(SYS_membarrier)
    enum { MB_PRIVATE_EXPEDITED = 1 << 3, MB_REGISTER_PRIVATE_EXPEDITED = 1 << 4 };   /* linux/membarrier.h */
    if (!dpmem__G.membarrier)
        dpmem__G.membarrier = syscall(SYS_membarrier, MB_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
    return dpmem__G.membarrier > 0 && syscall(SYS_membarrier, MB_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
    return 0;
#endif
}

/* 1 if a writer may be storing into the memory of log generation `gen`; log_mu held, after
   dpmem__writer_fence. */
static int dpmem__in_use_locked(uint32_t gen) {
    if (dpmem__G.untracked) return 1;
    for (const dpmem__thread *w = dpmem__G.writers; w; w = w->next_writer)
        if (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE) == gen) return 1;
    return 0;
}

DPMEM_DEF void dpmem_close(void) {
    if (!DPMEM__LOAD(&dpmem__G.ready) || !dpmem__log_open()) return;
    /* a layer's last words first (dpmem_cuda.h writes the GPU times still pending) */
    dpmem_close_hook_fn hook = DPMEM__LOAD(&dpmem__G.close_hook);
    if (hook) hook(dpmem__G.close_hook_user);
    __atomic_store_n(&dpmem__G.closing, 1, __ATOMIC_RELAXED);   /* it may take the chunk kept for it */
    pthread_mutex_lock(&dpmem__G.log_mu);   /* writers hand out chunks under it */
    uint64_t w[2] = { dpmem__G.next_chunk, DPMEM__RELAXED(&dpmem__G.dropped) };
    pthread_mutex_unlock(&dpmem__G.log_mu);
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
        uint32_t closed = dpmem__G.gen;
        DPMEM__STORE(&dpmem__G.gen, closed + 1);
        dpmem__G.nspare = 0;
        /* A thread may be writing its last event into this log right now: each mapping of the file
           becomes anonymous memory at the same address (MAP_FIXED), so that such a late store neither
           faults nor reaches the file, which nothing maps any more (another process may truncate it).
           The anonymous ranges of logs closed before are unmapped once no writer is inside them (a
           writer stalled in one, however long, keeps it): open/close cycles do not pile up address
           space, and no late store meets an unmapped page. */
        int fenced = dpmem__G.nretired && dpmem__writer_fence();
        int kept = 0;
        for (int i = 0; i < dpmem__G.nretired; i++) {
            dpmem__retired *r = &dpmem__G.retired[i];
            if (fenced && !dpmem__in_use_locked(r->gen)) munmap(r->base, r->bytes);
            else dpmem__G.retired[kept++] = *r;
        }
        dpmem__G.nretired = kept;
        for (int i = 0; i < dpmem__G.nseg; i++) {
            dpmem__segment *sg = &dpmem__G.seg[i];
            size_t len = sg->nchunks * DPMEM__CHUNK_BYTES;
            if (mmap(sg->base, len, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
                continue;   /* the file mapping stays (no memory for the replacement) */
            /* (with more closed logs kept than there are slots, anonymous memory for good) */
            if (dpmem__G.nretired < (int)DPMEM__MAX_SEGMENTS) {
                dpmem__retired r = { sg->base, len, closed };
                dpmem__G.retired[dpmem__G.nretired++] = r;
            }
        }
        dpmem__G.nseg = 0;
        /* Only the unused space is cut off; no chunk beyond next_chunk was ever handed out. */
        if (ftruncate(dpmem__G.fd, (off_t)DPMEM__HEADER_BYTES + (off_t)(dpmem__G.next_chunk * DPMEM__CHUNK_BYTES)) != 0)
            fprintf(stderr, "dpmem: cannot trim log %s: %s\n", dpmem__G.path, strerror(errno));
        uint64_t dropped = DPMEM__RELAXED(&dpmem__G.dropped);
        if (dropped) {
            dpmem__header_dropped_locked();
            fprintf(stderr, "dpmem: %llu events could not be written to the log %s (no space); the log says so\n",
                    (unsigned long long)dropped, dpmem__G.path);
        }
        /* unlocked explicitly: a page fault of a late writer may still hold the file for a moment */
        flock(dpmem__G.fd, LOCK_UN);
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
    if (!id || (id > DPMEM__LOAD(&dpmem__G.nstr) && (id != DPMEM__OVERFLOW_ID || !DPMEM__LOAD(&dpmem__G.ready)))) return NULL;
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
        if (p) dpmem__commit(t, p, DPMEM__EV_BEGIN, 0, 16, id, ts);
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
        if (p) dpmem__commit(t, p, DPMEM__EV_END, 0, 16, id, ts ? ts : dpmem__now());
    }
#ifndef DPMEM_NO_NVTX
    if (dpmem__G.domain) nvtxDomainRangePop(dpmem__G.domain);
#endif
}

DPMEM_DEF uint32_t dpmem__scope_begin(uint32_t *site, const char *name) {
    dpmem__init();
    uint32_t id;
    if (site) {
        /* acquire/release: another thread that finds the id here reads the string entry it names */
        id = DPMEM__LOAD(site);
        if (DPMEM__UNLIKELY(!id)) { id = dpmem_intern(name); DPMEM__STORE(site, id); }
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
    if (!ptr) { dpmem__lock(); dpmem__warn_locked("tag of a NULL pointer ignored", 0); dpmem__unlock(); return; }
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
    /* The totals are 64-bit and the tools call a size of 2^63 or more forged: an allocation that
       would take the live total there is not counted (a wrapped total would report a lie). */
    if ((uint64_t)bytes >= ((uint64_t)1 << 63) - dpmem__G.live) {
        dpmem__warn_locked("an allocation past 2^63 live bytes in all was not counted", (uint64_t)bytes);
        dpmem__unlock();
        return;
    }
    dpmem__rec r = { (uint64_t)(uintptr_t)ptr, (uint64_t)bytes, tid, (uint32_t)cat, sp, 1 };
    if (cat < 0 || dpmem__rec_insert_locked(&r) != 0) {   /* the kit's own tables: no memory left */
        dpmem__warn_locked("out of memory in the kit: an allocation was not counted", (uint64_t)bytes);
        dpmem__unlock();
        return;
    }
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
/* The rows of a breakdown by category (SNAPSHOT, OOM), which must fit in one chunk: every category,
   or when there are more than `cap`, the cap - 1 with the most live bytes (in the kit's order) and an
   "overflow" row with the sum of all others, said once by a WARN event: the rows always add up. */
typedef struct { int n, *pick; uint64_t rest; } dpmem__rows;
static int dpmem__cmp_live_desc(const void *a, const void *b) {
    uint64_t x = dpmem__G.cats[*(const int *)a].live, y = dpmem__G.cats[*(const int *)b].live;
    return x != y ? (x < y ? 1 : -1) : (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}
static int dpmem__cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }
static dpmem__rows dpmem__rows_locked(int cap) {
    dpmem__rows r = { dpmem__G.ncat, NULL, 0 };
    if (r.n <= cap) return r;
    r.n = cap;
    r.pick = (int *)malloc((size_t)dpmem__G.ncat * sizeof *r.pick);
    if (!r.pick) { r.n = 0; return r; }   /* no memory: the rows alone would be wrong, so none */
    for (int i = 0; i < dpmem__G.ncat; i++) r.pick[i] = i;
    qsort(r.pick, (size_t)dpmem__G.ncat, sizeof *r.pick, dpmem__cmp_live_desc);
    int k = 0;   /* the largest, but not "overflow" itself: it is summed into the last row */
    for (int i = 0; i < dpmem__G.ncat; i++) {
        int c = r.pick[i];
        if (k < cap - 1 && dpmem__G.cats[c].name != DPMEM__OVERFLOW_ID) r.pick[k++] = c;
        else r.rest += dpmem__G.cats[c].live;
    }
    r.n = k + 1;
    qsort(r.pick, (size_t)k, sizeof *r.pick, dpmem__cmp_int);
    if (!dpmem__G.rows_cut) {
        dpmem__G.rows_cut = 1;
        dpmem__warn_locked("more categories than an event holds: the smallest summed as overflow", (uint64_t)dpmem__G.ncat);
    }
    return r;
}
static void dpmem__rows_strings(dpmem__thread *t, const dpmem__rows *r) {
    for (int i = 0; i < r->n; i++)
        dpmem__ensure_string(t, !r->pick ? dpmem__G.cats[i].name : i < r->n - 1 ? dpmem__G.cats[r->pick[i]].name : DPMEM__OVERFLOW_ID);
}
static void dpmem__rows_write(uint8_t *q, const dpmem__rows *r) {
    for (int i = 0; i < r->n; i++, q += 16) {
        int c = r->pick ? (i < r->n - 1 ? r->pick[i] : -1) : i;
        uint32_t w[2] = { c >= 0 ? dpmem__G.cats[c].name : DPMEM__OVERFLOW_ID, 0 };
        uint64_t live = c >= 0 ? dpmem__G.cats[c].live : r->rest;
        memcpy(q, w, 8); memcpy(q + 8, &live, 8);
    }
}

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
        dpmem__rows rows = dpmem__rows_locked((int)((DPMEM__CHUNK_BYTES - DPMEM__CHUNK_HEAD - 48) / 16));
        dpmem__rows_strings(t, &rows);
        uint32_t bytes = 48 + 16 * (uint32_t)rows.n;
        uint8_t *p = dpmem__reserve(t, bytes);
        if (p) {
            uint64_t w[3] = { (uint64_t)used, (uint64_t)total, dpmem__G.live_space[DPMEM_DEVICE] };
            uint32_t nn[2] = { (uint32_t)rows.n, 0 };
            memcpy(p + 16, w, 24); memcpy(p + 40, nn, 8);
            dpmem__rows_write(p + 48, &rows);
            dpmem__commit(t, p, DPMEM__EV_SNAPSHOT, 0, bytes, lid, dpmem__now());
        }
        free(rows.pick);
    }
    dpmem__unlock();
}

static void dpmem__fmt_bytes(char *buf, size_t n, uint64_t b) {
    if (b >= (1ull << 30)) snprintf(buf, n, "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    else if (b >= (1ull << 10)) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
}

/* the post-mortem's order of buffers: more bytes first, then by tag name */
static int dpmem__top_before(const dpmem__rec *a, const dpmem__rec *b) {
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    return strcmp(dpmem__name(a->tag), dpmem__name(b->tag)) < 0;
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
        /* largest first, ties by tag name: the table's slot order follows the addresses (they differ
           run to run), and the post-mortem of the same OOM must read the same every time */
        if (ntop == TOP && !dpmem__top_before(r, &top[TOP - 1])) continue;   /* not among the largest */
        int j = ntop < TOP ? ntop++ : TOP - 1;                                 /* insertion sort */
        while (j > 0 && dpmem__top_before(r, &top[j - 1])) { top[j] = top[j - 1]; j--; }
        top[j] = *r;
    }
    int depth = (int)(t->depth < DPMEM_MAX_DEPTH ? t->depth : DPMEM_MAX_DEPTH);
    if (dpmem__log_open()) {
        uint32_t stack_bytes = (uint32_t)((4 * depth + 7) & ~7);
        dpmem__rows rows = dpmem__rows_locked((int)((DPMEM__CHUNK_BYTES - DPMEM__CHUNK_HEAD - 56 - stack_bytes) / 16) - ntop);
        int ncat = rows.n;
        dpmem__ensure_string(t, tid);
        for (int i = 0; i < depth; i++) dpmem__ensure_string(t, t->stack[i]);
        dpmem__rows_strings(t, &rows);
        for (int i = 0; i < ntop; i++) dpmem__ensure_string(t, top[i].tag);
        uint32_t total_bytes = 56 + stack_bytes + 16 * (uint32_t)ncat + 16 * (uint32_t)ntop;
        uint8_t *p = dpmem__reserve(t, total_bytes);
        if (p) {
            memset(p + 16, 0, total_bytes - 16);
            uint64_t w[3] = { (uint64_t)bytes, (uint64_t)device_used, (uint64_t)device_total };
            uint32_t n[4] = { (uint32_t)depth, (uint32_t)ncat, (uint32_t)ntop, 0 };
            memcpy(p + 16, w, 24); memcpy(p + 40, n, 16);
            uint8_t *q = p + 56;
            memcpy(q, t->stack, 4 * (size_t)depth); q += stack_bytes;
            dpmem__rows_write(q, &rows);
            q += 16 * (size_t)ncat;
            for (int i = 0; i < ntop; i++, q += 16) { memcpy(q, &top[i].tag, 4); memcpy(q + 8, &top[i].bytes, 8); }
            dpmem__commit(t, p, DPMEM__EV_OOM, (uint32_t)(space & 3), total_bytes, tid, dpmem__now());
            /* The page cache already survives the process; this also survives the machine. */
            uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
            msync((void *)page, (size_t)((uintptr_t)p + total_bytes - page), MS_SYNC);
        }
        free(rows.pick);
    }
    /* the report on stderr, one paragraph */
    char line[4096], b[32]; size_t len = 0;
    dpmem__fmt_bytes(b, sizeof b, bytes);
    len += (size_t)snprintf(line + len, sizeof line - len, "dpmem: OOM in %s: asked %s for %s; live:",
                            depth ? dpmem__name(t->stack[depth - 1]) : "(no scope)", b, dpmem__name(tid));
    for (int i = 0; i < dpmem__G.ncat && len < sizeof line - 64; i++) {
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
    uint32_t id = dpmem__intern_locked(message ? message : "");
    if (dpmem__log_open()) dpmem__emit(DPMEM__EV_WARN, 0, id, dpmem__now(), &value, 1);
    dpmem__unlock();
}
#endif
