/* grad_reduce.h — the gradients summed over the ranks, once a step (grad_reduce.c): unit by unit inside the
   backward where it can (--zero 2's reduce-scatter into the slices at every physical batch, and the all-reduce
   of --zero 0 on several ranks at the last one, overlapped with the backward unless DPMEM_COMM_OVERLAP=0),
   else after it (the bucketed all-reduce of dist.h; --zero 1's). Above shard.h, below the loop: the loop calls
   grad_reduce_step after its physical batches, before its strategy's before_update, so a DP strategy's noise
   is added once, to the sum. The model's unit hooks (llama.h's LlamaUnitHooks) are installed here with
   user = the Dist: the reduction's begin/done, and --zero 3's weight gathers (shard.h). */
#ifndef GRAD_REDUCE_H
#define GRAD_REDUCE_H

#include "shard.h"

/* With the model (after shard_init and the loop's dist_bucket_prepare): the slices grads/<name>.shard
   (--zero 2), the second bucket (comm/overlap_bucket), the unit hooks. 0, or -1 (kbackend_error). */
int  grad_reduce_init(Dist *d);
/* The step's reduction: what the backward left (the rest of the units, the waits; or the whole bucketed
   all-reduce, or --zero 2's reduce-scatter where no unit had a gradient), and *loss (this rank's mean over its
   `rows` rows) made the job's mean over all the ranks' rows (scope "allreduce"/"reduce_scatter"). A no-op with
   one rank. 0, or -1 (kbackend_error). */
int  grad_reduce_step(Dist *d, double *loss, long rows);
/* What grad_reduce_step waits for, alone (--check-finite under --zero 2 reads the slices after the backward). */
int  grad_reduce_finish(Dist *d);
/* A physical batch that runs no backward (a Poisson batch with no rows) still reduces every unit of --zero 2
   (zeros: every rank runs the same collectives). */
int  grad_reduce_idle(Dist *d);
/* zero_grad: the slices := 0. */
int  grad_reduce_zero(Dist *d);
/* 2 (--zero 2's reduce-scatter by units), 1 (--zero 0's all-reduce by units) or 0 (none). */
int  grad_reduce_active(const Dist *d);
void grad_reduce_free(Dist *d);

#endif
