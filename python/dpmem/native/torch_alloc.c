/* torch_alloc.c — a torch.cuda.memory.CUDAPluggableAllocator on dpmem_cuda.h: every device allocation
   PyTorch makes is a tagged dpmem_cuda_malloc, so nothing on the GPU is invisible to the kit.

   The tag is the innermost tag pushed on this thread (dpmem_torch_push_tag: dpmem.torch's
   allocation_tag()), else "untagged/<scope path>" (e.g. "untagged/step/backward"); dpmem.torch
   re-tags a tensor's storage with its real name (params/..., activations/...) when it learns it
   (dpmem_torch_retag). A failed cudaMalloc writes dpmem's OOM post-mortem before PyTorch raises.

   The kit's state lives in libdpmem.so (dpmem_py.c), which this library links to: the Python
   package and this allocator count into the same totals and write the same log. cudart comes from
   the toolkit at link time; in a PyTorch process the loader reuses the libcudart.so.N that torch
   already loaded when the major versions match. */
#define DPMEM_CUDA_IMPLEMENTATION
#include "dpmem_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* What torch.cuda.memory_stats() reads from its own allocator, kept here because PyTorch cannot read
   it from a CUDAPluggableAllocator (max_memory_allocated() raises "CUDAPluggableAllocator does not
   yet support getDeviceStats"): bytes and allocations handed to PyTorch, now, at their peak and in
   all, and the failed allocations. dpmem_torch_stats copies them out in this order. */
enum { ST_BYTES, ST_BYTES_PEAK, ST_BYTES_ALLOCATED, ST_BYTES_FREED, ST_COUNT, ST_COUNT_PEAK, ST_COUNT_ALLOCATED,
       ST_COUNT_FREED, ST_OOMS, ST_N };
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long stats[ST_N];

#define TAG_DEPTH 16
#define TAG_BYTES 256
static _Thread_local char tag_stack[TAG_DEPTH][TAG_BYTES];
static _Thread_local int tag_depth;

void dpmem_torch_push_tag(const char *tag) {
    if (tag_depth < TAG_DEPTH) snprintf(tag_stack[tag_depth], TAG_BYTES, "%s", tag ? tag : "untagged");
    tag_depth++;
}
void dpmem_torch_pop_tag(void) {
    if (tag_depth > 0) tag_depth--;
    else dpmem_warn("allocation tag popped without a push", 0);
}

/* "untagged/<scope path>" of this thread, cut to fit. */
static void scope_tag(char *out, size_t n) {
    uint32_t ids[32];
    int depth = dpmem_scope_stack(ids, 32);
    size_t len = (size_t)snprintf(out, n, "untagged");
    for (int i = 0; i < depth && len + 2 < n; i++) {
        const char *s = dpmem_string(ids[i]);
        len += (size_t)snprintf(out + len, n - len, "/%s", s ? s : "?");
    }
    if (!depth && len + 2 < n) snprintf(out + len, n - len, "/(no scope)");
}

void *dpmem_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
    (void)device; (void)stream;   /* PyTorch has made `device` current; cudaMalloc is not stream-ordered */
    if (size <= 0) return NULL;
    char tag[TAG_BYTES];
    if (tag_depth > 0) snprintf(tag, sizeof tag, "%s", tag_stack[(tag_depth < TAG_DEPTH ? tag_depth : TAG_DEPTH) - 1]);
    else scope_tag(tag, sizeof tag);
    void *p = NULL;
    cudaError_t e = dpmem_cuda_malloc(&p, (size_t)size, tag);
    pthread_mutex_lock(&stats_lock);
    if (e != cudaSuccess) stats[ST_OOMS] += e == cudaErrorMemoryAllocation;
    else {
        stats[ST_BYTES] += (unsigned long long)size;
        stats[ST_BYTES_ALLOCATED] += (unsigned long long)size;
        stats[ST_COUNT]++;
        stats[ST_COUNT_ALLOCATED]++;
        if (stats[ST_BYTES] > stats[ST_BYTES_PEAK]) stats[ST_BYTES_PEAK] = stats[ST_BYTES];
        if (stats[ST_COUNT] > stats[ST_COUNT_PEAK]) stats[ST_COUNT_PEAK] = stats[ST_COUNT];
    }
    pthread_mutex_unlock(&stats_lock);
    return e == cudaSuccess ? p : NULL;   /* NULL: PyTorch raises OutOfMemoryError */
}

void dpmem_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
    size_t bytes;
    (void)size; (void)device; (void)stream;
    if (!ptr) return;
    bytes = dpmem_tag_bytes(ptr);      /* what was handed out, as the kit recorded it (a retag keeps it) */
    dpmem_cuda_free(ptr);              /* cudaFree waits for the device: no kernel still reads it */
    if (!bytes) return;                /* not one of ours (the kit untagged nothing either) */
    pthread_mutex_lock(&stats_lock);
    stats[ST_BYTES] -= bytes;
    stats[ST_BYTES_FREED] += bytes;
    stats[ST_COUNT]--;
    stats[ST_COUNT_FREED]++;
    pthread_mutex_unlock(&stats_lock);
}

/* Copies the first n counters (the order of the enum above) into out; returns how many there are. */
int dpmem_torch_stats(unsigned long long *out, int n) {
    pthread_mutex_lock(&stats_lock);
    for (int i = 0; i < n && i < ST_N; i++) out[i] = stats[i];
    pthread_mutex_unlock(&stats_lock);
    return ST_N;
}

/* torch.cuda.reset_peak_memory_stats(): the peaks start again from what is live. */
void dpmem_torch_reset_peak(void) {
    pthread_mutex_lock(&stats_lock);
    stats[ST_BYTES_PEAK] = stats[ST_BYTES];
    stats[ST_COUNT_PEAK] = stats[ST_COUNT];
    pthread_mutex_unlock(&stats_lock);
}

/* Renames a live device allocation (its bytes and space stay): 0, or -1 when ptr is not one. */
int dpmem_torch_retag(const void *ptr, const char *tag) {
    size_t n = dpmem_tag_bytes(ptr);
    if (!n) return -1;
    dpmem_cuda_untag(ptr);
    dpmem_cuda_tag(ptr, n, tag, DPMEM_DEVICE);
    return 0;
}
