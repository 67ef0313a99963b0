/* comm_nccl.c — the device all-reduce of samples/llama/comm.h on NCCL (in the CUDA toolkit), linked into
   the trainers that link the CUDA backend where nccl.h exists (mk/comm.mk). One GPU per rank
   (samples/llama/train_cuda.c picks the node-local rank's device); the communicator is made at the first
   sum: rank 0's ncclUniqueId reaches the others over MPI (comm_broadcast), then ncclCommInitRank.
   ncclAllReduce (and --zero's ncclReduceScatter, ncclAllGather) runs in place on the legacy default stream, where the CUDA backend's kernels run, so
   it follows the backward that produced the gradients; the wait polls the stream and NCCL's async
   error within DPMEM_COMM_TIMEOUT, and aborts the communicator when a peer is gone. Compiled and
   linked here; it has not run on a GPU yet (no GPU in the sessions so far). */
#include "comm.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
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

/* Waits for the collective just queued on the legacy default stream, within the timeout. */
static int nccl_wait(Comm *c, const char *what) {
    cudaStream_t stream = 0;
    const double t0 = now_s();
    for (;;) {
        cudaError_t q = cudaStreamQuery(stream);
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

__attribute__((destructor)) static void comm_nccl_done(void) {
    if (g_nccl_ready) ncclCommDestroy(g_nccl);
    g_nccl_ready = 0;
}

__attribute__((constructor)) static void comm_nccl_register(void) {
    comm_device_allreduce = nccl_allreduce;
    comm_device_reduce_scatter = nccl_reduce_scatter;
    comm_device_allgather = nccl_allgather;
    comm_device_allgather_bf16 = nccl_allgather_bf16;
}
