/* comm_nccl.c — the device collectives of samples/llama/comm.h on NCCL (in the CUDA toolkit), linked into
   the trainers that link the CUDA backend where nccl.h exists (mk/trainer.mk). One GPU per rank
   (samples/llama/train_cuda.c picks the node-local rank's device); the communicator is made at the first
   collective: rank 0's ncclUniqueId reaches the others over MPI (comm_broadcast), then ncclCommInitRank
   (a job of one rank makes one too: its collectives run through NCCL; META comm.backend says "nccl" then).
   THE STREAMS. The CUDA backend's kernels run on the legacy default stream (the compute stream). Every
   collective runs on NCCL's own communication stream (non-blocking: no implicit synchronisation with the
   legacy stream, which would serialise them; the highest priority, as DDP's), after an event recorded on
   the compute stream once the buffer is ready (a bucket packed by kernels there), so the compute stream
   goes on with the backward while it runs (samples/llama/grad_reduce.c's overlap). Its completion is
   another event: a test queries it and NCCL's async error; a wait polls both within DPMEM_COMM_TIMEOUT
   and aborts the communicator when a peer is gone or stuck; once complete the compute stream waits on
   the event, so that the kernels after it (the bucket's unpacking, its reuse) read the result.
   A blocking collective (dist.h's dist_collective with no request) is a start and a wait. Every collective goes through
   the same request machinery (request_begin, request_end; nccl_test, nccl_wait): comm_device_start's kinds
   (all-reduce, reduce-scatter, fp32 and bf16 all-gathers) and --zero 3's gathers of unequal slices
   (comm_device_allgatherv_start, prefetched while the previous unit computes). One communication stream for
   them all: NCCL runs a communicator's operations in the order they are issued, the same on every rank. Compiled and linked here; not yet run on a GPU (no GPU in the
   sessions so far: kernels/cuda/gpu_session.sh's zero stage runs a job of one rank when one is lent). */
#include "comm.h"
#include "dpmem.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static ncclComm_t g_nccl;
static int g_nccl_ready;
static cudaStream_t g_stream;   /* the communication stream */

/* A device request: its two events (created once), and whether its id is taken. */
typedef struct { cudaEvent_t ready, done; int made, used; } DevRequest;
static DevRequest g_req[COMM_MAX_REQUESTS + 1];   /* [id]; id 0: none */

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
    if (!g_stream) {
        int least = 0, greatest = 0;
        CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest), what);
        CUDA_TRY(cudaStreamCreateWithPriority(&g_stream, cudaStreamNonBlocking, greatest), what);
    }
    NCCL_TRY(ncclCommInitRank(&g_nccl, c->world, id, c->rank), what);
    g_nccl_ready = 1;
    c->backend = "nccl";
    dpmem_meta("comm.backend", "nccl");   /* what ran (a job of one rank: "none" until its first collective) */
    return 0;
}

/* The communicator is unusable (a peer gone, a timeout): aborted, its operations cancelled. */
static void nccl_abandon(void) {
    if (g_nccl_ready) ncclCommAbort(g_nccl);
    g_nccl_ready = 0;
}

/* NCCL's asynchronous error (a peer gone): -1 after a line, the communicator aborted. */
static int async_error(Comm *c, const char *what) {
    ncclResult_t async = ncclSuccess;
    NCCL_TRY(ncclCommGetAsyncError(g_nccl, &async), what);
    if (async == ncclSuccess) return 0;
    fprintf(stderr, "error: rank %d: %s failed in NCCL: %s (another rank died?)\n", c->rank, what, ncclGetErrorString(async));
    nccl_abandon();
    return -1;
}

/* ---- requests: the small internal API every collective goes through ---------------------------------- */

/* A free request id, its events made, the communication stream ordered after the compute stream's work so
   far. 0 after a one-line error. */
static int request_begin(Comm *c, const char *what) {
    int id = 1;
    while (id <= COMM_MAX_REQUESTS && g_req[id].used) id++;
    if (id > COMM_MAX_REQUESTS) {
        fprintf(stderr, "error: rank %d: %s: too many collectives in flight\n", c->rank, what);
        return 0;
    }
    DevRequest *q = &g_req[id];
    if (!q->made) {
        cudaError_t e = cudaEventCreateWithFlags(&q->ready, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            fprintf(stderr, "error: rank %d: %s: cudaEventCreateWithFlags failed at %s:%d: %s\n", c->rank, what, __FILE__, __LINE__,
                    cudaGetErrorString(e));
            return 0;
        }
        q->made = 1;
    }
    cudaError_t e = cudaEventRecord(q->ready, 0);   /* the legacy default stream: the buffer's producers */
    if (e == cudaSuccess) e = cudaStreamWaitEvent(g_stream, q->ready, 0);
    if (e != cudaSuccess) {
        fprintf(stderr, "error: rank %d: %s: ordering the communication stream failed at %s:%d: %s\n", c->rank, what, __FILE__,
                __LINE__, cudaGetErrorString(e));
        return 0;
    }
    return id;
}

/* The collective just enqueued on the communication stream is request id's: its completion event, r. */
static int request_end(Comm *c, int id, const char *what, CommRequest *r) {
    CUDA_TRY(cudaEventRecord(g_req[id].done, g_stream), what);
    g_req[id].used = 1;
    r->id = id;
    r->device = 1;
    return 0;
}

/* The request is complete: the compute stream waits on its event (its later kernels read the result) and
   its id is free again. */
static int request_finish(Comm *c, CommRequest *r) {
    CUDA_TRY(cudaStreamWaitEvent(0, g_req[r->id].done, 0), r->what);
    g_req[r->id].used = 0;
    r->id = 0;
    return 0;
}

static int nccl_test(Comm *c, CommRequest *r, int *done) {
    *done = 1;
    if (!r->id) return 0;
    *done = 0;
    if (r->failed || !g_nccl_ready) { r->failed = 1; return -1; }   /* (said when it failed or the communicator went) */
    cudaError_t q = cudaEventQuery(g_req[r->id].done);
    if (q == cudaSuccess) { *done = 1; return request_finish(c, r); }
    if (q != cudaErrorNotReady) { r->failed = 1; CUDA_TRY(q, r->what); }
    if (async_error(c, r->what)) { r->failed = 1; return -1; }
    return 0;
}

/* Within the timeout; a failed or timed-out request stays pending (its buffer is NCCL's until the process
   ends: the caller must not free it), the communicator aborted. */
static int nccl_wait(Comm *c, CommRequest *r) {
    const double t0 = now_s();
    for (long k = 0;; k++) {
        int done = 0;
        if (nccl_test(c, r, &done)) return -1;
        if (done) return 0;
        if (now_s() - t0 > c->timeout_s) {
            fprintf(stderr, "error: rank %d: %s did not complete in %.0f s (DPMEM_COMM_TIMEOUT): another rank died "
                    "or is stuck; ending the job\n", c->rank, r->what, c->timeout_s);
            r->failed = 1;
            nccl_abandon();
            return -1;
        }
        if (k > 100) {   /* spin a little (latency), then leave the core */
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
        }
    }
}

/* In place in NCCL's layout (rank r's part at element r·count, as comm.h's host versions). */
static int nccl_start(Comm *c, CommOp op, void *dev, size_t count, const char *what, CommRequest *r) {
    memset(r, 0, sizeof *r);
    r->what = what; r->count = count; r->buf = dev; r->scatter = op == COMM_REDUCE_SCATTER; r->t0 = now_s();
    if (op == COMM_ALLREDUCE && c->world <= 1) return 0;   /* (the sharded ones run with one rank too) */
    if (!g_nccl_ready && nccl_setup(c, what)) return -1;
    const int id = request_begin(c, what);
    if (!id) return -1;
    const size_t esize = op == COMM_ALLGATHER_BF16 ? 2 : 4;
    char *d = dev, *mine = d + (size_t)c->rank * count * esize;
    switch (op) {
    case COMM_ALLREDUCE:      NCCL_TRY(ncclAllReduce(d, d, count, ncclFloat, ncclSum, g_nccl, g_stream), what); break;
    case COMM_REDUCE_SCATTER: NCCL_TRY(ncclReduceScatter(d, mine, count, ncclFloat, ncclSum, g_nccl, g_stream), what); break;
    case COMM_ALLGATHER:      NCCL_TRY(ncclAllGather(mine, d, count, ncclFloat, g_nccl, g_stream), what); break;
    case COMM_ALLGATHER_BF16: NCCL_TRY(ncclAllGather(mine, d, count, ncclBfloat16, g_nccl, g_stream), what); break;
    }
    return request_end(c, id, what, r);
}

/* --zero 3's gathers straight into the destination (comm.h: comm_device_allgatherv_start): one in-place broadcast
   of each rank's slice, rooted at that rank, in one group (an all-gather of unequal slices), a request like the
   others (on the communication stream after the compute stream's work so far: this rank's slice put in place,
   the destination's allocation from the stream-ordered pool). */
static int nccl_allgatherv_start(Comm *c, void *dev, const size_t *lo, const size_t *len, size_t elem, const char *what,
                                 CommRequest *r) {
    memset(r, 0, sizeof *r);
    r->what = what; r->buf = dev; r->t0 = now_s();
    if (!g_nccl_ready && nccl_setup(c, what)) return -1;
    const int id = request_begin(c, what);
    if (!id) return -1;
    char *d = dev;
    NCCL_TRY(ncclGroupStart(), what);
    for (int k = 0; k < c->world; k++)
        if (len[k]) NCCL_TRY(ncclBroadcast(d + lo[k] * elem, d + lo[k] * elem, len[k] * elem, ncclInt8, k, g_nccl, g_stream), what);
    NCCL_TRY(ncclGroupEnd(), what);
    return request_end(c, id, what, r);
}

__attribute__((destructor)) static void comm_nccl_done(void) {
    if (g_nccl_ready) ncclCommDestroy(g_nccl);
    g_nccl_ready = 0;
    for (int k = 1; k <= COMM_MAX_REQUESTS; k++)
        if (g_req[k].made) { cudaEventDestroy(g_req[k].ready); cudaEventDestroy(g_req[k].done); g_req[k].made = 0; }
    if (g_stream) cudaStreamDestroy(g_stream);
    g_stream = NULL;
}

__attribute__((constructor)) static void comm_nccl_register(void) {
    comm_device_start = nccl_start;
    comm_device_test = nccl_test;
    comm_device_wait = nccl_wait;
    comm_device_allgatherv_start = nccl_allgatherv_start;
}
