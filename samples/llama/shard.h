/* shard.h — sharded training state over the ranks (ZeRO, Rajbhandari et al. 2020), --zero 1|2:
     1: AdamW's m and v are held for this rank's slice of every trainable tensor only
        (optimizer/<name>.exp_avg, .exp_avg_sq: the slice's size); the gradients are all-reduced as
        without sharding, each rank updates its slice of the parameters, and the updated slices are
        all-gathered (scope "all_gather") so that every rank holds the whole model again;
     2: also the gradients: the summed gradient is reduce-scattered (scope "reduce_scatter": half an
        all-reduce's traffic) instead of all-reduced, each rank receiving the sum of its slice only;
        the noise, 1/L and the update read nothing else.
   THE SLICES. Each trainable tensor of n floats is cut in world contiguous slices, in rank order:
   rank r holds n/world floats, one more when r < n % world (the remainder goes to the first ranks),
   from r·(n/world) + min(r, n % world). Rank 0 therefore holds the most of every tensor: the planner
   (--device plan --ranks N --zero S, which plans rank 0) plans the rank that holds the most.
   DP STAYS EXACT. Every rank clips its own samples into its full-size gradient buffers (the backward
   and the DP strategies are unchanged); the sum over the ranks of a coordinate is the same sum with
   or without sharding; the noise of coordinate i is z(seed, step, i) with i its index in the flat
   trainable vector, added once, by the rank whose slice holds i (train_grad_range tells a strategy
   which range is its own: samples/dp/dp_sgd.c's noise); the update of a coordinate is the same
   elementwise AdamW/SGD. So a sharded run computes bit for bit what the same ranks compute without
   sharding, wherever the reduce-scatter adds in the all-reduce's order.
   THE BUCKET. The collectives pack slices into one bucket (comm/shard_bucket, with the model;
   DPMEM_COMM_BUCKET_MB caps it as the all-reduce's; the gradient all-reduce of --zero 1 and LoRA's
   use it too), rank by rank at a fixed stride, in as many rounds as the slices need: NCCL's
   collectives take equal counts per rank, so a round's count is rank 0's (the longest) and the
   shorter ranks' parts are padding that is summed or copied but never read.
   NOT HERE (this implementation): the fp32 master weights stay whole on every rank (the forward
   reads them: fp32 GEMMs, and under bf16 the norms, the embedding and the bf16 copies' refresh);
   --zero 2's full-size gradient buffers stay allocated (the backward accumulates into them; only a
   reduction bucket by bucket inside the backward, issue 39's item 3, frees them at the peak), so its
   peak is --zero 1's; --zero 3 (the parameters); LoRA's adapters and their optimizer state stay
   replicated (the frozen base has no gradient and no optimizer state to shard). */
#ifndef SHARD_H
#define SHARD_H

#include <stddef.h>

struct TrainState;

typedef struct Shard {
    int stage, world, rank;
    int n;                 /* the model's tensors (LlamaModel.params) */
    size_t *lo, *len;      /* this rank's slice of each trainable tensor (len 0 where frozen) */
    float **m, **v;        /* AdamW's state of the slice (NULL: SGD, frozen) */
    float **g;             /* --zero 2: the slice's summed gradient, grads/<name>.shard (shard_grads.c); NULL below 2 */
    struct ShardGradQueue *q; /* --zero 2: the reductions in flight (shard_grads.c) */
} Shard;

/* Rank r's slice of a tensor of n floats among world ranks (see above). */
void shard_slice(size_t n, int world, int rank, size_t *lo, size_t *len);

/* With the model (scope model_creation, after llama_build with no optimizer state of its own): the
   slices and, for AdamW, their m and v (zeroed). No-op when cfg->zero is 0. 0, or -1 (kbackend_error). */
int  shard_init(struct TrainState *s);
void shard_free(struct TrainState *s);
/* --zero 2: the trainable gradients reduce-scattered (scope "reduce_scatter"): each rank's slice
   holds the sum over the ranks; the rest of its buffers is stale. */
int  shard_reduce_scatter_grads(struct TrainState *s);
/* After the update of the slices: every rank's slices to every rank (scope "all_gather"). */
int  shard_allgather_params(struct TrainState *s);

#endif
