/* dp_clip.c — the clip of DP-SGD (dp_sgd_impl.h): the factors c_b = min(1, C/(‖g_b‖+1e-6)) from the
   per-sample norms, the clipped sums dW += Σ_b c_b g_b from what the hooks kept (per-sample
   gradients, or A and a copy of G: book-keeping, unit by unit), the batch-of-one shortcut, and the
   kept state's release. */
#include "dp_sgd_impl.h"
#include "dpmem.h"

#include <stdlib.h>

/* The factors c on the host (d->c_host), read back once per physical batch: the statistics, the GPU's
   book-keeping GEMMs and two-pass's second backward all take them from there. */
int dp_read_factors(DpSgd *d, int B) {
    return d->computes && kbuf_download(d->kb, d->c_host, d->c, (size_t)B * sizeof(float)) ? -1 : 0;
}

/* Under bf16 the factors keep a margin (DP_BF16_CLIP_MARGIN, dp_kernels.h): c_b·‖g_b‖ ≤ C also when
   the measured norm is a little low. fp32 keeps Opacus's factor, bit for bit as before. */
void dp_compute_factors(DpSgd *d, int B) {
    const DpKernel k = { .op = DPK_FACTORS, .norm2 = d->norm2, .B = B };
    if (d->computes) dp_run(d, NULL, &k);
}

/* dW += Σ_b c_b g_b of one tensor from what its hook kept (per-sample gradients, or A and G). */
int dp_sum_clipped(DpSgd *d, DpParamState *p, float *dw, const int *tokens, int V) {
    if (!dw) return 0;
    const int emb = p->kind == HOOK_EMBEDDING;
    DpKernel k = { .dw = dw, .tokens = tokens, .c = d->c, .B = p->B, .T = p->T, .din = p->d_in, .dout = p->d_out, .V = V,
                   .dt = d->dt };
    if (p->psg_first || p->psg) {
        k.op = p->psg_first ? DPK_SUM_PSG_FIRST : emb ? DPK_SUM_PSG_EMBEDDING : DPK_SUM_PSG;
        k.psg = p->psg;
        k.per = p->kind == HOOK_LINEAR ? (size_t)p->d_in * p->d_out : p->kind == HOOK_RMSNORM ? (size_t)p->d_out
              : (size_t)V * p->d_out;
        if (d->computes) dp_run(d, NULL, &k);
        return 0;
    }
    if (!p->G) return 0;
    k.op = emb ? DPK_SUM_BK_EMBEDDING : DPK_SUM_BK;
    k.A = emb ? NULL : p->A;
    k.G = p->G;
    Widen wd;
    if (dp_widen_open(d, &wd, p->T, emb ? 0 : p->d_in, p->d_out)) return -1;
    if (d->computes) dp_run(d, &wd, &k);
    dp_widen_close(d, &wd);
    return 0;
}

static void free_state(DpSgd *d, DpParamState *p) {
    kbuf_free(d->kb, p->psg); p->psg = NULL;
    p->psg_first = NULL;                         /* dW itself: not ours */
    if (!p->G_borrowed) kbuf_free(d->kb, p->G);
    p->G = NULL; p->G_borrowed = 0;
    kbuf_free(d->kb, p->A_owned); p->A_owned = NULL;
    p->A = NULL;
}

void dp_free_kept(DpSgd *d) {
    for (int i = 0; d->ps && i <= d->n_params; i++) free_state(d, &d->ps[i]);   /* n_params: a tied lm_head */
    kbuf_free(d->kb, d->tied_u); d->tied_u = NULL;
    for (int k = 0; d->lps && k < 2 * d->n_lora; k++) free_state(d, &d->lps[k]);
}

static float *slot_grad(DpSgd *d, int i) {
    LlamaModel *m = &d->s->model;
    return *llama_tensor(&m->dw, &m->params[i]);
}

/* Book-keeping's clipped sums unit by unit in the backward's order (llama.h's gradient units: the
   reduction of each as it is formed, --zero 2's full-size buffers one unit at a time; every rank the
   same order), then the adapters'. */
int dp_clip_units(DpSgd *d) {
    LlamaModel *m = &d->s->model;
    int bad = 0;
    const int L = m->L, units = llama_grad_units(m);
    for (int k = 0; k < units && !bad; k++) {
        const int u = k == 0 ? llama_unit_head(m) : k <= L ? L - k : llama_unit_embed(m);
        bad = llama_unit_event(m, u, 0);
        for (int i = 0; i < d->n_params && !bad; i++)
            if (llama_grad_unit(m, i) == u) bad = dp_sum_clipped(d, &d->ps[i], slot_grad(d, i), m->tokens, m->V);
        if (d->tied && u == llama_unit_embed(m) && !bad)   /* the same dW, after the embedding's (as before) */
            bad = dp_sum_clipped(d, &d->ps[d->n_params], m->dw.lm_head, m->tokens, m->V);
        if (!bad) bad = llama_unit_event(m, u, 1);
    }
    for (int k = 0; k < d->n_lora && !bad; k++)
        bad = dp_sum_clipped(d, &d->lps[2 * k], d->lora[k].dA, NULL, 0) || dp_sum_clipped(d, &d->lps[2 * k + 1], d->lora[k].dB, NULL, 0);
    return bad ? -1 : 0;
}

/* A physical batch of one sequence: its gradient is its per-sample gradient; the clip is one scale. */
int dp_shortcut_clip(DpSgd *d, TrainState *s) {
    LlamaModel *m = &s->model;
    double n2 = 0;
    for (int i = 0; i < m->n_params; i++) {
        float *g = *llama_tensor(&m->dw, &m->params[i]);
        double x = 0;
        if (g && reduce_sumsq(d->kb, g, m->params[i].numel, &x)) return -1;
        n2 += x;
    }
    /* one sample: the factor on the host (the same function), then stored where the stats read it */
    float n2f = (float)n2, c0 = 1.0f;
    if (d->dt == KDT_BF16) dp_clip_factors_safe(&c0, &n2f, 1, (float)d->cfg.max_grad_norm, DP_BF16_CLIP_MARGIN);
    else dp_clip_factors(&c0, &n2f, 1, (float)d->cfg.max_grad_norm);
    if (d->computes && (kbuf_upload(d->kb, d->norm2, &n2f, sizeof n2f) || kbuf_upload(d->kb, d->c, &c0, sizeof c0)))
        return -1;
    d->c_host[0] = c0;
    for (int i = 0; i < m->n_params; i++) {
        float *g = *llama_tensor(&m->dw, &m->params[i]);
        if (!g || !d->computes) continue;
        /* scaled whatever c (× 1 is exact): skipping c = 1 made the step's time say whether the sample was
           clipped (docs/DP_METHODS.md, Timing); c = 0 (a norm that is not finite): exactly zero, not 0 · NaN */
        if (c0 == 0.0f ? fill_buffer(d->kb, g, 0.0f, m->params[i].numel) : scale_inplace(d->kb, g, c0, m->params[i].numel)) return -1;
    }
    return dp_collect_stats(d, 1);
}
