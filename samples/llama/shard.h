/* shard.h — sharded training state over the ranks (ZeRO, Rajbhandari et al. 2020), --zero 1|2|3:
     1: AdamW's m and v are held for this rank's slice of every trainable tensor only
        (optimizer/<name>.exp_avg, .exp_avg_sq: the slice's size); the gradients are all-reduced as
        without sharding, each rank updates its slice of the parameters, and the updated slices are
        all-gathered (scope "all_gather") so that every rank holds the whole model again;
     2: also the gradients (samples/llama/grad_reduce.c): no rank holds the whole model's. Each
        gradient unit (llama.h: a block's nine tensors; the final norm and lm_head; the embedding) gets
        its full-size buffers (grads/<name>, zeroed) when the backward (or book-keeping's formation
        after it) begins the unit and is reduce-scattered (scope "reduce_scatter", inside "backward"
        or "clip") as soon as the unit is done, at every physical batch (as DeepSpeed's ZeRO-2 at
        every micro-step), overlapped with the rest of the backward; this rank's part is added into
        its slice, grads/<name>.shard (fp32, zeroed at each zero_grad), and the buffers are freed.
        Live at a rank's peak: the slices plus the units in progress (one; with a tied lm_head the
        tied matrix too, from the head's unit to the embedding's) — and book-keeping's kept
        per-sample gradients of layers with d_in <= T, which below --zero 2 keep their first sample in
        the layer's dW and here in the per-sample buffer (the same bytes, now per_sample_grads).
        The noise, 1/L and the update read only the slice (shard_view's g).
     3: also the weights (cfg.params_by_unit): every tensor llama_master_sharded names — each linear
        layer, an untied lm_head, and here an untied embedding table — is held as this rank's fp32
        slice alone (params/<name>.shard, under fp32 precision too; no whole bf16 copy). A unit's
        weights are gathered whole into comm/gathered/<name> (scope "all_gather"; straight there, no
        bucket: each rank puts its own slice in place and an all-gather of unequal slices fills the rest,
        MPI_Iallgatherv in place on host buffers, grouped NCCL broadcasts on NCCL's communication stream on device
        buffers: comm.h's comm_allgatherv_start) for the unit's forward and again for its recompute and
        backward (every backward: two-pass runs two), and freed when its GEMMs are done
        (shard_release_unit; llama.h's LlamaUnitHooks.gather/release/prefetch). PREFETCH: right after a
        unit's gather completes, the next unit's (llama.c knows the order: forward L+1, 0 .. L-1, L;
        backward L, L-1 .. 0) is started non-blocking (shard_prefetch_unit: its buffers allocated then)
        and completed at its own gather, so it is in flight while this unit computes;
        DPMEM_ZERO3_PREFETCH=0 starts and completes each gather at its use instead (the same bits moved:
        the same bits trained). Under bf16 a GEMM weight is gathered as bf16, each rank rounding its own
        slice (RNE, the forward's cast: the same bits), the embedding's table as fp32 (its lookup reads
        fp32). Gradients as 2; the update writes the slices and nothing is gathered after it. Whole on
        every rank: the RMSNorm weights (C floats each) and a tied matrix (the lookup reads its fp32
        master, lm_head's GEMM its bf16 copy). Live at a rank's peak: the slices, those whole tensors,
        2's gradient unit in progress, and TWO units' gathered weights, the one computing and the next
        (prefetched; one unit's with the prefetch off): tests/test_comm_zero measures them at rank 0's
        peak. On the CPU, OpenMPI progresses a gather in flight only inside its calls (no progress
        thread), so there the prefetch buys little time; on NCCL the communication stream runs beside the compute.
        LoRA: the frozen base is what is sharded (llama.h's llama_base_sharded: each frozen GEMM weight
        held as this rank's slice, params/<name>.bf16.shard of its bf16 values under bf16,
        params/<name>.shard under fp32, gathered per unit as above, bf16 slices as they are); the
        embedding, the norms and the adapters (with their m and v) stay whole; merged (fp32) LoRA's
        re-merge runs on the weight gathered whole (shard_gather_tensor, dp_sgd.c), the same GEMMs as
        unsharded, and keeps the slice. --poisson: a rank whose physical batch drew no row runs it on
        padding rows of loss weight 0 (dp_sgd.c), so that its gathers and reduce-scatters are the others'.
   THE FP32 MASTERS (--precision bf16, both stages). Each trainable GEMM weight with a bf16 copy (the
   linear layers, an untied lm_head: llama.h's llama_master_sharded) keeps the fp32 master of this
   rank's slice only (params/<name>.shard, built by llama_build_sharded: drawn whole into a one-tensor
   workspace, rounded whole into the bf16 copy, the slice kept); the optimizer step updates the slice
   and rounds it into its slice of the bf16 copy (the forward's own rounding, RNE: the same bits), and
   the bf16 copies are all-gathered as 16-bit elements (gather_copies: half the bytes of fp32). The
   forward reads the copies and rounds no master of these. Whole on every rank, gathered in fp32: what
   the forward reads in fp32 (RMSNorm weights: C floats each; an untied trainable embedding's lookup
   table and the tied matrix: 4·V·C bytes, 2.1 GB at the 8B shape), and a classifier's score (K·C
   floats, saved by LoRA beside its adapters from rank 0). Under fp32 precision the master is
   the parameter the GEMMs read: nothing is sharded there short of --zero 3. Readers of the whole
   master get: the hooks' args->W NULL; --check-finite this rank's slice; the params hash and --save
   the gathered model, one tensor at a time (shard_gather_master: no rank holds the whole fp32 model);
   --init-from (checkpoint.c) each tensor through a one-tensor fp32 buffer, keeping the slice.
   THE SLICES. Each trainable tensor of n floats is cut in world contiguous slices, in rank order:
   rank r holds n/world floats, one more when r < n % world (the remainder goes to the first ranks),
   from r·(n/world) + min(r, n % world). Rank 0 therefore holds the most of every tensor: the planner
   (--device plan --ranks N --zero S, which plans rank 0) plans the rank that holds the most.
   DP STAYS EXACT. Every rank clips its own samples into its gradient buffers (the per-sample norms
   need only a layer's activations and output gradients, local to the rank); the sum over the ranks
   of a coordinate is the same sum with or without sharding; the noise of coordinate i is
   z(seed, step, i) with i its index in the flat trainable vector, added once, by the rank whose slice
   holds i (shard_view tells a strategy which range is its own: samples/dp/dp_sgd.c's noise);
   the update of a coordinate is the same elementwise AdamW/SGD. So a sharded run computes bit for bit
   what the same ranks compute without sharding, wherever the reduce-scatter adds in the all-reduce's
   order and each rank runs one physical batch a step; with several, --zero 2 adds the ranks' sums
   batch by batch (Σ_batches Σ_ranks) where the unsharded ranks add Σ_ranks Σ_batches: the same sum
   in another order (<= 1e-6 relative in tests/test_comm_zero).
   THE BUCKET. The collectives (but --zero 3's unit gathers: above) pack slices into the one bucket (dist.h:
   comm/shard_bucket, with the model; DPMEM_COMM_BUCKET_MB caps it as the all-reduce's; the gradient
   all-reduce of --zero 1 and LoRA's use it too), rank by rank at a fixed stride, in as many rounds as the
   slices need (dist.h's dist_rounds).
   NOT HERE (this implementation): below --zero 3 the fp32 masters under fp32 precision and the fp32
   tensors the bf16 forward reads (above); LoRA's adapters and their optimizer
   state stay replicated (the frozen base has no gradient and no optimizer state to shard; --zero 3 shards its weights); DP's
   one-sample shortcut (a physical batch of 1 clipped by scaling the whole gradient) is off under
   --zero 2 (the per-sample path runs instead). */
#ifndef SHARD_H
#define SHARD_H

#include <stddef.h>

#include "dist.h"
#include "safetensors.h"

typedef struct Shard {
    int stage, world, rank;
    int n;                 /* the model's tensors (LlamaModel.params) */
    size_t *lo, *len;      /* this rank's slice of each trainable tensor (len 0 where frozen) */
    float **m, **v;        /* AdamW's state of the slice (NULL: SGD, frozen) */
    float **g;             /* --zero 2: the slice's summed gradient, grads/<name>.shard (allocated and reduced into by
                              grad_reduce.c); NULL below 2 */
    int prefetch;          /* --zero 3: the next unit's gather started while this one computes (DPMEM_ZERO3_PREFETCH, default 1) */
    int pf_unit;           /* --zero 3: the unit whose gathers are in flight (-1: none) */
    CommRequest *req;      /* --zero 3: [n] each tensor's gather in flight */
    size_t *vlo, *vlen;    /* --zero 3: [world] every rank's slice of the tensor whose gather starts */
} Shard;

/* With the model (scope model_creation, after llama_build with no optimizer state of its own): the
   slices, for AdamW (adam 1) their m and v (zeroed), and the bucket comm/shard_bucket. No-op when d->zero
   is 0. 0, or -1 (kbackend_error). */
int  shard_init(Dist *d, int adam);
void shard_free(Dist *d);
/* This rank's part of trainable tensor i: positions [lo, lo + n) (under --zero its slice, else all of it),
   where its summed gradient's first float is (g: --zero 2 the slice grads/<name>.shard, else the gradient
   buffer at lo; NULL: none), and its AdamW state (m, v: the slice's under --zero, else the model's; NULL:
   SGD). The noise, 1/L and the update read and write there. */
typedef struct ShardView { size_t lo, n; float *g, *m, *v; } ShardView;
ShardView shard_view(const Dist *d, int i);
/* The trainable gradients' full-size buffers reduce-scattered at once (scope "reduce_scatter"): each
   rank's slice of them holds the sum over the ranks. (--zero 2 reduces unit by unit into the slices
   instead, grad_reduce.c; the loop calls this only where no unit has a gradient: a no-op.) */
int  shard_reduce_scatter_grads(Dist *d);
/* After the update of the slices: every rank's slices to every rank (scope "all_gather"): the whole
   fp32 parameters in fp32, a sharded master's bf16 copy in bf16 (its fp32 slice stays this rank's). */
int  shard_allgather_params(Dist *d);
/* --zero 3 (llama.h's LlamaUnitHooks.gather/release, user = the Dist; installed by grad_reduce_init): unit u's
   sharded GEMM weights gathered whole into comm/gathered/<name> (bf16 under bf16, fp32 under fp32; scope
   "all_gather"), and freed. Every rank calls them at the same points. 0, or -1 (kbackend_error). */
int  shard_gather_unit(void *user, int u);
int  shard_release_unit(void *user, int u);
/* --zero 3 (LlamaUnitHooks.prefetch): unit u's gathers started now, completed at its shard_gather_unit (the next
   one: llama.c calls it after a unit's gather with the unit its pass gathers next); a no-op under
   DPMEM_ZERO3_PREFETCH=0, where shard_gather_unit starts and completes each gather at once. */
int  shard_prefetch_unit(void *user, int u);
/* --zero 3, a frozen base's tensor i (llama.h's llama_base_sharded): gathered whole in its slice type (bf16 for a
   base kept in bf16 alone, else fp32) into a backend buffer of this one tensor, comm/gathered/<name> (scope
   "all_gather", started and completed at once; the caller frees it with kbuf_free): merged LoRA's re-merge
   (dp_sgd.c), the hash, --save. Every rank calls it for the same i, with no unit's prefetch in flight.
   NULL: kbackend_error. */
float *shard_gather_tensor(Dist *d, int i);
/* Whether any tensor is held sliced (--zero under bf16: llama.h's llama_master_sharded; --zero 3:
   llama_held_sliced, a frozen base's too): --save then gathers. */
int  shard_masters(const Dist *d);
/* Tensor i's sharded fp32 master, gathered whole into host (numel floats; NULL: this rank only sends)
   through the bucket, in rounds (scope "all_gather"); a frozen base's tensor held sliced (--zero 3:
   llama_base_sharded) in its slice type (bf16: numel 2-byte values), through a backend buffer of the
   tensor (shard_gather_tensor). Every rank calls it for the same i. */
int  shard_gather_master(Dist *d, int i, float *host);
/* --save from a sharded run (every rank calls it): checkpoint.h's ckpt_save_gathered, rank 0 writing. */
int  shard_save(Dist *d, const char *dir, SafeTensorsDtype dtype, const char *base, char *err, size_t errlen);
/* Several ranks: every rank must hold bit-identical parameters after training (DP-SGD adds the same
   noise on every rank, so no broadcast is needed); a hash of them (the gathered model where it is held
   sliced) is compared (META comm.params_hash) and, unless quiet, printed. 0, or -1 with an error naming the
   disagreement. */
int  shard_check_ranks_agree(Dist *d, int quiet);

#endif
