/* dp_fused.c — the DP step's noise inside the optimizer's pass (dp_sgd_impl.h): where it applies, the loop's
   optimizer step asks the strategy (TrainStrategy.update) to update each trainable tensor's range, and the
   strategy runs kernels/dp_kernels.h's dp_noisy_adamw (CUDA: dp_noisy_adamw_cuda, secure_noisy_adamw_cuda)
   on it: g privatized block by block in cache and fed to AdamW, instead of before_update writing the
   noised gradient out and AdamW reading it back. The same bits as the two passes (the kernels are the
   separate path's own noise and adamw_element.h; tests/test_dp_fused.sh compares the saved models).
   Applies: AdamW, a backend that computes, the Philox noise on both devices, --secure-noise on the GPU;
   every --zero stage (each rank's slice at its flat offset: shard_view), fp32 masters under bf16 (the
   loop rounds the updated master into its bf16 copy after the hook, as after adamw_update), LoRA's
   adapters (dp_lora.c). Not: SGD (the kernels fuse AdamW only), --secure-noise on the CPU (no fused
   twin there: kernels/cpu/secure_noise.c has the separate pass only). The plan backend takes the path its
   target would (the two allocate alike, nothing), for the time it predicts: kcost's noisy_adamw in
   optimizer_step and no noise pass. DPMEM_FUSED_UPDATE=0 forces the two passes.
   Time: the fused pass is both noise and optimizer_step; the phase table counts it under optimizer_step
   and the noise row holds only the loop that skips the fused tensors (≈ 0). */
#include "dp_sgd_impl.h"
#include "dpmem.h"
#include "plan/cost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dp_fused_setup(DpSgd *d, TrainState *s) {
    const char *env = getenv("DPMEM_FUSED_UPDATE");
    if (env && strcmp(env, "0") && strcmp(env, "1"))
        return dp_fail(d, "DPMEM_FUSED_UPDATE='%s': give 0 (noise and AdamW in two passes) or 1 (one pass, the default)", env);
    const int adam = !strcmp(s->cfg->optimizer, "adamw");
    /* (s->calls_update: a test or a wrapper that drives the strategy without the loop gets the noise from before_update) */
    /* a plan fuses where its target would (its time: kcost's noisy_adamw in optimizer_step, no noise pass) */
    const int plan = s->kb->kind == KB_PLAN;   /* (d->gpu: CUDA, or a plan for it) */
    d->fused = adam && (d->computes || plan) && s->calls_update && !(env && !strcmp(env, "0")) && (!d->cfg.secure_noise || d->gpu);
    LlamaModel *m = &s->model;
    if (!(d->flat = calloc((size_t)m->n_params + (size_t)d->n_lora + 1, sizeof *d->flat)))
        return dp_fail(d, "%s", "out of host memory (the noise's offsets)");
    uint64_t offset = 0;   /* the trainable tensors in order, then the adapters (A, then B): before_update's numbering */
    for (int i = 0; i < m->n_params; i++) {
        d->flat[i] = offset;
        if (m->params[i].trainable) offset += m->params[i].numel;
    }
    for (int k = 0; k < d->n_lora; k++) {
        d->flat[m->n_params + k] = offset;
        offset += lora_param_count(&d->lora[k]);
    }
    return 0;
}

int dp_fused_adamw(DpSgd *d, TrainState *s, float *w, float *g, float *m, float *v, size_t n, uint64_t offset, float wd) {
    const TrainConfig *c = s->cfg;
    const DpAdamW opt = { .lr = s->lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->adam_eps, .weight_decay = wd,
                          .t = s->step + 1 };
    const DpKernel k = { .op = DPK_NOISY_ADAMW, .dw = g, .p = w, .m = m, .v = v, .per = n, .step = (uint64_t)s->step,
                         .offset = offset, .opt = &opt };
    if (!d->computes) { kcost_op(d->kb->cost, KCO_NOISY_ADAMW, 4, n, 1, 0); return 0; }   /* the plan's time */
    return n ? dp_run(d, NULL, &k) : 0;
}

int dp_sgd_update(void *user, TrainState *s, int i, float *w, float *g, float *m, float *v, size_t n, float wd) {
    DpSgd *d = user;
    if (!d->fused) return 0;
    const ShardView sv = shard_view(&s->dist, i);   /* --zero: this rank's slice, at its place in the flat numbering */
    return dp_fused_adamw(d, s, w, g, m, v, n, d->flat[i] + sv.lo, wd) ? -1 : 1;
}
