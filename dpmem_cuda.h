/* dpmem_cuda.h — the GPU layer of dpmem: tagged device memory, device figures in snapshots, GPU time
   of scopes, the OOM post-mortem, NVTX memory regions and counters, a background device sampler.

   dpmem.h counts what it is told. This header tells it about CUDA memory: every tagged cudaMalloc is
   accounted in the DEVICE space, snapshots carry cudaMemGetInfo beside the tagged total (the
   difference is "untracked": CUDA context, cuBLAS workspace, other libraries), a failed allocation
   writes the OOM post-mortem before the call returns, and scopes can also be timed on the GPU.
   It does NOT wrap cudaMalloc behind your back (no interposition): only the calls below are seen.

   USE
     Include after (or instead of) dpmem.h; in exactly one .c or .cu file
         #define DPMEM_IMPLEMENTATION
         #include "dpmem_cuda.h"          // also brings dpmem.h and its implementation
     or, when dpmem.h's implementation already lives in a file built without CUDA, in one CUDA file
         #define DPMEM_CUDA_IMPLEMENTATION
         #include "dpmem_cuda.h"          // this layer's implementation only
     Link with -lcudart -ldl -lpthread (and -lcublas for the workspace helper).

         dpmem_cuda_init();                                   // or let the first dpmem_cuda_* call do it
         float *w;
         CUDA_CHECK(DPMEM_CUDA_MALLOC(w, n * sizeof *w, "params/layers.0.wq"));
         ...
         { DPMEM_SCOPE("backward"); ... }                     // with DPMEM_CUDA_TIMING=1: GPU time too
         dpmem_snapshot("after step 1");                      // + device used/total, untracked
         DPMEM_CUDA_FREE(w);
         dpmem_close();                                       // GPU times still pending go in first

   API (every allocation function returns the CUDA error of the underlying call unchanged)
     dpmem_cuda_malloc(&p, bytes, tag)        cudaMalloc + accounting (space DEVICE)
     dpmem_cuda_free(p)                       accounting + cudaFree
     dpmem_cuda_malloc_async(&p, bytes, tag, stream) / dpmem_cuda_free_async(p, stream)
     dpmem_cuda_malloc_host(&p, bytes, tag) / dpmem_cuda_free_host(p)        (space PINNED)
     dpmem_cuda_malloc_managed(&p, bytes, tag), freed with dpmem_cuda_free   (space MANAGED)
     DPMEM_CUDA_MALLOC(p, bytes, tag) ...     macro forms taking the pointer itself, any type
     dpmem_cuda_tag(p, bytes, tag, space) / dpmem_cuda_untag(p)
                                              the accounting + NVTX part alone, for memory that
                                              another allocator (a caching pool, a library) handed out
     dpmem_cublas_set_workspace(handle, &ws, bytes)   (define DPMEM_CUDA_CUBLAS first) a tagged
                                              "cublas/workspace" buffer given to cublasSetWorkspace,
                                              so cuBLAS's workspace stops being untracked
     dpmem_cuda_timing(on)                    GPU time of scopes on/off (-1: no device)
     dpmem_cuda_set_stream(stream)            the stream this thread's scope events go on (default 0)
     dpmem_cuda_flush()                       wait for and write every pending GPU time
     dpmem_cuda_on_gpu_time(fn, user)         fn(user, name_id, parent_id, begin_ts_ns, gpu_ns) for every
                                              scope's GPU time as it is read back, log or no log
                                              (parent_id: the timed scope it was opened in, or 0)
     dpmem_cuda_nvtx(regions, counters)       NVTX memory names/regions / counters on or off
     dpmem_cuda_nvtx_pool(base, bytes)        declare a sub-allocator's pool (0, or -1: empty, overlapping
                                              or a 65th): tagged blocks inside it become NVTX regions of
                                              a heap over the pool (compute-sanitizer then reports
                                              accesses to the pool outside live blocks)
     dpmem_cuda_nvtx_pool_release(base)       forget it (its heap and blocks with it; -1: not a pool),
                                              before the pool's memory is freed
     dpmem_cuda_sampler(ms)                   background cudaMemGetInfo sampler (0 stops it)
     dpmem_cuda_device_memory(&used, &total)  cudaMemGetInfo as used/total (0, or -1: no device)
     dpmem_cuda_init()                        hooks into dpmem.h, reads the environment (0, or -1:
                                              no CUDA device; the kit then works without device figures)
     dpmem_cuda_shutdown()                    stops the sampler and flushes; also runs at exit

   ENVIRONMENT (read by dpmem_cuda_init)
     DPMEM_CUDA_TIMING=1   time scopes on the GPU. Each scope records a CUDA event at begin and end on
                           the thread's stream; elapsed times are read back later without waiting (at
                           later scope ends, at snapshots, at flush/exit) and logged as GPU_TIME events.
     DPMEM_SAMPLE_MS=N     a thread records cudaMemGetInfo every N ms (DEVICE events), for memory
                           moved by code that is not instrumented.
     DPMEM_NVTX_MEM=0      do not name tagged device and managed allocations by their tag through
                           NVTX (nvtxMemRegionsName; compute-sanitizer --nvtx yes shows the names in
                           its reports); a block of a declared pool is also registered as a region of
                           the pool's heap (nvtxMemHeapRegister, nvtxMemRegionsRegister).
     DPMEM_NVTX_COUNTERS=0 do not emit live bytes per category as NVTX counters.
     NVTX regions and counters are only emitted when a tool listens (NVTX_INJECTION64_PATH is set, or
     NVTX hands out domains, which it does only with a tool attached): otherwise a tagged allocation
     pays one branch.

   OPTIONS (define before including)
     DPMEM_DISABLE      every macro and function becomes the bare CUDA call (or nothing): no dpmem,
                        NVTX, event or cudaMemGetInfo call remains.
     DPMEM_NO_NVTX      no NVTX memory regions or counters (as in dpmem.h).
     DPMEM_CUDA_CUBLAS  declare dpmem_cublas_set_workspace (includes cublas_v2.h).

   LIMITS
     GPU time of a scope is the device time between its begin and end events on the chosen stream:
     work the scope put on other streams is not in it unless those streams join it. Do not turn timing
     on around CUDA graph capture of that stream. Pending GPU times are written when the log closes
     (dpmem_close() or exit), before its CLOSE event. Memory of cudaMallocAsync pools that is freed but kept by the pool, and memory of other
     processes on the same GPU, show as untracked in snapshots. A forked child neither times nor
     samples.

   LICENCE: MIT. */

#ifndef DPMEM_CUDA_H
#define DPMEM_CUDA_H

#include "dpmem.h"
#include <cuda_runtime_api.h>
#ifdef DPMEM_CUDA_CUBLAS
#include <cublas_v2.h>
#endif

#ifndef DPMEM_DISABLE

#ifdef __cplusplus
extern "C" {
#endif

DPMEM_DEF int         dpmem_cuda_init(void);
DPMEM_DEF void        dpmem_cuda_shutdown(void);

DPMEM_DEF cudaError_t dpmem_cuda_malloc(void **ptr, size_t bytes, const char *tag);
DPMEM_DEF cudaError_t dpmem_cuda_free(void *ptr);
DPMEM_DEF cudaError_t dpmem_cuda_malloc_async(void **ptr, size_t bytes, const char *tag, cudaStream_t stream);
DPMEM_DEF cudaError_t dpmem_cuda_free_async(void *ptr, cudaStream_t stream);
DPMEM_DEF cudaError_t dpmem_cuda_malloc_host(void **ptr, size_t bytes, const char *tag);
DPMEM_DEF cudaError_t dpmem_cuda_free_host(void *ptr);
DPMEM_DEF cudaError_t dpmem_cuda_malloc_managed(void **ptr, size_t bytes, const char *tag);

DPMEM_DEF void        dpmem_cuda_tag(const void *ptr, size_t bytes, const char *tag, int space);
DPMEM_DEF size_t      dpmem_cuda_untag(const void *ptr);

DPMEM_DEF int         dpmem_cuda_timing(int on);
DPMEM_DEF void        dpmem_cuda_set_stream(cudaStream_t stream);
DPMEM_DEF void        dpmem_cuda_flush(void);
/* The program's own use of the GPU times (a trainer's phase table): fn gets every timed scope's GPU
   time when it is read back, the same figures the log's GPU_TIME events carry, whether or not a log
   is open. name_id and parent_id are dpmem_intern ids (parent_id: the innermost timed scope open
   when it began; 0 when none was: at the top, or all begun before timing went on). It runs on the thread that reads the time back (a later scope end, a
   snapshot, dpmem_cuda_flush, exit) with that thread's timing lock held: keep it short, and call no
   dpmem_cuda_* or dpmem function that takes a lock from it (dpmem_string does not). fn NULL: none.
   Set or unset it while no other thread's times are being read back (after a flush). */
typedef void (*dpmem_cuda_gpu_time_fn)(void *user, uint32_t name_id, uint32_t parent_id, uint64_t begin_ts_ns,
                                       uint64_t gpu_ns);
DPMEM_DEF void        dpmem_cuda_on_gpu_time(dpmem_cuda_gpu_time_fn fn, void *user);
DPMEM_DEF void        dpmem_cuda_nvtx(int regions, int counters);
DPMEM_DEF int         dpmem_cuda_nvtx_pool(const void *base, size_t bytes);
DPMEM_DEF int         dpmem_cuda_nvtx_pool_release(const void *base);
DPMEM_DEF int         dpmem_cuda_sampler(int period_ms);
DPMEM_DEF int         dpmem_cuda_device_memory(size_t *used, size_t *total);

#ifdef DPMEM_CUDA_CUBLAS
DPMEM_DEF cublasStatus_t dpmem_cublas_set_workspace(cublasHandle_t handle, void **workspace, size_t bytes);
#endif

#ifdef __cplusplus
}
#endif

#define DPMEM_CUDA_MALLOC(p, bytes, tag)              dpmem_cuda_malloc((void **)&(p), (bytes), (tag))
#define DPMEM_CUDA_FREE(p)                            dpmem_cuda_free((void *)(p))
#define DPMEM_CUDA_MALLOC_ASYNC(p, bytes, tag, s)     dpmem_cuda_malloc_async((void **)&(p), (bytes), (tag), (s))
#define DPMEM_CUDA_FREE_ASYNC(p, s)                   dpmem_cuda_free_async((void *)(p), (s))
#define DPMEM_CUDA_MALLOC_HOST(p, bytes, tag)         dpmem_cuda_malloc_host((void **)&(p), (bytes), (tag))
#define DPMEM_CUDA_FREE_HOST(p)                       dpmem_cuda_free_host((void *)(p))
#define DPMEM_CUDA_MALLOC_MANAGED(p, bytes, tag)      dpmem_cuda_malloc_managed((void **)&(p), (bytes), (tag))

#else /* DPMEM_DISABLE: the bare CUDA calls, nothing else. */

/* Each argument that the bare call does not take is named but never evaluated, and a constant may
   stand alone as a statement (dpmem.h's DPMEM__USES, DPMEM__THEN, DPMEM__ZERO, DPMEM__CONST). */
#define dpmem_cuda_init()                             DPMEM__CONST(int, 0)
#define dpmem_cuda_shutdown()                         ((void)0)
#define dpmem_cuda_malloc(pp, n, tag)                 DPMEM__THEN(cudaMalloc((pp), (n)), DPMEM__U(tag))
#define dpmem_cuda_free(p)                            cudaFree(p)
#define dpmem_cuda_malloc_async(pp, n, tag, s)        DPMEM__THEN(cudaMallocAsync((pp), (n), (s)), DPMEM__U(tag))
#define dpmem_cuda_free_async(p, s)                   cudaFreeAsync((p), (s))
#define dpmem_cuda_malloc_host(pp, n, tag)            DPMEM__THEN(cudaMallocHost((pp), (n)), DPMEM__U(tag))
#define dpmem_cuda_free_host(p)                       cudaFreeHost(p)
#define dpmem_cuda_malloc_managed(pp, n, tag)         DPMEM__THEN(cudaMallocManaged((pp), (n), cudaMemAttachGlobal), DPMEM__U(tag))
#define dpmem_cuda_tag(p, n, tag, space)              DPMEM__USES(DPMEM__U4(p, n, tag, space))
#define dpmem_cuda_untag(p)                           DPMEM__ZERO(size_t, 0, DPMEM__U(p))
#define dpmem_cuda_timing(on)                         DPMEM__ZERO(int, 0, DPMEM__U(on))
#define dpmem_cuda_set_stream(s)                      DPMEM__USES(DPMEM__U(s))
#define dpmem_cuda_flush()                            ((void)0)
#define dpmem_cuda_on_gpu_time(fn, user)              DPMEM__USES(DPMEM__U2(fn, user))
#define dpmem_cuda_nvtx(r, c)                         DPMEM__USES(DPMEM__U2(r, c))
#define dpmem_cuda_nvtx_pool(b, n)                    DPMEM__ZERO(int, 0, DPMEM__U2(b, n))
#define dpmem_cuda_nvtx_pool_release(b)               DPMEM__ZERO(int, 0, DPMEM__U(b))
#define dpmem_cuda_sampler(ms)                        DPMEM__ZERO(int, 0, DPMEM__U(ms))
#define dpmem_cuda_device_memory(u, t)                DPMEM__ZERO(int, -1, DPMEM__U2(u, t))
#ifdef DPMEM_CUDA_CUBLAS
#define dpmem_cublas_set_workspace(h, ws, n)                                                       \
    (cudaMalloc((ws), (n)) == cudaSuccess ? cublasSetWorkspace((h), *(ws), (n)) : CUBLAS_STATUS_ALLOC_FAILED)
#endif
#define DPMEM_CUDA_MALLOC(p, bytes, tag)              DPMEM__THEN(cudaMalloc((void **)&(p), (bytes)), DPMEM__U(tag))
#define DPMEM_CUDA_FREE(p)                            cudaFree((void *)(p))
#define DPMEM_CUDA_MALLOC_ASYNC(p, bytes, tag, s)     DPMEM__THEN(cudaMallocAsync((void **)&(p), (bytes), (s)), DPMEM__U(tag))
#define DPMEM_CUDA_FREE_ASYNC(p, s)                   cudaFreeAsync((void *)(p), (s))
#define DPMEM_CUDA_MALLOC_HOST(p, bytes, tag)         DPMEM__THEN(cudaMallocHost((void **)&(p), (bytes)), DPMEM__U(tag))
#define DPMEM_CUDA_FREE_HOST(p)                       cudaFreeHost((void *)(p))
#define DPMEM_CUDA_MALLOC_MANAGED(p, bytes, tag)      DPMEM__THEN(cudaMallocManaged((void **)&(p), (bytes), cudaMemAttachGlobal), DPMEM__U(tag))

#endif /* DPMEM_DISABLE */
#endif /* DPMEM_CUDA_H */

/* ============================================================================================== */
/*                                       IMPLEMENTATION                                           */
/* ============================================================================================== */
#if (defined(DPMEM_IMPLEMENTATION) || defined(DPMEM_CUDA_IMPLEMENTATION)) && !defined(DPMEM_DISABLE) && !defined(DPMEM_CUDA__IMPLEMENTED)
#define DPMEM_CUDA__IMPLEMENTED
#include <time.h>
#if !defined(CLOCK_MONOTONIC) && !defined(DPMEM__NO_POSIX)
#error "dpmem_cuda.h: the implementation needs POSIX declarations (clock_gettime) that a header included before it hid under -std=c11/-std=c99: include dpmem_cuda.h first in this file, or compile this file with -D_GNU_SOURCE"
#define DPMEM__NO_POSIX
#endif
#endif
#if defined(DPMEM_CUDA__IMPLEMENTED) && !defined(DPMEM__NO_POSIX) && !defined(DPMEM_CUDA__BODY)
#define DPMEM_CUDA__BODY

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#ifndef DPMEM_NO_NVTX
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>
#include <nvtx3/nvToolsExtCounters.h>
#endif

#ifdef __cplusplus
#define DPMEM__CUDA_TLS thread_local
#else
#define DPMEM__CUDA_TLS _Thread_local
#endif

#define DPMEM__CUDA_MAX_OPEN     64    /* timed scopes open at once per thread (deeper: not timed) */
#define DPMEM__CUDA_RING         1024  /* ended scopes whose GPU time is not read yet, per thread  */
#define DPMEM__CUDA_MAX_COUNTERS 64    /* NVTX counters: one per category, plus the device total   */
#define DPMEM__CUDA_MAX_POOLS    64    /* sub-allocator pools declared with dpmem_cuda_nvtx_pool   */

/* One timed scope: its begin event while open, both events once it ended. */
typedef struct { cudaEvent_t begin, end; uint32_t name, parent; uint64_t ts; } dpmem__cuda_span;

/* Per-thread timing state. Only the owner thread records; a flush from another thread (snapshot,
   exit) also reads the ring, hence the lock (uncontended in the hot path). */
typedef struct dpmem__cuda_thread {
    pthread_mutex_t lock;
    uint32_t thread;                                   /* dpmem_thread_index() of the owner */
    unsigned gen;                                      /* timing generation the stack belongs to */
    cudaStream_t stream;
    int depth;                                         /* scopes open since timing went on */
    dpmem__cuda_span open[DPMEM__CUDA_MAX_OPEN];
    dpmem__cuda_span ring[DPMEM__CUDA_RING];
    unsigned head, count;
    /* Recycled events (creating one costs µs): room for every event the thread can hold at once,
       so none is ever destroyed and re-created. */
    cudaEvent_t spare[2 * DPMEM__CUDA_RING + DPMEM__CUDA_MAX_OPEN];
    int nspare;
    struct dpmem__cuda_thread *next;
} dpmem__cuda_thread;

static struct {
    pthread_once_t once;
    int device;                                        /* device current at init (sampler uses it) */
    int regions, counters;                             /* NVTX regions / counters emitted */
    unsigned gen;                                      /* bumped each time timing goes on */
    int timing;
    int have_device;
    dpmem_cuda_gpu_time_fn on_time;                    /* the program's callback (dpmem_cuda_on_gpu_time) */
    void *on_time_user;
    /* Separate locks, none taken while holding another, except the per-thread locks inside
       threads_lock; counter_lock is held across dpmem_live_bytes (dpmem's own lock, a leaf). */
    pthread_mutex_t threads_lock, counter_lock, sampler_lock;
    dpmem__cuda_thread *threads;
    dpmem__cuda_thread *parent_threads;                /* in a forked child: the parent's, untouched */
#ifndef DPMEM_NO_NVTX
    nvtxDomainHandle_t domain;
    /* Blocks registered as NVTX regions of a pool's heap (open addressing; 1 marks a deleted slot), so
       that only those are unregistered. Empty unless a pool was declared and a tool listens: then the
       free path tests one count. */
    pthread_mutex_t region_lock;
    uintptr_t *region;
    size_t region_cap, region_n, region_used;
    int npools;                                        /* pools declared (read unlocked, written locked) */
    struct { uintptr_t base; size_t bytes; nvtxMemHeapHandle_t heap; } pool[DPMEM__CUDA_MAX_POOLS];
    int ncounters;
    struct { char category[96]; int64_t last; uint64_t id; } counter[DPMEM__CUDA_MAX_COUNTERS];
#endif
    pthread_t sampler;
    int sampler_on, sampler_stop, period_ms;
    pthread_cond_t sampler_wake;
} dpmem__cuda = { PTHREAD_ONCE_INIT, 0, 0, 0, 0, 0, 0, NULL, NULL, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                  PTHREAD_MUTEX_INITIALIZER, NULL, NULL,
#ifndef DPMEM_NO_NVTX
                  NULL, PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0, {{0, 0, NULL}}, 0, {{{0}, 0, 0}},
#endif
                  0, 0, 0, 0, PTHREAD_COND_INITIALIZER };

static DPMEM__CUDA_TLS dpmem__cuda_thread *dpmem__cuda_me;
static DPMEM__CUDA_TLS cudaStream_t dpmem__cuda_stream;

static int dpmem__cuda_env_int(const char *name, int fallback) {
    const char *s = getenv(name);
    return (s && *s) ? atoi(s) : fallback;
}

/* ---- device figures ---------------------------------------------------------------------------- */

DPMEM_DEF int dpmem_cuda_device_memory(size_t *used, size_t *total) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();                      /* our failed query must not become the user's error */
        *used = *total = 0;
        return -1;
    }
    *used = total_b - free_b;
    *total = total_b;
    return 0;
}

static void dpmem__cuda_poll_all(int wait);

/* dpmem_snapshot() asks for device figures through this; it is also a good moment to write the
   GPU times that have completed meanwhile (without waiting for those that have not). */
static int dpmem__cuda_device_info(void *user, size_t *used, size_t *total) {
    (void)user;
    dpmem__cuda_poll_all(0);
    return dpmem_cuda_device_memory(used, total);
}

/* ---- NVTX memory regions and counters ---------------------------------------------------------- */

#ifndef DPMEM_NO_NVTX
static size_t dpmem__cuda_region_slot(uintptr_t key, const uintptr_t *table, size_t cap) {
    size_t i = (size_t)((key >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (table[i] && table[i] != key) i = (i + 1) & (cap - 1);
    return i;
}

/* Remembers a registered address (under region_lock). Returns 0 when out of memory. */
static int dpmem__cuda_region_add(uintptr_t key) {
    size_t i;
    if (2 * (dpmem__cuda.region_used + 1) > dpmem__cuda.region_cap) {   /* rehash, dropping deleted slots */
        size_t cap = dpmem__cuda.region_cap ? dpmem__cuda.region_cap : 256;
        uintptr_t *t;
        while (4 * (dpmem__cuda.region_n + 1) > cap) cap *= 2;
        t = (uintptr_t *)calloc(cap, sizeof *t);
        if (!t) return 0;
        for (i = 0; i < dpmem__cuda.region_cap; i++)
            if (dpmem__cuda.region[i] > 1) t[dpmem__cuda_region_slot(dpmem__cuda.region[i], t, cap)] = dpmem__cuda.region[i];
        free(dpmem__cuda.region);
        dpmem__cuda.region = t;
        dpmem__cuda.region_cap = cap;
        dpmem__cuda.region_used = dpmem__cuda.region_n;
    }
    i = dpmem__cuda_region_slot(key, dpmem__cuda.region, dpmem__cuda.region_cap);
    if (dpmem__cuda.region[i] == key) return 1;
    dpmem__cuda.region[i] = key;
    __atomic_store_n(&dpmem__cuda.region_n, dpmem__cuda.region_n + 1, __ATOMIC_RELAXED);   /* read unlocked */
    dpmem__cuda.region_used++;
    return 1;
}

/* Forgets a registered address; 1 if it was there (under region_lock). */
static int dpmem__cuda_region_remove(uintptr_t key) {
    size_t i;
    if (!dpmem__cuda.region_cap) return 0;
    i = dpmem__cuda_region_slot(key, dpmem__cuda.region, dpmem__cuda.region_cap);
    if (dpmem__cuda.region[i] != key) return 0;
    dpmem__cuda.region[i] = 1;
    __atomic_store_n(&dpmem__cuda.region_n, dpmem__cuda.region_n - 1, __ATOMIC_RELAXED);
    return 1;
}

/* What compute-sanitizer (--nvtx yes) accepts, by its NVTX guide and NVIDIA's samples: a whole
   allocation (cudaMalloc, cudaMallocAsync, cudaMallocManaged) is named through its pointer
   (nvtxMemRegionsName) with nothing registered; only a block inside a pool that was registered as a
   heap (nvtxMemHeapRegister, usage SUB_ALLOCATOR) is a region (nvtxMemRegionsRegister with that heap's
   handle). A region in NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE is refused ("One or more of the parameters is
   invalid"), and so is unregistering a region that never was. */
static nvtxMemHeapHandle_t dpmem__cuda_nvtx_heap(const void *base, size_t bytes) {
    nvtxMemVirtualRangeDesc_t range;
    nvtxMemHeapDesc_t desc;
    range.size = bytes;
    range.ptr = base;
    memset(&desc, 0, sizeof desc);
    desc.extCompatID = NVTX_EXT_COMPATID_MEM;
    desc.structSize = (uint16_t)sizeof desc;
    desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    desc.typeSpecificDescSize = sizeof range;
    desc.typeSpecificDesc = &range;
    return nvtxMemHeapRegister(dpmem__cuda.domain, &desc);
}

/* The pool holding [key, key + bytes) (under region_lock), or -1. */
static int dpmem__cuda_pool_of(uintptr_t key, size_t bytes) {
    int i;
    for (i = 0; i < dpmem__cuda.npools; i++)
        if (key >= dpmem__cuda.pool[i].base && bytes <= dpmem__cuda.pool[i].bytes &&
            key - dpmem__cuda.pool[i].base <= dpmem__cuda.pool[i].bytes - bytes) return i;
    return -1;
}

/* A block of a registered pool becomes a region of the pool's heap (the heap is registered with the
   tool at the first block, so a pool declared before any tool listened still works); returns 1 if it
   did. Under region_lock. */
static int dpmem__cuda_nvtx_block(const void *ptr, size_t bytes) {
    nvtxMemVirtualRangeDesc_t range;
    nvtxMemRegionsRegisterBatch_t batch;
    int i = dpmem__cuda_pool_of((uintptr_t)ptr, bytes);
    if (i < 0 || !bytes) return 0;
    if (!dpmem__cuda.pool[i].heap) {
        nvtxMemHeapHandle_t h = dpmem__cuda_nvtx_heap((const void *)dpmem__cuda.pool[i].base, dpmem__cuda.pool[i].bytes);
        /* NVTX_MEM_HEAP_HANDLE_NO_TOOL is spelled with a static_cast from intptr_t that C++ rejects */
        if (!h || h == (nvtxMemHeapHandle_t)(intptr_t)-1) return 0;   /* no heap: the block is only named */
        dpmem__cuda.pool[i].heap = h;
    }
    if (!dpmem__cuda_region_add((uintptr_t)ptr)) return 0;
    range.size = bytes;
    range.ptr = ptr;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = (uint16_t)sizeof batch;
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.heap = dpmem__cuda.pool[i].heap;
    batch.regionCount = 1;
    batch.regionDescElementSize = sizeof range;
    batch.regionDescElements = &range;
    batch.regionHandleElementsOut = NULL;              /* referred to by pointer afterwards */
    nvtxMemRegionsRegister(dpmem__cuda.domain, &batch);
    return 1;
}

static void dpmem__cuda_nvtx_register(const void *ptr, size_t bytes, const char *tag) {
    nvtxMemRegionNameDesc_t name;
    nvtxMemRegionsNameBatch_t names;
    if (__atomic_load_n(&dpmem__cuda.npools, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&dpmem__cuda.region_lock);
        dpmem__cuda_nvtx_block(ptr, bytes);
        pthread_mutex_unlock(&dpmem__cuda.region_lock);
    }
    memset(&name, 0, sizeof name);
    name.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    name.nameType = NVTX_MESSAGE_TYPE_ASCII;
    name.region.pointer = ptr;
    name.name.ascii = tag;
    memset(&names, 0, sizeof names);
    names.extCompatID = NVTX_EXT_COMPATID_MEM;
    names.structSize = (uint16_t)sizeof names;
    names.regionCount = 1;
    names.regionElementSize = sizeof name;
    names.regionElements = &name;
    nvtxMemRegionsName(dpmem__cuda.domain, &names);
}

/* Unregisters ptr if it was registered as a block of a pool (whether or not regions are still on);
   a whole allocation was only named, and its name goes with it when CUDA frees it. */
static void dpmem__cuda_nvtx_unregister(const void *ptr) {
    nvtxMemRegionRef_t ref;
    nvtxMemRegionsUnregisterBatch_t batch;
    int known;
    if (!__atomic_load_n(&dpmem__cuda.region_n, __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&dpmem__cuda.region_lock);
    known = dpmem__cuda_region_remove((uintptr_t)ptr);
    pthread_mutex_unlock(&dpmem__cuda.region_lock);
    if (!known) return;
    ref.pointer = ptr;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = (uint16_t)sizeof batch;
    batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    batch.refCount = 1;
    batch.refElementSize = sizeof ref;
    batch.refElements = &ref;
    nvtxMemRegionsUnregister(dpmem__cuda.domain, &batch);
}

/* Index of a category's counter ("" = the device total), registering it the first time
   (under dpmem__cuda.counter_lock). */
static int dpmem__cuda_counter(const char *category) {
    int i;
    nvtxCounterAttr_t attr;
    uint64_t id;
    char title[128];
    for (i = 0; i < dpmem__cuda.ncounters; i++)
        if (strcmp(dpmem__cuda.counter[i].category, category) == 0) return i;
    if (i == DPMEM__CUDA_MAX_COUNTERS) return -1;
    snprintf(dpmem__cuda.counter[i].category, sizeof dpmem__cuda.counter[i].category, "%s", category);
    snprintf(title, sizeof title, "dpmem %s bytes", *category ? category : "device");
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
    attr.name = title;
    attr.description = "live tagged bytes (dpmem)";
    attr.scopeId = NVTX_SCOPE_NONE;
    attr.counterId = NVTX_COUNTER_ID_STATIC_START + (uint64_t)i;
    id = nvtxCounterRegister(dpmem__cuda.domain, &attr);
    dpmem__cuda.counter[i].id = id ? id : attr.counterId;
    dpmem__cuda.counter[i].last = -1;
    dpmem__cuda.ncounters = i + 1;
    return i;
}

static void dpmem__cuda_counter_sample(int i, size_t value) {
    if (i < 0 || dpmem__cuda.counter[i].last == (int64_t)value) return;
    dpmem__cuda.counter[i].last = (int64_t)value;
    nvtxCounterSampleInt64(dpmem__cuda.domain, dpmem__cuda.counter[i].id, (int64_t)value);
}

/* After an allocation or a free: one sample per counter whose value changed. A free does not
   know its category here, so every category is looked at (there are few). */
static void dpmem__cuda_counters_update(void) {
    int i, n;
    pthread_mutex_lock(&dpmem__cuda.counter_lock);
    dpmem__cuda_counter_sample(dpmem__cuda_counter(""), dpmem_live_bytes_in(DPMEM_DEVICE));
    n = dpmem_category_count();
    for (i = 0; i < n; i++) {
        const char *category = dpmem_category_name(i);
        if (!category || !*category) continue;
        dpmem__cuda_counter_sample(dpmem__cuda_counter(category), dpmem_live_bytes(category));
    }
    pthread_mutex_unlock(&dpmem__cuda.counter_lock);
}
#endif /* DPMEM_NO_NVTX */

DPMEM_DEF void dpmem_cuda_nvtx(int regions, int counters) {
    dpmem_cuda_init();
#ifndef DPMEM_NO_NVTX
    __atomic_store_n(&dpmem__cuda.regions, regions != 0, __ATOMIC_RELAXED);
    __atomic_store_n(&dpmem__cuda.counters, counters != 0, __ATOMIC_RELAXED);
#else
    (void)regions; (void)counters;
#endif
}

#ifndef DPMEM_NO_NVTX
/* Forgets every block address inside [base, base + bytes) (under region_lock). */
static void dpmem__cuda_region_drop_range(uintptr_t base, size_t bytes) {
    size_t i;
    for (i = 0; i < dpmem__cuda.region_cap; i++) {
        uintptr_t k = dpmem__cuda.region[i];
        if (k > 1 && k >= base && k - base < bytes) {
            dpmem__cuda.region[i] = 1;
            __atomic_store_n(&dpmem__cuda.region_n, dpmem__cuda.region_n - 1, __ATOMIC_RELAXED);
        }
    }
}
#endif

DPMEM_DEF int dpmem_cuda_nvtx_pool(const void *base, size_t bytes) {
#ifndef DPMEM_NO_NVTX
    uintptr_t b = (uintptr_t)base;
    int i, rc = 0;
    dpmem_cuda_init();
    if (!base || !bytes || b + bytes < b) { dpmem_warn("dpmem_cuda_nvtx_pool: empty or wrapping pool refused", bytes); return -1; }
    pthread_mutex_lock(&dpmem__cuda.region_lock);
    for (i = 0; i < dpmem__cuda.npools; i++)
        if (b < dpmem__cuda.pool[i].base + dpmem__cuda.pool[i].bytes && dpmem__cuda.pool[i].base < b + bytes) rc = -1;
    if (rc) dpmem_warn("dpmem_cuda_nvtx_pool: pool overlaps one already declared", bytes);
    else if (dpmem__cuda.npools == DPMEM__CUDA_MAX_POOLS) { dpmem_warn("dpmem_cuda_nvtx_pool: too many pools", bytes); rc = -1; }
    else {
        dpmem__cuda.pool[dpmem__cuda.npools].base = b;
        dpmem__cuda.pool[dpmem__cuda.npools].bytes = bytes;
        dpmem__cuda.pool[dpmem__cuda.npools].heap = NULL;   /* registered with the tool at its first block */
        __atomic_store_n(&dpmem__cuda.npools, dpmem__cuda.npools + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&dpmem__cuda.region_lock);
    return rc;
#else
    (void)base; (void)bytes;
    return 0;
#endif
}

DPMEM_DEF int dpmem_cuda_nvtx_pool_release(const void *base) {
#ifndef DPMEM_NO_NVTX
    int i, found = -1;
    nvtxMemHeapHandle_t heap = NULL;
    dpmem_cuda_init();
    pthread_mutex_lock(&dpmem__cuda.region_lock);
    for (i = 0; i < dpmem__cuda.npools; i++)
        if (dpmem__cuda.pool[i].base == (uintptr_t)base) found = i;
    if (found >= 0) {
        heap = dpmem__cuda.pool[found].heap;
        /* its blocks go with the heap: none is unregistered on its own afterwards */
        dpmem__cuda_region_drop_range(dpmem__cuda.pool[found].base, dpmem__cuda.pool[found].bytes);
        dpmem__cuda.pool[found] = dpmem__cuda.pool[dpmem__cuda.npools - 1];
        __atomic_store_n(&dpmem__cuda.npools, dpmem__cuda.npools - 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&dpmem__cuda.region_lock);
    if (found < 0) { dpmem_warn("dpmem_cuda_nvtx_pool_release: not a declared pool", (uint64_t)(uintptr_t)base); return -1; }
    if (heap) nvtxMemHeapUnregister(dpmem__cuda.domain, heap);
    return 0;
#else
    (void)base;
    return 0;
#endif
}

/* ---- tagged accounting ------------------------------------------------------------------------- */

DPMEM_DEF void dpmem_cuda_tag(const void *ptr, size_t bytes, const char *tag, int space) {
    dpmem_cuda_init();
    dpmem_tag_alloc_space(ptr, bytes, tag, space);
#ifndef DPMEM_NO_NVTX
    if (__atomic_load_n(&dpmem__cuda.regions, __ATOMIC_RELAXED) && (space == DPMEM_DEVICE || space == DPMEM_MANAGED))
        dpmem__cuda_nvtx_register(ptr, bytes, tag);
    if (__atomic_load_n(&dpmem__cuda.counters, __ATOMIC_RELAXED)) dpmem__cuda_counters_update();
#endif
}

DPMEM_DEF size_t dpmem_cuda_untag(const void *ptr) {
    size_t bytes;
    dpmem_cuda_init();
    bytes = dpmem_tag_free(ptr);
#ifndef DPMEM_NO_NVTX
    if (bytes) {                                       /* an unknown pointer changed nothing */
        dpmem__cuda_nvtx_unregister(ptr);
        if (__atomic_load_n(&dpmem__cuda.counters, __ATOMIC_RELAXED)) dpmem__cuda_counters_update();
    }
#endif
    return bytes;
}

/* A tagged allocation failed for lack of memory: the post-mortem goes out before the call returns.
   The figures are read after the failure, so they show what was left at that moment. */
static void dpmem__cuda_oom(size_t bytes, const char *tag, int space) {
    size_t used = 0, total = 0;
    if (space == DPMEM_DEVICE || space == DPMEM_MANAGED) dpmem_cuda_device_memory(&used, &total);
    dpmem_oom(bytes, tag, space, used, total);
}

static cudaError_t dpmem__cuda_after_alloc(cudaError_t err, void **ptr, size_t bytes, const char *tag, int space) {
    if (err == cudaSuccess && *ptr) dpmem_cuda_tag(*ptr, bytes, tag, space);
    else if (err == cudaErrorMemoryAllocation) dpmem__cuda_oom(bytes, tag, space);
    return err;
}

DPMEM_DEF cudaError_t dpmem_cuda_malloc(void **ptr, size_t bytes, const char *tag) {
    dpmem_cuda_init();
    return dpmem__cuda_after_alloc(cudaMalloc(ptr, bytes), ptr, bytes, tag, DPMEM_DEVICE);
}

DPMEM_DEF cudaError_t dpmem_cuda_malloc_async(void **ptr, size_t bytes, const char *tag, cudaStream_t stream) {
    dpmem_cuda_init();
    return dpmem__cuda_after_alloc(cudaMallocAsync(ptr, bytes, stream), ptr, bytes, tag, DPMEM_DEVICE);
}

DPMEM_DEF cudaError_t dpmem_cuda_malloc_host(void **ptr, size_t bytes, const char *tag) {
    dpmem_cuda_init();
    return dpmem__cuda_after_alloc(cudaMallocHost(ptr, bytes), ptr, bytes, tag, DPMEM_PINNED);
}

DPMEM_DEF cudaError_t dpmem_cuda_malloc_managed(void **ptr, size_t bytes, const char *tag) {
    dpmem_cuda_init();
    return dpmem__cuda_after_alloc(cudaMallocManaged(ptr, bytes, cudaMemAttachGlobal), ptr, bytes, tag, DPMEM_MANAGED);
}

/* Frees untag first: once cudaFree returns, another thread may get the same address and tag it. */
DPMEM_DEF cudaError_t dpmem_cuda_free(void *ptr) {
    if (ptr) dpmem_cuda_untag(ptr);
    return cudaFree(ptr);
}

DPMEM_DEF cudaError_t dpmem_cuda_free_async(void *ptr, cudaStream_t stream) {
    if (ptr) dpmem_cuda_untag(ptr);
    return cudaFreeAsync(ptr, stream);
}

DPMEM_DEF cudaError_t dpmem_cuda_free_host(void *ptr) {
    if (ptr) dpmem_cuda_untag(ptr);
    return cudaFreeHost(ptr);
}

#ifdef DPMEM_CUDA_CUBLAS
DPMEM_DEF cublasStatus_t dpmem_cublas_set_workspace(cublasHandle_t handle, void **workspace, size_t bytes) {
    cublasStatus_t st;
    *workspace = NULL;
    if (dpmem_cuda_malloc(workspace, bytes, "cublas/workspace") != cudaSuccess) return CUBLAS_STATUS_ALLOC_FAILED;
    st = cublasSetWorkspace(handle, *workspace, bytes);
    if (st != CUBLAS_STATUS_SUCCESS) { dpmem_cuda_free(*workspace); *workspace = NULL; }
    return st;
}
#endif

/* ---- GPU time of scopes ------------------------------------------------------------------------ */

static cudaEvent_t dpmem__cuda_event_get(dpmem__cuda_thread *t) {
    cudaEvent_t ev = NULL;
    if (t->nspare > 0) return t->spare[--t->nspare];
    if (cudaEventCreate(&ev) != cudaSuccess) { (void)cudaGetLastError(); return NULL; }
    return ev;
}

static void dpmem__cuda_event_put(dpmem__cuda_thread *t, cudaEvent_t ev) {
    if (!ev) return;
    if (t->nspare < (int)(sizeof t->spare / sizeof t->spare[0])) t->spare[t->nspare++] = ev;
    else cudaEventDestroy(ev);
}

/* Writes the oldest ended scope's GPU time if its end event has completed (or, with wait, once it
   has). Returns 1 if it consumed the entry, 0 if it is still running. Caller holds t->lock. */
static int dpmem__cuda_resolve_oldest(dpmem__cuda_thread *t, int wait) {
    dpmem__cuda_span *s = &t->ring[t->head];
    cudaError_t err;
    float ms = 0;
    /* A query's cudaErrorNotReady is left as the thread's last error (PyTorch's and Paddle's event
       polls clear it for that reason), where the program's next cudaGetLastError, a launch check,
       would report "device not ready". So: no poll while the program has an error of its own pending
       (ours would replace it), and our NotReady cleared at once (a no-op where it was not recorded). */
    if (!wait && cudaPeekAtLastError() != cudaSuccess) return 0;
    err = wait ? cudaEventSynchronize(s->end) : cudaEventQuery(s->end);
    if (err == cudaErrorNotReady) { (void)cudaGetLastError(); return 0; }
    if (err == cudaSuccess && cudaEventElapsedTime(&ms, s->begin, s->end) == cudaSuccess) {
        const uint64_t ns = (uint64_t)((double)ms * 1e6 + 0.5);
        dpmem_cuda_gpu_time_fn fn = __atomic_load_n(&dpmem__cuda.on_time, __ATOMIC_ACQUIRE);
        dpmem_log_gpu_time(t->thread, s->name, s->ts, ns);
        if (fn) fn(__atomic_load_n(&dpmem__cuda.on_time_user, __ATOMIC_RELAXED), s->name, s->parent, s->ts, ns);
    } else
        (void)cudaGetLastError();                      /* a broken context: drop the time, keep going */
    dpmem__cuda_event_put(t, s->begin);
    dpmem__cuda_event_put(t, s->end);
    t->head = (t->head + 1) % DPMEM__CUDA_RING;
    t->count--;
    return 1;
}

static void dpmem__cuda_poll(dpmem__cuda_thread *t, int wait) {
    while (t->count > 0 && dpmem__cuda_resolve_oldest(t, wait)) {}
}

static void dpmem__cuda_poll_all(int wait) {
    dpmem__cuda_thread *t;
    pthread_mutex_lock(&dpmem__cuda.threads_lock);
    for (t = dpmem__cuda.threads; t; t = t->next) {
        pthread_mutex_lock(&t->lock);
        dpmem__cuda_poll(t, wait);
        pthread_mutex_unlock(&t->lock);
    }
    pthread_mutex_unlock(&dpmem__cuda.threads_lock);
}

static dpmem__cuda_thread *dpmem__cuda_thread_state(void) {
    dpmem__cuda_thread *t = dpmem__cuda_me;
    if (t) return t;
    t = (dpmem__cuda_thread *)calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->thread = dpmem_thread_index();
    pthread_mutex_lock(&dpmem__cuda.threads_lock);
    t->next = dpmem__cuda.threads;                     /* kept until exit: flushes walk this list */
    dpmem__cuda.threads = t;
    pthread_mutex_unlock(&dpmem__cuda.threads_lock);
    dpmem__cuda_me = t;
    return t;
}

/* dpmem.h calls this at every scope begin and end while timing is on. Recording an event is
   asynchronous; the only wait is when DPMEM__CUDA_RING scopes are still pending on the GPU. */
static void dpmem__cuda_scope_hook(void *user, int begin, uint32_t name_id, uint64_t ts_ns) {
    dpmem__cuda_thread *t = dpmem__cuda_thread_state();
    unsigned gen = __atomic_load_n(&dpmem__cuda.gen, __ATOMIC_RELAXED);
    (void)user;
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    if (t->gen != gen) {                               /* timing was turned off and on: forget the stack */
        int i;
        for (i = 0; i < t->depth && i < DPMEM__CUDA_MAX_OPEN; i++) dpmem__cuda_event_put(t, t->open[i].begin);
        t->gen = gen;
        t->depth = 0;
    }
    t->stream = dpmem__cuda_stream;
    if (begin) {
        if (t->depth < DPMEM__CUDA_MAX_OPEN) {
            dpmem__cuda_span *s = &t->open[t->depth];
            s->begin = dpmem__cuda_event_get(t);
            s->name = name_id;
            s->parent = t->depth > 0 ? t->open[t->depth - 1].name : 0;
            s->ts = ts_ns;
            if (s->begin && cudaEventRecord(s->begin, t->stream) != cudaSuccess) {
                (void)cudaGetLastError();
                dpmem__cuda_event_put(t, s->begin);
                s->begin = NULL;
            }
        }
        t->depth++;
    } else if (t->depth > 0) {                         /* depth 0: the scope began before timing went on */
        t->depth--;
        if (t->depth < DPMEM__CUDA_MAX_OPEN && t->open[t->depth].begin) {
            dpmem__cuda_span *s = &t->open[t->depth];
            cudaEvent_t end = dpmem__cuda_event_get(t);
            if (end && cudaEventRecord(end, t->stream) == cudaSuccess) {
                if (t->count == DPMEM__CUDA_RING) dpmem__cuda_resolve_oldest(t, 1);
                t->ring[(t->head + t->count) % DPMEM__CUDA_RING] = *s;
                t->ring[(t->head + t->count) % DPMEM__CUDA_RING].end = end;
                t->count++;
            } else {
                (void)cudaGetLastError();
                dpmem__cuda_event_put(t, end);
                dpmem__cuda_event_put(t, s->begin);
            }
            s->begin = NULL;
        }
        dpmem__cuda_poll(t, 0);
    }
    pthread_mutex_unlock(&t->lock);
}

DPMEM_DEF int dpmem_cuda_timing(int on) {
    cudaEvent_t probe;
    dpmem_cuda_init();
    if (!on) {
        if (__atomic_exchange_n(&dpmem__cuda.timing, 0, __ATOMIC_ACQ_REL)) dpmem_set_scope_hook(NULL, NULL);
        return 0;
    }
    if (__atomic_load_n(&dpmem__cuda.timing, __ATOMIC_ACQUIRE)) return 0;
    if (cudaEventCreate(&probe) != cudaSuccess) {
        cudaError_t err = cudaGetLastError();
        /* With no NVIDIA driver the runtime says "driver version is insufficient": say what it means. */
        int no_gpu = err == cudaErrorNoDevice || (err == cudaErrorInsufficientDriver && access("/proc/driver/nvidia/version", F_OK) != 0);
        fprintf(stderr, "dpmem: GPU timing of scopes is off: %s (%s)\n", no_gpu ? "no NVIDIA GPU or driver found" : cudaGetErrorString(err),
                cudaGetErrorName(err));
        return -1;
    }
    cudaEventDestroy(probe);
    __atomic_add_fetch(&dpmem__cuda.gen, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&dpmem__cuda.timing, 1, __ATOMIC_RELEASE);
    dpmem_set_scope_hook(dpmem__cuda_scope_hook, NULL);
    return 0;
}

DPMEM_DEF void dpmem_cuda_set_stream(cudaStream_t stream) { dpmem__cuda_stream = stream; }

DPMEM_DEF void dpmem_cuda_flush(void) { dpmem__cuda_poll_all(1); }

DPMEM_DEF void dpmem_cuda_on_gpu_time(dpmem_cuda_gpu_time_fn fn, void *user) {
    dpmem_cuda_init();
    /* the user first: a reader that sees the new fn sees its user (release/acquire on fn) */
    __atomic_store_n(&dpmem__cuda.on_time_user, user, __ATOMIC_RELAXED);
    __atomic_store_n(&dpmem__cuda.on_time, fn, __ATOMIC_RELEASE);
}

/* ---- background sampler ------------------------------------------------------------------------ */

static void *dpmem__cuda_sampler_main(void *arg) {
    struct timespec next;
    (void)arg;
    if (cudaSetDevice(dpmem__cuda.device) != cudaSuccess) (void)cudaGetLastError();
    dpmem_thread_name("dpmem-sampler");
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&dpmem__cuda.sampler_lock);
    while (!dpmem__cuda.sampler_stop) {
        size_t used, total;
        long ns;
        pthread_mutex_unlock(&dpmem__cuda.sampler_lock);
        if (dpmem_cuda_device_memory(&used, &total) == 0) dpmem_log_device_sample(used, total);
        pthread_mutex_lock(&dpmem__cuda.sampler_lock);
        ns = next.tv_nsec + (long)(dpmem__cuda.period_ms % 1000) * 1000000L;
        next.tv_sec += dpmem__cuda.period_ms / 1000 + ns / 1000000000L;
        next.tv_nsec = ns % 1000000000L;
        while (!dpmem__cuda.sampler_stop &&
               pthread_cond_timedwait(&dpmem__cuda.sampler_wake, &dpmem__cuda.sampler_lock, &next) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&dpmem__cuda.sampler_lock);
    return NULL;
}

DPMEM_DEF int dpmem_cuda_sampler(int period_ms) {
    int rc = 0;
    dpmem_cuda_init();
    pthread_mutex_lock(&dpmem__cuda.sampler_lock);
    if (dpmem__cuda.sampler_on) {                      /* stop the running one (also to change its period) */
        dpmem__cuda.sampler_stop = 1;
        pthread_cond_broadcast(&dpmem__cuda.sampler_wake);
        pthread_mutex_unlock(&dpmem__cuda.sampler_lock);
        pthread_join(dpmem__cuda.sampler, NULL);
        pthread_mutex_lock(&dpmem__cuda.sampler_lock);
        dpmem__cuda.sampler_on = 0;
    }
    if (period_ms > 0) {
        dpmem__cuda.period_ms = period_ms;
        dpmem__cuda.sampler_stop = 0;
        if (pthread_create(&dpmem__cuda.sampler, NULL, dpmem__cuda_sampler_main, NULL) == 0) dpmem__cuda.sampler_on = 1;
        else { fprintf(stderr, "dpmem: cannot start the device sampler thread\n"); rc = -1; }
    }
    pthread_mutex_unlock(&dpmem__cuda.sampler_lock);
    return rc;
}

/* ---- set-up and tear-down ---------------------------------------------------------------------- */

DPMEM_DEF void dpmem_cuda_shutdown(void) {
    dpmem_cuda_sampler(0);
    dpmem_cuda_flush();
}

static void dpmem__cuda_atexit(void) { dpmem_cuda_shutdown(); }

/* A forked child has one thread and no usable CUDA context: no sampler to stop, no timing, nothing
   pending, and locks that another thread may have held at the fork start afresh. */
static void dpmem__cuda_atfork_child(void) {
    pthread_mutex_init(&dpmem__cuda.threads_lock, NULL);
    pthread_mutex_init(&dpmem__cuda.counter_lock, NULL);
    pthread_mutex_init(&dpmem__cuda.sampler_lock, NULL);
#ifndef DPMEM_NO_NVTX
    pthread_mutex_init(&dpmem__cuda.region_lock, NULL);
#endif
    dpmem__cuda.sampler_on = 0;
    dpmem__cuda.parent_threads = dpmem__cuda.threads;  /* not ours to flush (their locks may be held) */
    dpmem__cuda.threads = NULL;
    dpmem__cuda_me = NULL;
    if (dpmem__cuda.timing) {
        dpmem__cuda.timing = 0;
        dpmem_set_scope_hook(NULL, NULL);
    }
}

static void dpmem__cuda_on_close(void *user) { (void)user; dpmem_cuda_flush(); }

static void dpmem__cuda_init_once(void) {
    pthread_condattr_t attr;
    int count = 0;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&dpmem__cuda.sampler_wake, &attr);
    pthread_condattr_destroy(&attr);
    if (cudaGetDeviceCount(&count) != cudaSuccess) { (void)cudaGetLastError(); count = 0; }
    dpmem__cuda.have_device = count > 0;
    if (cudaGetDevice(&dpmem__cuda.device) != cudaSuccess) { (void)cudaGetLastError(); dpmem__cuda.device = 0; }
    dpmem_set_device_info(dpmem__cuda_device_info, NULL);
    dpmem_set_close_hook(dpmem__cuda_on_close, NULL);   /* pending GPU times go in before CLOSE */
#ifndef DPMEM_NO_NVTX
    {
        /* A tool listens if one was named for loading (Nsight Systems, compute-sanitizer) or if the
           core NVTX hands out domains (only an attached tool does; dpmem.h has initialized NVTX). */
        int tool, regions, counters;
        dpmem__cuda.domain = nvtxDomainCreateA("dpmem");
        tool = getenv("NVTX_INJECTION64_PATH") != NULL || dpmem__cuda.domain != NULL;
        regions = tool && dpmem__cuda_env_int("DPMEM_NVTX_MEM", 1) != 0;
        counters = tool && dpmem__cuda_env_int("DPMEM_NVTX_COUNTERS", 1) != 0;
        dpmem__cuda.regions = regions;
        dpmem__cuda.counters = counters;
    }
#endif
    pthread_atfork(NULL, NULL, dpmem__cuda_atfork_child);
    atexit(dpmem__cuda_atexit);
}

/* Every dpmem_cuda_* call comes through here: after the first, one load and a branch. */
DPMEM_DEF int dpmem_cuda_init(void) {
    static int ready, started;
    if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return dpmem__cuda.have_device ? 0 : -1;
    pthread_once(&dpmem__cuda.once, dpmem__cuda_init_once);
    /* Timing and the sampler start outside pthread_once: they call back into dpmem_cuda_init. */
    if (!__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL)) {
        int ms = dpmem__cuda_env_int("DPMEM_SAMPLE_MS", 0);
        if (dpmem__cuda_env_int("DPMEM_CUDA_TIMING", 0)) dpmem_cuda_timing(1);
        if (ms > 0) dpmem_cuda_sampler(ms);
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return dpmem__cuda.have_device ? 0 : -1;
}

#endif /* DPMEM_IMPLEMENTATION */
