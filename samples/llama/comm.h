/* comm.h — data parallelism for the sample trainers: N ranks (processes), each training on its own
   shard of every batch, their gradients summed once per optimizer step. Built on the engines people
   use: MPI (OpenMPI) between processes, and NCCL between GPUs (one per rank; samples/llama/comm_nccl.c,
   bootstrapped over MPI), never a home-made transport.

   A program started by mpirun (or another MPI launcher: OMPI_COMM_WORLD_SIZE, PMI_SIZE or
   PMIX_RANK in its environment) initialises MPI in comm_init; any other process is one rank and
   makes no MPI call at all: the single-process path is unchanged. A build without MPI (no mpicc
   when it was built) refuses to run under a launcher, with one line.

   Every collective waits at most DPMEM_COMM_TIMEOUT seconds (default 600): a rank that died leaves
   the others waiting in an all-reduce, and instead of hanging they stop with a line naming the
   collective, then MPI_Abort ends the job (mpirun also ends it when a rank exits with an error).

   Not here: what is summed and when (samples/llama/train.c: the gradients before the strategy's
   before_update, so DP-SGD adds its noise once, to the sum), the data shards (samples/llama/data.h). */
#ifndef COMM_H
#define COMM_H

#include <stddef.h>

typedef struct {
    int rank, world;       /* 0 and 1 in a single process */
    int local_rank;        /* the rank on this node: the GPU a CUDA rank takes */
    int mpi;               /* MPI was initialised (launched by mpirun) */
    int planned;           /* --ranks N without a launcher: the plan backend plans rank 0 of N */
    double timeout_s;      /* DPMEM_COMM_TIMEOUT */
    const char *backend;   /* "none", "mpi", "nccl" (META comm.backend) */
} Comm;

/* The process's one Comm (rank and world after comm_init). */
extern Comm g_comm;

/* Joins the job if launched by MPI (ranks from MPI_COMM_WORLD), else one rank. 0, or -1 after a
   one-line error. Idempotent. */
int  comm_init(Comm *c);
/* --ranks N without a launcher: planning (the plan backend) rank 0 of N; no MPI. */
void comm_plan_ranks(Comm *c, int ranks);
void comm_finalize(Comm *c);
/* Ends every rank of the job (after the caller printed why). */
void comm_abort(Comm *c, int code);

/* In-place sums over the ranks of host buffers; no-ops with one rank. 0, or -1 after a one-line
   error on stderr (a timeout: another rank died or never came). `what` names the collective. */
int comm_allreduce_float(Comm *c, float *buf, size_t n, const char *what);
int comm_allreduce_double(Comm *c, double *buf, size_t n, const char *what);
/* Every rank must hold the same value; -1 with an error naming `what` otherwise. */
int comm_check_same(Comm *c, long long value, const char *what);
/* Every rank must hold the same n (name, value) pairs: a hash of them all is compared (one
   collective); when it differs, each pair's, and -1 with an error naming the first pair that differs
   and this rank's value ("the ranks disagree on --heads (this rank: 8)"). */
int comm_check_fields(Comm *c, const char *const *names, const char *const *values, int n);
/* The sharded state's collectives (samples/llama/shard.c), in place on a host buffer of world·count
   floats laid out rank by rank (rank r's part at buf + r·count): reduce-scatter leaves at rank r's
   part the sum over the ranks of every rank's part r; all-gather copies every rank's own part to
   every rank. With one rank nothing moves. 0, or -1 after a one-line error (timeouts as above). */
int comm_reduce_scatter_float(Comm *c, float *buf, size_t count, const char *what);
int comm_allgather_float(Comm *c, float *buf, size_t count, const char *what);
/* The same all-gather of 16-bit elements (bf16 bits, moved as they are): buf holds world·count of them,
   rank r's part at element r·count (samples/llama/shard.c: the bf16 copies of sharded masters). */
int comm_allgather_bf16(Comm *c, void *buf, size_t count, const char *what);
/* Non-blocking collectives (the gradient reduction inside the backward, samples/llama/grad_reduce.c):
   started now, completed later by comm_request_test (polls once: MPI progresses the collective in
   its calls) or comm_request_wait; the timeout (DPMEM_COMM_TIMEOUT) counts while waiting. The reduce-scatter's layout is comm_reduce_scatter_float's
   (this rank's sum at its own part once complete). A request is 0 when nothing is in flight (one
   rank, no MPI: complete at once). At most COMM_MAX_REQUESTS in flight. 0, or -1 after a one-line error.
   A request of a device collective (comm_device_start) completes through the same two calls. */
#define COMM_MAX_REQUESTS 16
typedef struct {
    int id;                /* 0: nothing in flight */
    int device;            /* a device collective's (comm_device_start) */
    int failed;            /* its test or wait failed (a peer gone, the timeout): still in flight, never waited again */
    int scatter; float *buf; size_t count; double t0; const char *what;
} CommRequest;
int comm_reduce_scatter_start(Comm *c, float *buf, size_t count, const char *what, CommRequest *r);
int comm_allreduce_start(Comm *c, float *buf, size_t n, const char *what, CommRequest *r);
int comm_request_test(Comm *c, CommRequest *r, int *done);
int comm_request_wait(Comm *c, CommRequest *r);
/* --zero 3's gathers straight into their destination (samples/llama/shard.c): buf holds a whole tensor of
   elem-byte elements (2: bf16 bits, 4: fp32) cut in world slices, rank r's len[r] elements at element lo[r],
   this rank's own slice already in place; every rank's slice to every rank (MPI_Iallgatherv in place,
   started now, completed by comm_request_wait; lo and len are copied). With one rank nothing moves. */
int comm_allgatherv_start(Comm *c, void *buf, const size_t *lo, const size_t *len, size_t elem, const char *what, CommRequest *r);
/* Whether r still has a collective in flight: its buffer must not be freed or reused until it completes (a
   failed one never does: the job ends with its buffer left alone). */
static inline int comm_request_pending(const CommRequest *r) { return r->id != 0; }
/* Root's bytes to every rank. */
int comm_broadcast(Comm *c, void *buf, size_t n, int root, const char *what);

/* The collectives by kind, for the device path below (and dist.h's dist_collective). */
typedef enum { COMM_ALLREDUCE, COMM_REDUCE_SCATTER, COMM_ALLGATHER, COMM_ALLGATHER_BF16 } CommOp;
/* A device collective started without blocking the host (NCCL, set by samples/llama/comm_nccl.c where it is
   linked; NULL otherwise): in place on dev in the layout of the host ones above (count: an all-reduce's n,
   else a rank's part; the sharded ones run with one rank too: a 1-rank NCCL job goes through them),
   enqueued on NCCL's own communication stream after what the compute stream (the legacy default stream, the
   CUDA backend's) has queued so far, so that the compute stream goes on meanwhile. Nothing on the compute
   stream may touch dev until comm_request_test finds it done or comm_request_wait returns: both make the
   compute stream wait for the collective's completion (an event), so its later kernels read the result.
   With one rank too. 0 (r holds the request), or -1 after a one-line error. */
extern int (*comm_device_start)(Comm *c, CommOp op, void *dev, size_t count, const char *what, CommRequest *r);
/* Set with comm_device_start: comm_request_test and _wait pass a device request to them. */
extern int (*comm_device_test)(Comm *c, CommRequest *r, int *done);
extern int (*comm_device_wait)(Comm *c, CommRequest *r);
/* comm_allgatherv_start on a device buffer (NCCL: a group of one in-place broadcast per rank's slice), started
   as comm_device_start's collectives are (on the communication stream, after the compute stream's work so
   far) and completed by comm_request_test / comm_request_wait. With one rank too. */
extern int (*comm_device_allgatherv_start)(Comm *c, void *dev, const size_t *lo, const size_t *len, size_t elem, const char *what,
                                           CommRequest *r);

/* "run.log" -> "run.rank3.log" ("run" -> "run.rank3"): each rank's own log. */
void comm_rank_path(char *out, size_t n, const char *path, int rank);

#endif
