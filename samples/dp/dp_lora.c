/* dp_lora.c — LoRA under DP-SGD (dp_sgd_impl.h): the adapters on the --lora-targets projections of the
   frozen base (lora.h: merged into the fp32 tensors, unmerged beside a bf16 base), their clipped
   sums added across ranks, their optimizer step with the re-merge (--zero 3: on the weight gathered
   whole), and --save's adapter files. Their per-sample norms are the hook's (dp_norms.c). */
#include "dp_sgd_impl.h"
#include "llama/checkpoint.h"
#include "llama/shard.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lora_target_bit(WhichTensor w) {
    switch (w) {
    case W_Q_PROJ: return LORA_Q;  case W_K_PROJ: return LORA_K;   case W_V_PROJ: return LORA_V;
    case W_O_PROJ: return LORA_O;  case W_GATE_PROJ: return LORA_GATE; case W_UP_PROJ: return LORA_UP;
    case W_DOWN_PROJ: return LORA_DOWN; default: return 0;
    }
}

int dp_sgd_frozen(void *user, const ParamInfo *p) {
    (void)user;
    /* classify's score head trains whole, as PEFT's modules_to_save for sequence classification */
    return !(p->which == W_LM_HEAD && !strcmp(p->name, "score"));
}

size_t dp_sgd_lora_params(const DpSgd *d) {
    size_t n = 0;
    for (int k = 0; k < d->n_lora; k++) n += lora_param_count(&d->lora[k]);
    return n;
}

int dp_lora_setup(DpSgd *d, TrainState *s) {
    LlamaModel *m = &s->model;
    const int r = d->cfg.lora_rank;
    const float alpha = d->cfg.lora_alpha > 0 ? (float)d->cfg.lora_alpha : 2.0f * r;
    d->lora = calloc((size_t)m->n_params, sizeof *d->lora);
    d->lora_of = malloc((size_t)m->n_params * sizeof *d->lora_of);
    d->lps = calloc(2 * (size_t)m->n_params, sizeof *d->lps);
    if (!d->lora || !d->lora_of || !d->lps) return dp_fail(d, "%s", "out of host memory (LoRA state)");
    /* bf16: the frozen base is bf16 alone (llama.h), where s·B·A would round away: the model adds the
       adapters beside its GEMMs instead (unmerged form, lora.h) */
    if (m->dt == KDT_BF16 && !(m->lora = d->unmerged = calloc((size_t)m->n_params, sizeof *d->unmerged)))
        return dp_fail(d, "%s", "out of host memory (LoRA state)");
    const int adam = !strcmp(s->cfg->optimizer, "adamw");
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        d->lora_of[i] = -1;
        if (!(lora_target_bit(p->which) & d->cfg.lora_targets) || p->trainable) continue;   /* score: trained whole */
        LoraAdapter *l = &d->lora[d->n_lora];
        if (lora_build(l, d->kb, p->name, i, p->cols, p->rows, r, alpha, adam, (unsigned long long)s->cfg->seed, m->dt)) return -1;
        d->lora_of[i] = d->n_lora++;
        if (d->unmerged) { d->unmerged[i] = l; continue; }
        float *W = *llama_tensor(&m->w, p);   /* (NULL: --zero 3 holds this rank's slice alone; B = 0 adds nothing) */
        if (W && lora_merge(l, d->kb, W, 1.0f)) return -1;   /* B = 0: W is unchanged, but say what is meant */
    }
    for (int k = 0; k < 2 * d->n_lora; k++) d->lps[k].used = -1;
    if (!dp_quiet(d, s)) {
        char t[64];
        printf("LoRA: rank %d, alpha %g (scale %g) on %s: %d adapters, %zu trainable parameters; the %zu base parameters are frozen\n",
               r, alpha, alpha / r, dp_lora_targets_string(d->cfg.lora_targets, t, sizeof t), d->n_lora,
               dp_sgd_lora_params(d), m->bytes_params / 4);
    }
    char t[64], a[32];
    dpmem_meta_int("lora.rank", r);
    snprintf(a, sizeof a, "%.9g", alpha);
    dpmem_meta("lora.alpha", a);
    dpmem_meta("lora.targets", dp_lora_targets_string(d->cfg.lora_targets, t, sizeof t));
    dpmem_meta_int("lora.trainable_params", (long long)dp_sgd_lora_params(d));
    return 0;
}

/* The adapters' clipped sums, added across ranks as the loop did for the model's gradients. */
int dp_lora_allreduce(DpSgd *d, TrainState *s) {
    float **bufs = malloc(2 * (size_t)d->n_lora * sizeof *bufs);
    size_t *ns = malloc(2 * (size_t)d->n_lora * sizeof *ns);
    if (!bufs || !ns) { free(bufs); free(ns); return dp_fail(d, "%s", "out of host memory (all-reduce)"); }
    for (int k = 0; k < d->n_lora; k++) {
        bufs[2 * k] = d->lora[k].dA; ns[2 * k] = (size_t)d->lora[k].r * d->lora[k].IC;
        bufs[2 * k + 1] = d->lora[k].dB; ns[2 * k + 1] = (size_t)d->lora[k].OC * d->lora[k].r;
    }
    int rc = dist_allreduce(&s->dist, bufs, ns, 2 * d->n_lora, "the LoRA gradient all-reduce");
    free(bufs); free(ns);
    return rc ? -1 : 0;
}

/* One adapter's step: unmerge from W (merged form; unmerged: W unused), update, re-merge, its gradients zeroed. */
static int lora_update(DpSgd *d, TrainState *s, LoraAdapter *l, int k, float *W, int adam) {
    const TrainConfig *c = s->cfg;
    const size_t na = (size_t)l->r * l->IC, nb = (size_t)l->OC * l->r;
    if (!d->unmerged && lora_merge(l, d->kb, W, -1.0f)) return -1;
    if (d->fused) {   /* the noise in AdamW's pass (dp_fused.c), at the adapter's flat indices */
        const uint64_t at = d->flat[s->model.n_params + k];
        if (dp_fused_adamw(d, s, l->A, l->dA, l->mA, l->vA, na, at, c->weight_decay) ||
            dp_fused_adamw(d, s, l->B, l->dB, l->mB, l->vB, nb, at + na, c->weight_decay))
            return -1;
    } else if (adam) {
        if (adamw_update(d->kb, l->A, l->dA, l->mA, l->vA, na, s->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay, s->step + 1) ||
            adamw_update(d->kb, l->B, l->dB, l->mB, l->vB, nb, s->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay, s->step + 1))
            return -1;
    } else if (sgd_update(d->kb, l->A, l->dA, na, s->lr, c->weight_decay) || sgd_update(d->kb, l->B, l->dB, nb, s->lr, c->weight_decay))
        return -1;
    if (!d->unmerged && lora_merge(l, d->kb, W, 1.0f)) return -1;
    return fill_buffer(d->kb, l->dA, 0.0f, na) || fill_buffer(d->kb, l->dB, 0.0f, nb) ? -1 : 0;
}

/* The adapters' optimizer step (the loop's only updates model tensors). --zero 3 holds this rank's slice of
   a merged base alone: the weight is gathered whole for the merges (shard_gather_tensor: the same GEMMs on
   the same values as an unsharded rank's, so the same bits), this rank's slice of the result kept. */
int dp_lora_step(DpSgd *d, TrainState *s) {
    DPMEM_SCOPE("optimizer_step");
    const int adam = !strcmp(s->cfg->optimizer, "adamw");
    LlamaModel *m = &s->model;
    for (int k = 0; k < d->n_lora; k++) {
        LoraAdapter *l = &d->lora[k];
        const ParamInfo *p = &m->params[l->param_index];
        if (d->unmerged || !llama_base_sharded(m, p)) {
            if (lora_update(d, s, l, k, *llama_tensor(&m->w, p), adam)) return -1;
            continue;
        }
        float *W = shard_gather_tensor(&s->dist, l->param_index);
        size_t lo, len;
        llama_slice(p->numel, m->shard_world, m->shard_rank, &lo, &len);
        const int rc = !W || lora_update(d, s, l, k, W, adam) || (len && copy_buffer(d->kb, *llama_tensor(&m->wsh, p), W + lo, len));
        kbuf_free(d->kb, W);
        if (rc) return -1;
    }
    return 0;
}

/* --save with LoRA: the model saved by the loop is merged (fp32: in place; bf16: ckpt_save merges
   each adapter into the fp32 tensor it writes, lora.h); the adapters go to
   <dir>/adapter in PEFT's layout (a subdirectory: see checkpoint.h). */
int dp_sgd_save_adapters(void *user, TrainState *s, const char *dir) {
    DpSgd *d = user;
    if (d->n_lora == 0) return 0;
    char sub[4096], err[CKPT_ERR];
    snprintf(sub, sizeof sub, "%s/adapter", dir);
    /* a classifier: its score head (the last tensor, trained whole) goes with the adapters, as PEFT's SEQ_CLS */
    const LlamaModel *m = &s->model;
    const ParamInfo *last = &m->params[m->n_params - 1];
    const int cls = m->cfg.task == LLAMA_TASK_CLASSIFY && last->trainable;
    const CkptLoraHead head = { cls ? *llama_tensor((LlamaTensors *)&m->w, last) : NULL, last->rows, last->cols };
    if (ckpt_save_lora_adapters(d->lora, d->n_lora, cls ? &head : NULL, d->kb, s->cfg->init_from, sub, err, sizeof err) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    if (!dp_quiet(d, s) && kbackend_computes(d->kb)) printf("saved: %s/adapter_model.safetensors, adapter_config.json (PEFT)\n", sub);
    return 0;
}
