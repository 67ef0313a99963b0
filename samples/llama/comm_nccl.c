/* comm_nccl.c — the device all-reduce of samples/llama/comm.h on NCCL (in the CUDA toolkit), linked into
   the trainers that link the CUDA backend where nccl.h exists (mk/comm.mk). One GPU per rank
   (samples/llama/train_cuda.c picks the node-local rank's device); the communicator is made at the first
   sum: rank 0's ncclUniqueId reaches the others over MPI (comm_broadcast), then ncclCommInitRank.
   ncclAllReduce (and --zero's ncclReduceScatter, ncclAllGather) runs in place on the legacy default stream, where the CUDA backend's kernels run, so
   it follows the backward that produced the gradients; the wait polls the stream and NCCL's async
   error within DPMEM_COMM_TIMEOUT, and aborts the communicator when a peer is gone. --zero 3's gathers
   (comm_device_allgatherv_start) run on a side stream instead, in flight while the default stream computes
   (below). Compiled and
   linked here; it has not run on a GPU yet (no GPU in the sessions so far). */
#include "comm.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static ncclComm_t g_nccl;
static int g_nccl_ready;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define NCCL_TRY(call, what) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
    fprintf(stderr, "error: rank %d: %s: %s failed at %s:%d: %s\n", c->rank, what, #call, __FILE__, __LINE__, \
            ncclGetErrorString(r_)); return -1; } } while (0)
#define CUDA_TRY(call, what) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "error: rank %d: %s: %s failed at %s:%d: %s\n", c->rank, what, #call, __FILE__, __LINE__, \
            cudaGetErrorString(e_)); return -1; } } while (0)

static int nccl_setup(Comm *c, const char *what) {
    ncclUniqueId id;
    if (c->rank == 0) NCCL_TRY(ncclGetUniqueId(&id), what);
    if (comm_broadcast(c, &id, sizeof id, 0, "the NCCL id broadcast")) return -1;
    NCCL_TRY(ncclCommInitRank(&g_nccl, c->world, id, c->rank), what);
    g_nccl_ready = 1;
    c->backend = "nccl";
    return 0;
}

/* Waits within the timeout for the collective just queued on the legacy default stream (ev NULL), or for
   event ev. */
static int nccl_wait_for(Comm *c, cudaEvent_t ev, const char *what) {
    cudaStream_t stream = 0;
    const double t0 = now_s();
    for (;;) {
        cudaError_t q = ev ? cudaEventQuery(ev) : cudaStreamQuery(stream);
        if (q == cudaSuccess) return 0;
        if (q != cudaErrorNotReady) CUDA_TRY(q, what);
        ncclResult_t async = ncclSuccess;
        NCCL_TRY(ncclCommGetAsyncError(g_nccl, &async), what);
        if (async != ncclSuccess) {
            fprintf(stderr, "error: rank %d: %s failed in NCCL: %s (another rank died?)\n", c->rank, what, ncclGetErrorString(async));
            ncclCommAbort(g_nccl);
            g_nccl_ready = 0;
            return -1;
        }
        if (now_s() - t0 > c->timeout_s) {
            fprintf(stderr, "error: rank %d: %s did not complete in %.0f s (DPMEM_COMM_TIMEOUT): another rank died "
                    "or is stuck; ending the job\n", c->rank, what, c->timeout_s);
            ncclCommAbort(g_nccl);
            g_nccl_ready = 0;
            return -1;
        }
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

static int nccl_wait(Comm *c, const char *what) { return nccl_wait_for(c, NULL, what); }

static int nccl_allreduce(Comm *c, float *dev, size_t n, const char *what) {
    if (c->world <= 1) return 0;
    if (!g_nccl_ready && nccl_setup(c, what)) return -1;
    cudaStream_t stream = 0;   /* the legacy default stream: after the backward's kernels */
    NCCL_TRY(ncclAllReduce(dev, dev, n, ncclFloat, ncclSum, g_nccl, stream), what);
    return nccl_wait(c, what);
}

/* The sharded state's collectives (samples/llama/shard.c), in place in NCCL's layout (rank r's part at
   dev + r·count, as comm.h's host versions); with one rank too: a 1-rank job goes through NCCL. */
static int nccl_reduce_scatter(Comm *c, float *dev, size_t count, const char *what) {
    if (!g_nccl_ready && nccl_setup(c, what)) return -1;
    NCCL_TRY(ncclReduceScatter(dev, dev + (size_t)c->rank * count, count, ncclFloat, ncclSum, g_nccl, 0), what);
    return nccl_wait(c, what);
}

static int nccl_allgather(Comm *c, float *dev, size_t count, const char *what) {
    if (!g_nccl_ready && nccl_setup(c, what)) return -1;
    NCCL_TRY(ncclAllGather(dev + (size_t)c->rank * count, dev, count, ncclFloat, g_nccl, 0), what);
    return nccl_wait(c, what);
}

static int nccl_allgather_bf16(Comm *c, void *dev, size_t count, const char *what) {
    if (!g_nccl_ready && nccl_setup(c, what)) return -1;
    char *d = dev;   /* 2 bytes an element */
    NCCL_TRY(ncclAllGather(d + (size_t)c->rank * count * 2, d, count, ncclBfloat16, g_nccl, 0), what);
    return nccl_wait(c, what);
}

/* --zero 3's gathers, straight into the destination (comm.h: comm_device_allgatherv_start): a side stream (not
   blocking with the legacy default stream) waits for what the default stream has queued so far (this rank's
   slice put in place; the destination's allocation from the stream-ordered pool), runs one in-place broadcast of
   each rank's slice, rooted at that rank, in one group (an all-gather of unequal slices), and records its end
   in the request's event; the kernels queued after it on the default stream run meanwhile. The wait polls the
   event within the timeout and orders the default stream after it (the GEMMs that read the weights, the pool's
   reuse of the buffer after they free it). NCCL runs a communicator's operations in the order they were issued
   on every rank, whichever the stream, so the reductions on the default stream keep their order with these. */
static cudaStream_t g_side;
static cudaEvent_t g_ready, g_done[COMM_MAX_REQUESTS + 1];   /* [id]; id 0: none */
static int g_done_used[COMM_MAX_REQUESTS + 1];

static int side_setup(Comm *c, const char *what) {
    if (g_side) return 0;
    CUDA_TRY(cudaEventCreateWithFlags(&g_ready, cudaEventDisableTiming), what);
    for (int k = 1; k <= COMM_MAX_REQUESTS; k++) CUDA_TRY(cudaEventCreateWithFlags(&g_done[k], cudaEventDisableTiming), what);
    CUDA_TRY(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking), what);
    return 0;
}

static int nccl_allgatherv_start(Comm *c, void *dev, const size_t *lo, const size_t *len, size_t elem, const char *what,
                                 CommRequest *r) {
    memset(r, 0, sizeof *r);
    r->what = what;
    r->t0 = now_s();
    if (!g_nccl_ready && nccl_setup(c, what)) return -1;
    if (side_setup(c, what)) return -1;
    int id = 1;
    while (id <= COMM_MAX_REQUESTS && g_done_used[id]) id++;
    if (id > COMM_MAX_REQUESTS) {
        fprintf(stderr, "error: rank %d: %s: too many collectives in flight\n", c->rank, what);
        return -1;
    }
    CUDA_TRY(cudaEventRecord(g_ready, 0), what);
    CUDA_TRY(cudaStreamWaitEvent(g_side, g_ready, 0), what);
    char *d = dev;
    NCCL_TRY(ncclGroupStart(), what);
    for (int k = 0; k < c->world; k++)
        if (len[k]) NCCL_TRY(ncclBroadcast(d + lo[k] * elem, d + lo[k] * elem, len[k] * elem, ncclInt8, k, g_nccl, g_side), what);
    NCCL_TRY(ncclGroupEnd(), what);
    CUDA_TRY(cudaEventRecord(g_done[id], g_side), what);
    g_done_used[id] = 1;
    r->id = id;
    return 0;
}

static int nccl_request_wait(Comm *c, CommRequest *r) {
    if (!r->id) return 0;
    const int id = r->id;
    r->id = 0;
    g_done_used[id] = 0;
    if (nccl_wait_for(c, g_done[id], r->what)) return -1;
    CUDA_TRY(cudaStreamWaitEvent(0, g_done[id], 0), r->what);
    return 0;
}

__attribute__((destructor)) static void comm_nccl_done(void) {
    if (g_side) {
        cudaStreamDestroy(g_side);
        for (int k = 1; k <= COMM_MAX_REQUESTS; k++) cudaEventDestroy(g_done[k]);
        cudaEventDestroy(g_ready);
        g_side = NULL;
    }
    if (g_nccl_ready) ncclCommDestroy(g_nccl);
    g_nccl_ready = 0;
}

__attribute__((constructor)) static void comm_nccl_register(void) {
    comm_device_allreduce = nccl_allreduce;
    comm_device_reduce_scatter = nccl_reduce_scatter;
    comm_device_allgather = nccl_allgather;
    comm_device_allgather_bf16 = nccl_allgather_bf16;
    comm_device_allgatherv_start = nccl_allgatherv_start;
    comm_device_request_wait = nccl_request_wait;
}
