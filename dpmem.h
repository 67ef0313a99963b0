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

#include <stddef.h>
#include <stdint.h>

#ifndef DPMEM_DEF
#define DPMEM_DEF extern
#endif

/* Memory spaces of a tagged allocation (dpmem_cuda.h uses the others). */
enum { DPMEM_HOST = 0, DPMEM_DEVICE = 1, DPMEM_PINNED = 2, DPMEM_MANAGED = 3 };

/* Hooks for layers such as dpmem_cuda.h. */
typedef void (*dpmem_scope_hook_fn)(void *user, int begin, uint32_t name_id, uint64_t ts_ns);
typedef int  (*dpmem_device_info_fn)(void *user, size_t *used, size_t *total);

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
DPMEM_DEF void        dpmem_tag_alloc(const void *ptr, size_t bytes, const char *tag);
DPMEM_DEF void        dpmem_tag_alloc_space(const void *ptr, size_t bytes, const char *tag, int space);
DPMEM_DEF size_t      dpmem_tag_free(const void *ptr);
DPMEM_DEF void        dpmem_snapshot(const char *label);

/* Queries. category NULL = the total over all categories. */
DPMEM_DEF size_t      dpmem_live_bytes(const char *category);
DPMEM_DEF size_t      dpmem_peak_bytes(const char *category);   /* the category's own high-water mark */
DPMEM_DEF size_t      dpmem_bytes_at_peak(const char *category);/* its live bytes when the total peaked */
DPMEM_DEF size_t      dpmem_live_bytes_in(int space);           /* live bytes in one memory space */
DPMEM_DEF int         dpmem_category_count(void);               /* categories seen so far ...      */
DPMEM_DEF const char *dpmem_category_name(int i);               /* ... by index, 0 <= i < count    */
DPMEM_DEF size_t      dpmem_tag_bytes(const void *ptr);         /* bytes of a live allocation, or 0 */
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

#define DPMEM_SCOPE(name)                ((void)0)
#define DPMEM_SCOPE_DYN(name)            ((void)0)
#define DPMEM_TAG_ALLOC(ptr, bytes, tag) ((void)0)
#define DPMEM_TAG_FREE(ptr)              ((void)0)
#define DPMEM_SNAPSHOT(label)            ((void)0)
#define dpmem_open(path)                 ((void)(path), 0)
#define dpmem_close()                    ((void)0)
#define dpmem_logging()                  0
#define dpmem_meta(k, v)                 ((void)0)
#define dpmem_meta_int(k, v)             ((void)0)
#define dpmem_range_push(name)           ((void)0)
#define dpmem_range_pop()                ((void)0)
#define dpmem_tag_alloc(p, n, t)         ((void)0)
#define dpmem_tag_alloc_space(p, n, t, s) ((void)0)
#define dpmem_tag_free(p)                ((size_t)0)
#define dpmem_snapshot(label)            ((void)0)
#define dpmem_live_bytes(c)              ((size_t)0)
#define dpmem_peak_bytes(c)              ((size_t)0)
#define dpmem_bytes_at_peak(c)           ((size_t)0)
#define dpmem_live_bytes_in(s)           ((size_t)0)
#define dpmem_category_count()           0
#define dpmem_category_name(i)           ((const char *)0)
#define dpmem_tag_bytes(p)               ((size_t)0)
#define dpmem_reset_peak()               ((void)0)
#define dpmem_oom(n, t, s, u, tot)       ((void)0)
#define dpmem_now_ns()                   ((uint64_t)0)
#define dpmem_thread_name(n)             ((void)0)
#define dpmem_thread_index()             ((uint32_t)0)
#define dpmem_set_scope_hook(f, u)       ((void)0)
#define dpmem_set_device_info(f, u)      ((void)0)
#define dpmem_log_gpu_time(a, b, c, d)   ((void)0)
#define dpmem_log_device_sample(u, t)    ((void)0)
#define dpmem_warn(m, v)                 ((void)0)
#define dpmem_intern(s)                  ((uint32_t)0)
#define dpmem_string(id)                 ((const char *)0)
#define dpmem_scope_stack(ids, max)      0

#endif /* DPMEM_DISABLE */
#endif /* DPMEM_H */

/* ============================================================================================== */
/*                                       IMPLEMENTATION                                           */
/* ============================================================================================== */
#if defined(DPMEM_IMPLEMENTATION) && !defined(DPMEM_DISABLE) && !defined(DPMEM__IMPLEMENTED)
#define DPMEM__IMPLEMENTED
/* (being written) */
#endif
