/* dist.h — the collectives of the training loop's ranks over the transport (comm.h), and what the layers
   above them share: the settings from the environment, the one bucket, the bucket rounds, the bucketed
   list all-reduce, and the sink their time goes into.

   THE STACK (each file calls only down; tests/test_include_floors.sh checks it):
       comm.h comm.c comm_nccl.c   transport: MPI on host buffers, NCCL on device buffers (no model)
       dist.h dist.c               this file: Dist, the collective on a backend buffer, the bucket rounds
       shard.h shard.c             ownership under --zero: slices, their optimizer state, gathers, save, hash
       grad_reduce.h grad_reduce.c the gradient reduction unit by unit inside the backward, and the step's
       train.h train.c             the loop: holds a Dist, sets its micro-batch and its time sink
   A layer above gets the Dist (one struct crosses each boundary) and, where the model calls back (llama.h's
   LlamaUnitHooks), registers functions of its own with user = the Dist: the only upward calls.

   THE BUCKET (comm/allreduce_bucket, or under --zero comm/shard_bucket: at most DPMEM_COMM_BUCKET_MB, default
   16 MiB, on the backend's device, tagged so that its memory shows in every tool): tensors are packed into it,
   summed (or reduce-scattered, gathered) in place, and unpacked, in rounds: fewer and larger collectives, as
   PyTorch DDP's buckets do. A sharded round lays the bucket out rank by rank at a fixed stride (the round's
   count per rank): NCCL's collectives take equal counts per rank, so a round's count is rank 0's (its slice
   is the longest: dist_slice0) and the shorter ranks' parts are padding that is summed or copied but never
   read. Plan backend: the same allocations, no collective. With one rank nothing is summed.

   TIME. Every collective's time, waits included, is added to *comm_s (the loop's phase "allreduce"); the
   loop sets comm_s and the lower files never call the loop. */
#ifndef DIST_H
#define DIST_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "llama.h"

/* The collectives' settings from the environment, read once (dist_init) and compared across the ranks before
   the first step (ranks that differ would run collectives of other sizes, or in another order). */
typedef struct DistSettings {
    size_t bucket_floats;   /* DPMEM_COMM_BUCKET_MB (default 16 MiB), in floats */
    int overlap;            /* DPMEM_COMM_OVERLAP (0: each unit's reduction waited at once) */
    int zero3_prefetch;     /* DPMEM_ZERO3_PREFETCH (0: --zero 3 gathers each unit at its use) */
} DistSettings;

typedef struct Dist {
    KBackend *kb;
    LlamaModel *model;
    int zero;                 /* --zero 0|1|2|3 */
    int grad_accum, micro;    /* physical batches a step, and the one in progress (set by the loop) */
    DistSettings set;
    float *bucket;            /* the one bucket (NULL: none yet, or one rank) */
    size_t bucket_n;          /* its floats */
    struct Shard *shard;      /* --zero >= 1: this rank's slices (shard.h) */
    struct GradQueue *queue;  /* the reduction unit by unit in flight (grad_reduce.c; NULL: none) */
    double *comm_s;           /* the time sink: every collective's seconds are added here (NULL: not timed) */
} Dist;

void dist_init(Dist *d, KBackend *kb, LlamaModel *m, int zero, int grad_accum, double *comm_s);
/* The seconds since t0 (dpmem_now_ns) into the time sink. */
void dist_time(const Dist *d, uint64_t t0);

/* One collective (comm.h's CommOp) in place on a buffer of the backend: over MPI on host buffers, over NCCL
   on device buffers (a program linked without NCCL: kbackend_error says so). r NULL: run to completion;
   else started (the host: the all-reduce and the reduce-scatter; a device: every op) and completed by
   comm_request_test / comm_request_wait. 0, or -1 with kbackend_error / a line on stderr. */
int dist_collective(Dist *d, CommOp op, void *buf, size_t count, const char *what, CommRequest *r);
/* --zero 3's gather of a whole tensor's unequal slices into buf, started (comm.h: comm_allgatherv_start, on a
   device comm_device_allgatherv_start), completed by comm_request_wait. 0, or -1 as dist_collective. */
int dist_allgatherv_start(Dist *d, void *buf, const size_t *lo, const size_t *len, size_t elem, const char *what, CommRequest *r);

/* The bucket: `floats` of them (at most the setting's), tagged `tag`. 0, or -1 (kbackend_error). */
int  dist_bucket_alloc(Dist *d, size_t floats, const char *tag);
/* With the model (scope model_creation), several ranks, no bucket yet: comm/allreduce_bucket for the trainable
   gradients (none where nothing of the model is trainable: LoRA's sum allocates it when it first runs). */
int  dist_bucket_prepare(Dist *d);
void dist_bucket_free(Dist *d);

/* Rank 0's slice of a tensor of n floats cut over `world` ranks (llama.h's llama_slice): the longest. */
size_t dist_slice0(size_t n, int world);

/* ---- bucket rounds ----------------------------------------------------------------------------------------
   A round: pieces of items (tensors) laid out in the bucket; sharded (world > 1), each piece is positions
   [a, a + k) of every rank's slice of item i (a shorter slice contributes what it has), at offset `at` of each
   rank's part, the parts `used` elements apart; whole (world 1), positions [a, a + k) of the item. */
typedef struct DistPiece { int i; size_t n, a, k, at; } DistPiece;   /* n: the item's whole length */
typedef struct DistRound {
    DistPiece *pc;
    int n, max;          /* pieces in it, at most */
    size_t used, cap;    /* elements of each rank's part in it, at most */
    int world, rank;     /* the layout: world parts (1: the whole), this rank's */
} DistRound;
/* Item i (n elements whole) from position *a on, as much as fits in the round (*a advanced); 1 when the round
   is full (cap elements, or max pieces), else 0. Sharded, the positions run over rank 0's slice. */
int dist_round_add(DistRound *r, int i, size_t n, size_t *a);

/* One side of a move: where rank r's part of item i is (lo: where rank r's slice starts in the whole item),
   and how the bucket's elements get there. */
enum { DIST_COPY, DIST_ADD, DIST_DOWNLOAD };   /* add: fp32 into the tensor; download: into host memory */
typedef struct DistSide {
    void *(*at)(void *user, int i, int r, size_t lo);   /* NULL returned: nothing there */
    void *user;
    int how;
} DistSide;
enum { DIST_OWN = 1, DIST_OTHERS = 2, DIST_ALL = 3 };   /* which ranks' parts move */
/* The round's pieces of the chosen ranks between side `t` and bucket b (elements of type dt): pack into the
   bucket (t read), or unpack out of it (t written). A no-op on the plan backend. 0, or -1. */
int dist_round_move(Dist *d, const DistRound *r, void *b, KDtype dt, int ranks, const DistSide *t, int pack);

/* The synchronous bucket rounds: items [0, count) with items(user, i) elements each (0: skipped), packed
   from `in` (ranks in_ranks), op'ed in the bucket, unpacked into `out` (ranks out_ranks; out.at NULL: not
   unpacked), round after round. cap: each rank's elements a round; max: pieces a round. */
typedef struct DistRounds {
    CommOp op;
    const char *what;
    KDtype dt;
    int world;                       /* the layout (1: whole) */
    size_t cap;
    int max, count;
    size_t (*items)(void *user, int i);
    void *user;
    int in_ranks, out_ranks;
    DistSide in, out;
} DistRounds;
int dist_rounds(Dist *d, const DistRounds *spec);

/* Job-wide sums of host numbers (a mean's numerator and its count, so that the job's mean weighs each rank by
   its rows): v[0..n) summed over the ranks in place, timed into the sink. A no-op with one rank or on the plan
   backend. 0, or -1 after a line on stderr. */
int dist_sum_host(Dist *d, double *v, int n, const char *what);

/* Sums over the ranks, in place, of `count` tensors of ns[i] floats on the backend (NULL ones skipped),
   through the bucket (comm/allreduce_bucket, allocated at the first call where there is none); scope
   "allreduce". A no-op with one rank. 0, or -1 with kbackend_error / a line on stderr. */
int dist_allreduce(Dist *d, float *const *bufs, const size_t *ns, int count, const char *what);

#endif
