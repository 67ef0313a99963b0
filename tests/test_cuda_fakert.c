/* test_cuda_fakert.c — a fake CUDA runtime with one simulated device, linked in place of libcudart by
   test_cuda_fake, so that dpmem_cuda.h's logic (accounting against cudaMemGetInfo, the OOM path, the
   GPU-time ring, the sampler) is exercised on machines without a GPU, with exact expected figures.

   The simulated device: FAKE_TOTAL bytes, FAKE_CONTEXT of them used from the start (the "context");
   device and managed allocations are rounded up to 2 MiB (this fake's rule, not a claim about real
   allocators); pinned host allocations do not count against the device. Addresses are made up (no
   memory behind them): never dereference them. One timeline for all streams, in wall-clock time:
   fake_cuda_launch(ns) queues ns of work after what is queued; an event recorded now completes when
   the queue drains to it. Only the functions dpmem_cuda.h calls exist. Thread-safe (one lock).
   The last error is per host thread, as the runtime's, and cudaEventQuery's cudaErrorNotReady is
   recorded there too (the runtime's behaviour that PyTorch's and Paddle's event polls clear after
   each query), so a caller's next cudaGetLastError sees it unless the poller cleans up.
   It does NOT simulate errors beyond out-of-memory and the one injected by fake_cuda_fail_next. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tests/test_cuda_fakert.h"

struct CUevent_st { uint64_t t; int recorded; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t used = FAKE_CONTEXT;
static uint64_t busy_until;                     /* when the queued work ends (monotonic ns) */
static uintptr_t next_addr = (uintptr_t)0x7f0000000000ull;
static _Thread_local cudaError_t last_error = cudaSuccess;
static cudaError_t fail_next = cudaSuccess;
static FakeCudaStats stats;
static struct { uintptr_t addr; size_t bytes; int counts; } live[4096];
static int nlive;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static cudaError_t fail(cudaError_t e) { last_error = e; return e; }

void fake_cuda_launch(uint64_t ns) {
    uint64_t t = now_ns();
    pthread_mutex_lock(&lock);
    busy_until = (busy_until > t ? busy_until : t) + ns;
    pthread_mutex_unlock(&lock);
}

void fake_cuda_fail_next(cudaError_t e) { pthread_mutex_lock(&lock); fail_next = e; pthread_mutex_unlock(&lock); }

FakeCudaStats fake_cuda_stats(void) {
    FakeCudaStats s;
    pthread_mutex_lock(&lock);
    s = stats;
    pthread_mutex_unlock(&lock);
    return s;
}

static cudaError_t alloc(void **ptr, size_t bytes, int counts) {
    size_t rounded = (bytes + FAKE_GRANULE - 1) / FAKE_GRANULE * FAKE_GRANULE;
    cudaError_t e = cudaSuccess;
    pthread_mutex_lock(&lock);
    stats.allocs++;
    if (fail_next != cudaSuccess) { e = fail(fail_next); fail_next = cudaSuccess; }
    else if (bytes == 0) *ptr = NULL;
    else if (nlive == (int)(sizeof live / sizeof live[0])) e = fail(cudaErrorMemoryAllocation);
    else if (counts && rounded > FAKE_TOTAL - used) e = fail(cudaErrorMemoryAllocation);
    else {
        live[nlive].addr = next_addr;
        live[nlive].bytes = rounded;
        live[nlive].counts = counts;
        nlive++;
        *ptr = (void *)next_addr;
        next_addr += rounded ? rounded : FAKE_GRANULE;
        if (counts) used += rounded;
    }
    pthread_mutex_unlock(&lock);
    return e;
}

static cudaError_t release(void *ptr) {
    int i;
    if (!ptr) return cudaSuccess;
    pthread_mutex_lock(&lock);
    for (i = 0; i < nlive && live[i].addr != (uintptr_t)ptr; i++) {}
    if (i == nlive) { pthread_mutex_unlock(&lock); return fail(cudaErrorInvalidValue); }
    if (live[i].counts) used -= live[i].bytes;
    live[i] = live[--nlive];
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) { return alloc(ptr, bytes, 1); }
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t s) { (void)s; return alloc(ptr, bytes, 1); }
cudaError_t cudaMallocManaged(void **ptr, size_t bytes, unsigned int flags) { (void)flags; return alloc(ptr, bytes, 1); }
cudaError_t cudaMallocHost(void **ptr, size_t bytes) { return alloc(ptr, bytes, 0); }
cudaError_t cudaFree(void *ptr) { return release(ptr); }
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t s) { (void)s; return release(ptr); }
cudaError_t cudaFreeHost(void *ptr) { return release(ptr); }

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    pthread_mutex_lock(&lock);
    stats.meminfo++;
    *free_b = FAKE_TOTAL - used;
    *total_b = FAKE_TOTAL;
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNotReady: return "device not ready";
    default: return "fake error";
    }
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaErrorFake";
    }
}

cudaError_t cudaEventCreate(cudaEvent_t *ev) {
    *ev = (cudaEvent_t)calloc(1, sizeof **ev);
    if (!*ev) return fail(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&lock);
    stats.events_created++;
    stats.events_alive++;
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
    free(ev);
    pthread_mutex_lock(&lock);
    stats.events_alive--;
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
    uint64_t t = now_ns();
    (void)s;
    pthread_mutex_lock(&lock);
    stats.records++;
    ev->t = busy_until > t ? busy_until : t;
    ev->recorded = 1;
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev) {
    pthread_mutex_lock(&lock);
    stats.queries++;
    pthread_mutex_unlock(&lock);
    return !ev->recorded || now_ns() >= ev->t ? cudaSuccess : fail(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
    uint64_t t;
    pthread_mutex_lock(&lock);
    stats.syncs++;
    pthread_mutex_unlock(&lock);
    while (ev->recorded && (t = now_ns()) < ev->t) {
        struct timespec d = { 0, (long)(ev->t - t) };
        nanosleep(&d, NULL);
    }
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a->recorded || !b->recorded) return fail(cudaErrorInvalidResourceHandle);
    *ms = (float)((double)((int64_t)(b->t - a->t)) / 1e6);
    return cudaSuccess;
}
