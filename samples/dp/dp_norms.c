/* dp_norms.c — the weight-gradient hook of DP-SGD (dp_sgd_impl.h): each weight's per-sample squared
   norms added into norm2 by the method of --norm (direct, ghost, flash, mixed's choice per layer),
   and what the clipped sum will need kept (per-sample gradients, or A and a copy of G); RMSNorm
   weights (always direct), the embedding (token equality, or direct), a tied lm_head's cross term,
   LoRA's adapters as two linear layers. In two-pass's second backward under bf16 the hook forms the
   clipped sums itself (dp_clip.c's). */
#include "dp_sgd_impl.h"
#include "dpmem.h"
#include "cuda/kernels_cuda.h"   /* plain C: the GPU twins' declarations, the GPU's flash and tied block rows */

#include <stdio.h>

/* Per-sample norms of one linear layer (or adapter) by the configured method, adding into norm2.
   Under bk it also keeps what the clipped sum needs, whichever is smaller: the per-sample gradients
   (B·IC·OC, when IC ≤ T) or the output gradient G (B·T·OC) and the input A. lm_head's G is the
   model's retained dlogits (free to keep); LoRA's dh (g_owned) is ours: its adapter keeps per-sample
   gradients, so that LoRA never needs the retained activations. Where the per-sample gradients are
   kept their norms come with them, whatever --norm says: a Gram method would spend 2T²(IC+OC)
   more flops on the same number. On the first physical batch of a step dW is still zero, so sample
   0's gradient goes straight into it (one slice less; not for --norm direct, whose B·|θ| is the
   Opacus baseline being measured). a_owned: A is ours to keep and free (LoRA's hs).
   The backward keeps only what the hooks ask for (with or without checkpointing): d->keep_bits says
   which (A where G is copied, G where it is borrowed). */
static int linear_norm(DpSgd *d, DpParamState *p, const char *name, const float *A, const float *G,
                       int B, int T, int din, int dout, float *a_owned, float *g_owned, float *dw) {
    const int bk = d->cfg.clip == DP_CLIP_BK, run = d->computes;
    const KDtype dt = d->dt;
    const int is_head = G == d->s->model.acts.logits;
    /* mixed at physical batch 1 under bk: direct's per-sample gradient is the clipped sum's too (a scaled
       copy, not a second GEMM), so keep it where that costs less than the Gram path (dp_mixed.c: every
       layer of the 1b at T = 4096, lm_head included). Not the tied head: its dW is the embedding's too,
       which sample 0 must not overwrite. */
    const int esize = dt == KDT_BF16 ? 2 : 4;
    const int direct_anyway = d->cfg.norm == DP_NORM_MIXED && bk && B == 1 && !(is_head && d->tied)
                              && !dp_mixed_uses_gram(B, T, din, dout, 1, esize);
    const int borrow = bk && !g_owned && is_head && d->retain && !direct_anyway;
    const int keep_psg = bk && !borrow && (g_owned || din <= T || !d->retain || direct_anyway);
    const int nt = d->gpu || d->kb->nthreads < 1 ? 1 : d->kb->nthreads;   /* CPU threads that each need their own scratch */
    p->kind = HOOK_LINEAR; p->B = B; p->T = T; p->d_in = din; p->d_out = dout;
    p->io = (DpIO){ 0, 0 };
    p->kept = keep_psg && d->cfg.norm != DP_NORM_DIRECT;
    DpNorm method = d->cfg.norm;
    if (method == DP_NORM_MIXED) method = dp_mixed_uses_gram(B, T, din, dout, 0, esize) ? DP_NORM_FLASH : DP_NORM_DIRECT;
    if (keep_psg) method = DP_NORM_DIRECT;
    Widen wd;
    if (dp_widen_open(d, &wd, T, din, dout)) return -1;
    DpKernel k = { .norm2 = d->norm2, .A = A, .G = G, .B = B, .T = T, .din = din, .dout = dout, .dt = dt, .io = &p->io };
    int rc = -1;
    if (method == DP_NORM_DIRECT && (d->cfg.norm == DP_NORM_DIRECT || keep_psg)) {
        /* every sample's gradient at once; kept under bk */
        const size_t per = (size_t)din * dout;
        float *first = p->kept && dw && d->s->micro == 0 ? dw : NULL;
        const int slices = first ? B - 1 : B;
        if (slices > 0 && !(p->psg = dp_alloc_written(d, dp_linear_direct_floats(slices, din, dout) * sizeof(float), "per_sample_grads",
                                                   name, "")))
            goto out;
        p->psg_first = first;
        /* the tied lm_head: h_b is measured with e_b added, at the embedding's hook (tied_embedding) */
        k.op = DPK_LINEAR_DIRECT;
        k.norm2 = d->tied_head ? d->scratch_norm2 : d->norm2;
        k.psg = first ? first : p->psg;            /* sample 0's */
        k.psg_rest = first ? p->psg : p->psg + per;
        if (run) dp_run(d, &wd, &k);
        if (!bk && !d->tied_head) { kbuf_free(d->kb, p->psg); p->psg = NULL; }
    } else if (method == DP_NORM_DIRECT) {
        /* mixed: nt samples' gradients at a time (one per thread), squared and thrown away */
        const int chunk = B < nt ? B : nt;
        float *some = dp_alloc_written(d, dp_linear_direct_floats(chunk, din, dout) * sizeof(float), "per_sample_grads", name, ".stream");
        if (!some) goto out;
        k.op = DPK_LINEAR_STREAMED;
        k.scratch = some;
        for (int b = 0; run && b < B; b += chunk) {   /* samples b .. b+n-1 */
            k.norm2 = d->norm2 + b;
            k.A = kact_at(A, (size_t)b * T * din, dt);
            k.G = kact_at(G, (size_t)b * T * dout, dt);
            k.B = B - b < chunk ? B - b : chunk;
            dp_run(d, &wd, &k);
        }
        kbuf_free(d->kb, some);
        method = DP_NORM_MIXED;                  /* recorded as "direct-streamed" */
    } else if (method == DP_NORM_GHOST) {
        float *gram = dp_alloc_written(d, dp_linear_ghost_floats(B, T) * sizeof(float), "ghost", name, ".gram");
        if (!gram) goto out;
        k.op = DPK_LINEAR_GHOST;
        k.scratch = gram;
        if (run) dp_run(d, &wd, &k);
        kbuf_free(d->kb, gram);
    } else if (d->gpu) {
        /* the GPU's Gram blocks [2, B, R, T] and partial sums: R from a fixed budget (kcuda_flash_rows),
           the same on the plan for cuda; --flash-tile is the CPU's */
        const int R = kcuda_flash_rows(B, T);
        float *tile = dp_alloc_written(d, kcuda_flash_floats(B, T, R) * sizeof(float), "ghost", name, ".tile");
        if (!tile) goto out;
        k.op = DPK_LINEAR_FLASH; k.scratch = tile; k.R = R;
        if (run) dp_run(d, &wd, &k);
        kbuf_free(d->kb, tile);
    } else {
        /* one tile pair per thread, and the row sums */
        float *tile = dp_alloc_floats(d, dp_linear_flash_floats(B, T, d->cfg.flash_tile, nt), "ghost", name, ".tile");
        if (!tile) goto out;
        k.op = DPK_LINEAR_FLASH; k.scratch = tile; k.R = d->cfg.flash_tile; k.nt = nt;
        if (run) dp_run(d, &wd, &k);
        kbuf_free(d->kb, tile);
    }
    p->used = (int)method;
    rc = 0;
out:
    dp_widen_close(d, &wd);
    if (rc) return rc;
    if (bk && !keep_psg) {
        if (borrow) {
            /* lm_head: G is the logits buffer turned into dlogits in place, which the backward keeps
               (GRAD_HOOK_KEEP_G) until llama_release_saved: N x V not copied */
            p->G = (float *)G;
            p->G_borrowed = 1;
            d->keep_bits |= GRAD_HOOK_KEEP_G;
        } else {
            if (!(p->G = dp_alloc_written(d, (size_t)B * T * dout * KDT_SIZE(d->dt), "bk", name, ".G"))) return -1;
            if (copy_ex(d->kb, dt, p->G, G, (size_t)B * T * dout)) return -1;
        }
        p->A = A;
        p->A_owned = a_owned;
        if (!a_owned) d->keep_bits |= GRAD_HOOK_KEEP_A;
    }
    return 0;
}

/* RMSNorm weight: its per-sample gradients psg [B, C] = Σ_t dout·inp·rstd (per_sample_grads/<name>),
   their norms added into norm2. B x C is small: always direct. NULL after the backend's error. */
static float *rmsnorm_psg(DpSgd *d, const GradHookArgs *a, float *norm2) {
    Widen wd;
    if (dp_widen_open(d, &wd, a->T, a->d_in, a->d_out)) return NULL;
    float *psg = dp_alloc_floats(d, (size_t)a->B * a->d_out, "per_sample_grads", a->name, "");
    const DpKernel k = { .op = DPK_RMSNORM, .norm2 = norm2, .psg = psg, .A = a->A, .G = a->G, .rstd = a->rstd,
                         .B = a->B, .T = a->T, .din = a->d_out, .dout = a->d_out, .dt = a->dt };
    if (psg && d->computes) dp_run(d, &wd, &k);
    dp_widen_close(d, &wd);
    return psg;
}

/* Two-pass under bf16: the second backward runs with the first one's loss weights, so its
   activation gradients are those of the first (the same ops: the same bits), and each weight's
   clipped sum Σ_b c_b g_b is formed here, from exactly the values whose norms were measured.
   (A loss weighted by c_b would be rounded to bf16 after the scaling: not c_b times the measured
   gradient.) The RMSNorm weights' per-sample gradients are formed again (B·C each). */
static int pass2_clipped(DpSgd *d, const GradHookArgs *a) {
    DpParamState t = { .kind = a->kind, .B = a->B, .T = a->T, .d_in = a->d_in, .d_out = a->d_out, .used = -1 };
    if (a->kind == HOOK_RMSNORM) {
        if (!(t.psg = rmsnorm_psg(d, a, d->scratch_norm2))) return -1;
        int rc = dp_sum_clipped(d, &t, a->dW, NULL, 0);
        kbuf_free(d->kb, t.psg);
        return rc;
    }
    t.G = (float *)a->G;
    t.A = a->A;
    return dp_sum_clipped(d, &t, a->dW, a->tokens, d->s->model.V);
}

/* A frozen projection with an adapter: hs and dh from x and dy, then the adapter's two halves. */
static int lora_hook(DpSgd *d, int k, const GradHookArgs *a) {
    LoraAdapter *l = &d->lora[k];
    const int B = a->B, T = a->T, N = B * T, r = l->r;
    char name[96];
    float *hs = dp_alloc_act(d, (size_t)N * r, "lora", l->name, ".hs");
    float *dh = dp_alloc_act(d, (size_t)N * r, "lora", l->name, ".dh");
    if (!hs || !dh) { kbuf_free(d->kb, hs); kbuf_free(d->kb, dh); return -1; }
    if (lora_side(l, d->kb, hs, dh, a->A, a->G, N)) return -1;
    if (d->pass == 2) {
        int rc;
        if (!d->pass2_sums) {
            /* two-pass's second backward: dy is already weighted by c_b */
            rc = lora_accumulate(l, d->kb, a->A, a->G, hs, dh, N);
        } else {
            /* bf16 (or a dropped sample): the clipped sums of both halves from this backward's unweighted hs, dy, x, dh */
            DpParamState tb = { .kind = HOOK_LINEAR, .B = B, .T = T, .d_in = r, .d_out = l->OC, .A = hs, .G = (float *)a->G };
            DpParamState ta = { .kind = HOOK_LINEAR, .B = B, .T = T, .d_in = l->IC, .d_out = r, .A = a->A, .G = dh };
            rc = dp_sum_clipped(d, &tb, l->dB, NULL, 0) || dp_sum_clipped(d, &ta, l->dA, NULL, 0) ? -1 : 0;
        }
        kbuf_free(d->kb, dh); kbuf_free(d->kb, hs);
        return rc;
    }
    const int keep = d->cfg.clip == DP_CLIP_BK;
    snprintf(name, sizeof name, "%s.lora_B", l->name);
    if (linear_norm(d, &d->lps[2 * k + 1], name, hs, a->G, B, T, r, l->OC, hs, NULL, l->dB)) return -1;
    snprintf(name, sizeof name, "%s.lora_A", l->name);
    if (linear_norm(d, &d->lps[2 * k], name, a->A, dh, B, T, l->IC, r, NULL, dh, l->dA)) return -1;
    /* kept by bk only where the adapter keeps G and A instead of per-sample gradients */
    if (!keep || d->lps[2 * k + 1].A_owned != hs) kbuf_free(d->kb, hs);
    if (!keep || d->lps[2 * k].G != dh) kbuf_free(d->kb, dh);
    return 0;
}

/* The embedding's norms by token equality (tied: with the cross term from d->tied_u, then freed), and
   under bk a copy of its G. io: where the kernels count their traffic (NULL: not counted). */
static int embedding_equality(DpSgd *d, DpParamState *p, const GradHookArgs *a, int tied, DpIO *io) {
    const int B = a->B, T = a->T, C = a->d_out;
    Widen wd;
    if (dp_widen_open(d, &wd, T, 0, C)) return -1;
    const DpKernel k = { .op = DPK_EMBEDDING, .norm2 = d->norm2, .tokens = a->tokens, .G = a->G, .u = tied ? d->tied_u : NULL,
                         .B = B, .T = T, .dout = C, .dt = a->dt, .io = io };
    if (d->computes) dp_run(d, &wd, &k);
    dp_widen_close(d, &wd);
    if (tied) { kbuf_free(d->kb, d->tied_u); d->tied_u = NULL; }
    p->used = DP_NORM_GHOST;
    if (d->cfg.clip == DP_CLIP_BK) {
        if (!(p->G = dp_alloc_written(d, (size_t)B * T * C * KDT_SIZE(d->dt), "bk", a->name, ".G"))) return -1;
        if (copy_ex(d->kb, a->dt, p->G, a->G, (size_t)B * T * C)) return -1;
    }
    return 0;
}

/* The embedding (not tied): direct (its scattered per-sample gradients, kept under bk) or by token equality. */
static int embedding_norm(DpSgd *d, DpParamState *p, const GradHookArgs *a) {
    const int B = a->B, T = a->T, C = a->d_out, V = d->s->model.V;
    p->kind = a->kind; p->B = B; p->T = T; p->d_in = a->d_in; p->d_out = C;
    if (d->cfg.norm != DP_NORM_DIRECT) {
        p->io.read = (uint64_t)B * T * (C + 1) * 4; p->io.written = (uint64_t)B * 4;
        return embedding_equality(d, p, a, 0, NULL);
    }
    Widen wd;
    if (dp_widen_open(d, &wd, T, 0, C)) return -1;
    if (!(p->psg = dp_alloc_floats(d, (size_t)B * V * C, "per_sample_grads", a->name, ""))) { dp_widen_close(d, &wd); return -1; }
    const DpKernel k = { .op = DPK_EMBEDDING_DIRECT, .norm2 = d->norm2, .psg = p->psg, .tokens = a->tokens, .G = a->G,
                         .B = B, .T = T, .dout = C, .V = V, .dt = a->dt };
    if (d->computes && dp_run(d, &wd, &k)) { dp_widen_close(d, &wd); return -1; }
    /* the CPU kernel writes only the tokens' rows; the GPU path fills the slices whole */
    p->io.read = (uint64_t)B * T * (C + 1) * 4;
    p->io.written = d->cuda ? (uint64_t)B * V * C * 4 : (uint64_t)B * T * C * 4;
    p->used = DP_NORM_DIRECT;
    if (d->cfg.clip != DP_CLIP_BK) { kbuf_free(d->kb, p->psg); p->psg = NULL; }
    dp_widen_close(d, &wd);
    return 0;
}

/* ---- tied embeddings (lm_head = embed_tokens) -----------------------------------------------------
   The tied matrix's per-sample gradient is e_b + h_b (embedding and lm_head parts), so its norm has
   a cross term: ‖e_b + h_b‖² = ‖e_b‖² + ‖h_b‖² + 2⟨e_b, h_b⟩ (kernels/cpu/dp_norms_tied.c). lm_head's
   hook comes first in the backward, the embedding's last; lm_head's part has its own state
   (ps[n_params]) and is clipped into the same dW.
   direct: h_b is materialized at lm_head's hook and kept (whatever --clip), e_b is scattered into it
           at the embedding's hook and the sum is measured: the sum before the norm, as Opacus's
           grad_sample of a shared parameter.
   others: ‖h_b‖² by lm_head's method (flash, ghost, mixed's choice), ‖e_b‖² by token equality, and
           the cross term from u [B, T, C] (ghost/lm_head.tied_u, kept from lm_head's hook to the
           embedding's: one activation's size), its T×T gather (ghost/lm_head.tied.tile) whole for
           ghost (as its Gram matrices), in flash tiles otherwise; on the GPU in block rows of
           kcuda_tied_rows (a fixed budget), whatever the method. */
static int tied_head(DpSgd *d, DpParamState *p, const GradHookArgs *a) {
    const int B = a->B, T = a->T, C = a->d_in, V = a->d_out;
    d->tied_head = d->cfg.norm == DP_NORM_DIRECT;
    int rc = linear_norm(d, p, a->name, a->A, a->G, B, T, C, V, NULL, NULL, a->dW);
    d->tied_head = 0;
    if (rc || d->cfg.norm == DP_NORM_DIRECT) return rc;
    if (!(d->tied_u = dp_alloc_floats(d, (size_t)B * T * C, "ghost", a->name, ".tied_u"))) return -1;
    DpKernel k = { .op = DPK_TIED_U, .u = d->tied_u, .tokens = d->s->model.tokens, .A = a->A, .G = a->G,
                   .B = B, .T = T, .din = C, .dout = V, .dt = d->dt, .io = &p->io };
    if (d->gpu) {                                /* D's block rows, of dlogits' type (kcuda_tied_rows) */
        k.R = kcuda_tied_rows(B, T, d->dt);
        if (!(k.scratch = dp_alloc_floats(d, kcuda_tied_cross_floats(B, T, k.R, d->dt), "ghost", a->name, ".tied.tile")))
            return -1;
        if (d->cuda && d->computes) dp_run(d, NULL, &k);
        kbuf_free(d->kb, k.scratch);
        return 0;
    }
    k.nt = d->kb->nthreads < 1 ? 1 : d->kb->nthreads;
    k.R = d->cfg.norm == DP_NORM_GHOST ? T : d->cfg.flash_tile;
    k.scratch = dp_alloc_floats(d, dp_tied_cross_floats(T, k.R, k.nt), "ghost", a->name, ".tied.tile");
    Widen wd;
    if (!k.scratch || dp_widen_open(d, &wd, T, C, V)) { kbuf_free(d->kb, k.scratch); return -1; }
    if (d->computes) dp_run(d, &wd, &k);
    dp_widen_close(d, &wd);
    kbuf_free(d->kb, k.scratch);
    return 0;
}

/* The embedding's hook of a tied matrix: the rest of the norm (see tied_head). */
static int tied_embedding(DpSgd *d, DpParamState *p, const GradHookArgs *a) {
    const int B = a->B, T = a->T, C = a->d_out, V = d->s->model.V;
    const KDtype dt = a->dt;
    DpParamState *h = &d->ps[d->n_params];
    p->kind = a->kind; p->B = B; p->T = T; p->d_in = a->d_in; p->d_out = C;
    if (d->cfg.norm == DP_NORM_DIRECT) {
        /* e_b scattered into h_b by the backend's own embedding backward, then ‖e_b + h_b‖² */
        if (d->computes) {
            for (int b = 0; b < B; b++)
                if (embedding_backward_ex(d->kb, dt, h->psg + (size_t)b * V * C, a->tokens + (size_t)b * T,
                                          kact_at(a->G, (size_t)b * T * C, dt), T, C, V)) return -1;
            const DpKernel k = { .op = DPK_PSG_NORMS, .norm2 = d->norm2, .psg = h->psg, .B = B, .per = (size_t)V * C };
            dp_run(d, NULL, &k);
        }
        p->io.read = (uint64_t)B * T * (C + 1) * 4 + (uint64_t)B * V * C * 8; p->io.written = (uint64_t)B * V * C * 4;
        p->used = DP_NORM_DIRECT;
        if (d->cfg.clip != DP_CLIP_BK) { kbuf_free(d->kb, h->psg); h->psg = NULL; }
        return 0;
    }
    return embedding_equality(d, p, a, 1, &p->io);
}

static int weight_grad(DpSgd *d, const GradHookArgs *a);

/* The hook's work is the phase "clip" (the loop's table shows it apart from the backward around it). */
int dp_sgd_weight_grad(void *user, const GradHookArgs *a) {
    DpSgd *d = user;
    const uint64_t t0 = dpmem_now_ns();
    int rc;
    { DPMEM_SCOPE("clip"); rc = weight_grad(d, a); }
    if (d->s) train_phase_add(d->s, TRAIN_PH_CLIP, t0);
    return rc;
}

static int weight_grad(DpSgd *d, const GradHookArgs *a) {
    int idx = a->param_index;
    if (idx < 0 || idx >= d->n_params) return -1;
    if (d->observe) d->observe(d->observe_user, a);
    if (!d->s->model.params[idx].trainable) {       /* frozen: only adapters have work here (--zero 2: a trainable
                                                       weight's dW is NULL outside its unit's formation) */
        int k = d->lora_of ? d->lora_of[idx] : -1;
        if (k < 0) return GRAD_HOOK_SKIP_DW;
        return lora_hook(d, k, a) ? -1 : GRAD_HOOK_SKIP_DW;
    }
    if (d->pass == 2) {
        if (!d->pass2_sums) return 0;               /* the weighted backward forms dW itself */
        return pass2_clipped(d, a) ? -1 : GRAD_HOOK_SKIP_DW;
    }
    DpParamState *p = &d->ps[idx];
    if (d->tied && d->s->model.params[idx].which == W_EMBED_TOKENS) {
        if (a->kind == HOOK_LINEAR) {            /* lm_head's part of the tied matrix */
            d->keep_bits = 0;
            if (tied_head(d, &d->ps[d->n_params], a)) return -1;
            return GRAD_HOOK_SKIP_DW | d->keep_bits;
        }
        return tied_embedding(d, p, a) ? -1 : GRAD_HOOK_SKIP_DW;
    }
    const int B = a->B, T = a->T, din = a->d_in, dout = a->d_out, bk = d->cfg.clip == DP_CLIP_BK;
    if (a->kind == HOOK_RMSNORM) {
        p->kind = a->kind; p->B = B; p->T = T; p->d_in = din; p->d_out = dout;
        if (!(p->psg = rmsnorm_psg(d, a, d->norm2))) return -1;   /* kept for the clipped sum under bk */
        p->io.read = (uint64_t)B * T * (2 * dout + 1) * 4; p->io.written = (uint64_t)B * (dout + 1) * 4;
        p->used = DP_NORM_DIRECT;
        if (!bk) { kbuf_free(d->kb, p->psg); p->psg = NULL; }
        return GRAD_HOOK_SKIP_DW;
    }
    if (a->kind == HOOK_EMBEDDING) return embedding_norm(d, p, a) ? -1 : GRAD_HOOK_SKIP_DW;
    d->keep_bits = 0;
    if (linear_norm(d, p, a->name, a->A, a->G, B, T, din, dout, NULL, NULL, a->dW)) return -1;
    return GRAD_HOOK_SKIP_DW | d->keep_bits;
}
