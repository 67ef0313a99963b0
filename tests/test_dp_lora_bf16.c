/* test_dp_lora_bf16.c — LoRA under --precision bf16: the frozen base kept in bf16 alone, the adapters
   unmerged beside it (samples/llama/lora.h, llama.h), through DP-SGD (samples/dp/dp_sgd.c), on random
   tiny GQA LLaMAs (untied and tied), CPU backend.

   1. Memory, exact: params = 2 bytes per frozen GEMM weight and embedding entry (no fp32 master; the
      lookup gathers bf16 rows), 4 per RMSNorm weight; their fp32 slots are NULL; grads and optimizer
      hold the adapters alone.
   2. --save merges, --init-from loads into bf16: the saved fp32 tensor of a target is widen(W₀ bf16) + s·B·A (1e-6 of the largest
      entry, float rounding of the double sum), a non-target frozen weight is its bf16 value exactly, the
      norm tensors their fp32 values bit for bit; loaded into another bf16 LoRA model, each bf16-only
      tensor is the saved value rounded to nearest even. B is set random first (neither term zero).
   3. Against an fp32 reference holding those saved (merged) weights, each sample run alone: its
      per-sample adapter gradients dL/dA = s·Bᵀ dL/dW, dL/dB = s·dL/dW Aᵀ (as test_dp_lora.c) give the
      DP run's per-sample norms, its clipped sum, and its loss to bf16 tolerance: the forward's
      s·(x Aᵀ)Bᵀ and the backward's dx += s·(dy B)A are what make the two models the same function
      (observed: loss 2e-5, norm² 2e-2, clipped sum 1e-2 relative; without the forward addition the
      loss is off by 8e-4 and norm² by 2.4 and more, without the backward one norm² by 0.6).
   4. The adapters' step changes no bit of the bf16 base (no re-merge) and zeroes their gradients.
   Not here: merged-form (fp32) LoRA (test_dp_lora.c), plan = measured (test_suite_plan.sh). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"
#include "llama/checkpoint.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

#include "test_dp_rig.h"

/* Tolerances of a bf16 model against the fp32 one with the same (bf16-valued) weights: activations
   rounded to 8 bits of mantissa at every op of a 2-block model. */
#define TOL_NORM2 5e-2
#define TOL_GRAD 5e-2
#define TOL_LOSS 2e-4

static float bf16_value(const float *buf16, size_t i) {
    uint16_t h;
    memcpy(&h, (const char *)buf16 + 2 * i, 2);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 → bf16, round to nearest even (finite values), as a float */
static float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void run_case(const char *root, const LlamaConfig *mc0, int B, int T, unsigned targets, DpNorm norm, DpClip clip,
                     uint64_t seed) {
    LlamaConfig mc = *mc0;
    mc.precision = 1;
    int *tok = xcalloc((size_t)B * T, sizeof(int)), *tgt = xcalloc((size_t)B * T, sizeof(int));
    uint64_t st = seed * 7919 + 5;
    for (int i = 0; i < B * T; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int)((st >> 33) % (uint64_t)mc.vocab_size);
        tgt[i] = (int)((st >> 13) % (uint64_t)mc.vocab_size);
    }
    char what[128];
    snprintf(what, sizeof what, "bf16 LoRA %s%s %s+%s seed %llu", mc.tie_embeddings ? "tied " : "",
             targets == (LORA_Q | LORA_V) ? "q,v" : targets == (LORA_Q | LORA_V | LORA_DOWN) ? "q,v,down" : "all", dp_norm_name(norm), dp_clip_name(clip), (unsigned long long)seed);
    Rig r;
    DpConfig dp;
    DpSgd d;
    TrainStrategy strat;
    rig_config(&r.cfg, &mc, B, T, "adamw");
    dp_config_defaults(&dp, norm, clip);
    dp.lora_rank = 3; dp.lora_alpha = 5; dp.lora_targets = targets; dp.noise_multiplier = 0; dp.flash_tile = 8;
    if (dp_sgd_prepare(&d, &strat, &dp, &r.cfg, "lora-bf16-test")) { printf("FAIL: prepare\n"); exit(1); }
    size_t params0 = dpmem_live_bytes("params"), grads0 = dpmem_live_bytes("grads"), opt0 = dpmem_live_bytes("optimizer");
    rig_open(&r, seed, strat.frozen);
    if (dp_sgd_init(&d, &r.s)) { printf("FAIL: init: %s\n", kbackend_error(&r.kb)); exit(1); }
    LlamaModel *m = &r.s.model;
    CHECK(d.n_lora > 0 && m->lora != NULL, "%s: no unmerged adapters", what);

    /* 1. memory */
    size_t want_params = 0, PL = dp_sgd_lora_params(&d);
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        CHECK(!p->trainable, "%s: %s is trainable", what, p->name);
        if (p->kind != HOOK_RMSNORM) {   /* GEMM weights and the embedding table */
            CHECK(llama_bf16_only(m, p), "%s: frozen %s must be kept in bf16 alone", what, p->name);
            want_params += 2 * p->numel;
            CHECK(*llama_tensor(&m->w, p) == NULL && *llama_tensor(&m->w16, p) != NULL,
                  "%s: frozen %s must be bf16 alone (fp32 %p, bf16 %p)", what, p->name, (void *)*llama_tensor(&m->w, p),
                  (void *)*llama_tensor(&m->w16, p));
        } else {
            want_params += 4 * p->numel;
        }
    }
    CHECK(dpmem_live_bytes("params") - params0 == want_params, "%s: params %zu bytes, want %zu (2 per frozen GEMM weight)",
          what, dpmem_live_bytes("params") - params0, want_params);
    CHECK(dpmem_live_bytes("grads") - grads0 == PL * 4 && dpmem_live_bytes("optimizer") - opt0 == PL * 8,
          "%s: grads %zu, optimizer %zu: want 4 and 8 bytes per adapter parameter (%zu)", what,
          dpmem_live_bytes("grads") - grads0, dpmem_live_bytes("optimizer") - opt0, PL);

    /* B random (A is random already): neither the forward's nor the backward's addition is zero */
    for (int k = 0; k < d.n_lora; k++)
        for (size_t i = 0; i < (size_t)d.lora[k].OC * d.lora[k].r; i++)
            d.lora[k].B[i] = 0.3f * (float)((int)((i * 2654435761u + k) % 97) - 48) / 48.0f;

    /* 2. --save merges into the saved tensors only */
    char dir[512], err[CKPT_ERR];
    snprintf(dir, sizeof dir, "%s/%s%u-%d%d-%llu", root, mc.tie_embeddings ? "t" : "u", targets, (int)norm, (int)clip,
             (unsigned long long)seed);
    CHECK(ckpt_save(m, dir, ST_F32, NULL, err, sizeof err) == 0, "%s: save: %s", what, err);
    Rig ref;
    LlamaConfig fc = mc0[0];
    fc.precision = 0;
    rig_config(&ref.cfg, &fc, 1, T, "adamw");
    rig_open(&ref, seed + 100, NULL);     /* another seed: every weight must come from the checkpoint */
    LlamaModel *rm = &ref.s.model;
    CHECK(ckpt_load(rm, dir, err, sizeof err) == 0, "%s: load: %s", what, err);
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        const float *got = *llama_tensor(&rm->w, &rm->params[i]);
        if (!llama_bf16_only(m, p)) {
            CHECK(!memcmp(got, *llama_tensor(&m->w, p), p->numel * 4), "%s: saved %s differs from the model's", what, p->name);
            continue;
        }
        const float *w16 = *llama_tensor(&m->w16, p);
        const LoraAdapter *l = m->lora[i];
        double worst = 0, wmax = 0;
        for (int o = 0; o < p->rows; o++)
            for (int c = 0; c < p->cols; c++) {
                double w = bf16_value(w16, (size_t)o * p->cols + c), ba = 0;
                for (int j = 0; l && j < l->r; j++) ba += (double)l->B[o * l->r + j] * l->A[j * l->IC + c];
                if (l) w += l->scale * ba;
                worst = fmax(worst, fabs(got[(size_t)o * p->cols + c] - w));
                wmax = fmax(wmax, fabs(w));
            }
        CHECK(l ? worst <= 1e-6 * wmax : worst == 0, "%s: saved %s is off W0%s by %.3g (largest %.3g)", what, p->name,
              l ? " + sBA" : "", worst, wmax);
    }

    /* --init-from under bf16 LoRA: a checkpoint loads straight into the bf16-only tensors, each the
       round-to-nearest-even of the saved fp32 value (the norms: those values) */
    {
        Rig back;
        rig_config(&back.cfg, &mc, B, T, "adamw");
        rig_open(&back, seed + 200, strat.frozen);
        LlamaModel *bm = &back.s.model;
        CHECK(ckpt_load(bm, dir, err, sizeof err) == 0, "%s: bf16 load: %s", what, err);
        for (int i = 0; i < bm->n_params; i++) {
            const ParamInfo *p = &bm->params[i];
            const float *saved = *llama_tensor(&rm->w, &rm->params[i]);
            int same = 1;
            if (!llama_bf16_only(bm, p)) same = !memcmp(*llama_tensor(&bm->w, p), saved, p->numel * 4);
            else
                for (size_t k = 0; same && k < p->numel; k++) same = bf16_value(*llama_tensor(&bm->w16, p), k) == bf16_round(saved[k]);
            CHECK(same, "%s: %s loaded under bf16 is not the checkpoint's value%s", what, p->name,
                  llama_bf16_only(bm, p) ? " rounded to bf16" : "");
        }
        rig_close(&back);
    }

    /* 3. per-sample references from the fp32 model holding the merged weights */
    double *gref = xcalloc((size_t)B * PL, 8), *rn = xcalloc(B, 8), ref_loss = 0;
    for (int b = 0; b < B; b++) {
        llama_zero_grad(rm);
        rig_rows(&ref, tok, tgt, b);
        if (train_forward(&ref.s) || train_backward_scaled(&ref.s, NULL, 1.0f / llama_loss_positions(rm))) {
            printf("FAIL: reference\n"); exit(1);
        }
        ref_loss += ref.s.loss / B;
        size_t off = 0;
        for (int k = 0; k < d.n_lora; k++) {
            LoraAdapter *l = &d.lora[k];
            const float *gW = *llama_tensor(&rm->dw, &rm->params[l->param_index]);
            double *gA = gref + (size_t)b * PL + off, *gB = gA + (size_t)l->r * l->IC;
            for (int j = 0; j < l->r; j++)
                for (int i = 0; i < l->IC; i++) {
                    double acc = 0;
                    for (int o = 0; o < l->OC; o++) acc += (double)l->B[o * l->r + j] * gW[(size_t)o * l->IC + i];
                    gA[j * l->IC + i] = l->scale * acc;
                }
            for (int o = 0; o < l->OC; o++)
                for (int j = 0; j < l->r; j++) {
                    double acc = 0;
                    for (int i = 0; i < l->IC; i++) acc += (double)gW[(size_t)o * l->IC + i] * l->A[j * l->IC + i];
                    gB[o * l->r + j] = l->scale * acc;
                }
            off += lora_param_count(l);
        }
        rn[b] = 0;
        for (size_t k = 0; k < PL; k++) rn[b] += gref[(size_t)b * PL + k] * gref[(size_t)b * PL + k];
    }
    rig_close(&ref);
    double med = 0;
    for (int b = 0; b < B; b++) med += sqrt(rn[b]) / B;
    d.cfg.max_grad_norm = med;   /* the mean norm: some samples clip */
    double *want = xcalloc(PL, 8);
    for (int b = 0; b < B; b++) {
        double c = fmin(1.0, med / (sqrt(rn[b]) + 1e-6));
        for (size_t k = 0; k < PL; k++) want[k] += c * gref[(size_t)b * PL + k];
    }
    /* the base's bytes before the physical batch and the step */
    size_t base_bytes = 0;
    for (int i = 0; i < m->n_params; i++) if (llama_bf16_only(m, &m->params[i])) base_bytes += 2 * m->params[i].numel;
    unsigned char *base = xcalloc(base_bytes, 1);
    for (int i = 0, off = 0; i < m->n_params; i++)
        if (llama_bf16_only(m, &m->params[i])) {
            memcpy(base + off, *llama_tensor(&m->w16, &m->params[i]), 2 * m->params[i].numel);
            off += 2 * (int)m->params[i].numel;
        }
    rig_rows(&r, tok, tgt, 0);
    if (dp_sgd_physical_batch(&d, &r.s)) { printf("FAIL: physical batch: %s\n", kbackend_error(&r.kb)); exit(1); }
    CHECK(fabs(r.s.loss - ref_loss) <= TOL_LOSS * ref_loss, "%s: loss %.8g, the fp32 merged model's %.8g", what, r.s.loss, ref_loss);
    double worst_n = 0;
    for (int b = 0; b < B; b++) worst_n = fmax(worst_n, fabs(d.norm2[b] - rn[b]) / rn[b]);
    CHECK(worst_n <= TOL_NORM2, "%s: per-sample norm² off the explicit per-sample gradients' by %.3g (relative)", what, worst_n);
    double e = 0, scale = 0;
    size_t off = 0;
    for (int k = 0; k < d.n_lora; k++) {
        LoraAdapter *l = &d.lora[k];
        for (size_t i = 0; i < (size_t)l->r * l->IC; i++) { e = fmax(e, fabs(l->dA[i] - want[off + i])); scale = fmax(scale, fabs(want[off + i])); }
        off += (size_t)l->r * l->IC;
        for (size_t i = 0; i < (size_t)l->OC * l->r; i++) { e = fmax(e, fabs(l->dB[i] - want[off + i])); scale = fmax(scale, fabs(want[off + i])); }
        off += (size_t)l->OC * l->r;
    }
    CHECK(e <= TOL_GRAD * scale, "%s: clipped adapter gradient off by %.3g (scale %.3g)", what, e, scale);
    if (getenv("LORA_BF16_VERBOSE")) printf("%s: loss %.3g norm2 %.3g grad %.3g (relative)\n", what,
                                            fabs(r.s.loss - ref_loss) / ref_loss, worst_n, e / scale);

    /* 4. the step: adapters move, the bf16 base (embedding included) does not */
    r.s.step = 0; r.s.lr = 1e-2f;
    float a0 = d.lora[0].A[0];
    if (dp_sgd_before_update(&d, &r.s)) { printf("FAIL: before_update: %s\n", kbackend_error(&r.kb)); exit(1); }
    CHECK(d.lora[0].A[0] != a0, "%s: the adapters did not move", what);
    int same = 1;
    for (int i = 0, o = 0; i < m->n_params; i++)
        if (llama_bf16_only(m, &m->params[i])) {
            same &= !memcmp(base + o, *llama_tensor(&m->w16, &m->params[i]), 2 * m->params[i].numel);
            same &= *llama_tensor(&m->w, &m->params[i]) == NULL;
            o += 2 * (int)m->params[i].numel;
        }
    CHECK(same, "%s: the bf16 base changed (a merge into bf16?)", what);
    size_t nonzero = 0;
    for (int k = 0; k < d.n_lora; k++)
        for (size_t i = 0; i < (size_t)d.lora[k].r * d.lora[k].IC; i++) nonzero += d.lora[k].dA[i] != 0;
    CHECK(nonzero == 0, "%s: adapter gradients must be zeroed after the step", what);
    dp_sgd_destroy(&d, &r.s);
    CHECK(r.s.model.lora == NULL, "%s: the model still points at the freed adapters", what);
    rig_close(&r);
    free(base); free(tok); free(tgt); free(gref); free(rn); free(want);
}

int main(void) {
    char root[] = "/tmp/test_dp_lora_bf16_XXXXXX";
    if (!mkdtemp(root)) { printf("FAIL: mkdtemp\n"); return 1; }
    LlamaConfig mc = { .preset = "test", .vocab_size = 53, .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                       .ffn_dim = 48, .tie_embeddings = 0, .rope_theta = 10000.0f, .norm_eps = 1e-6f };
    const unsigned all = LORA_Q | LORA_K | LORA_V | LORA_O | LORA_GATE | LORA_UP | LORA_DOWN;
    for (int norm = 0; norm < 4; norm++)
        for (int clip = 0; clip < 2; clip++) {
            run_case(root, &mc, 3, 17, LORA_Q | LORA_V, (DpNorm)norm, (DpClip)clip, 1);
            run_case(root, &mc, 3, 33, all, (DpNorm)norm, (DpClip)clip, 2);
        }
    LlamaConfig tied = mc;
    tied.tie_embeddings = 1;
    for (int clip = 0; clip < 2; clip++) run_case(root, &tied, 3, 17, LORA_Q | LORA_V | LORA_DOWN, DP_NORM_GHOST, (DpClip)clip, 3);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("note: could not remove %s\n", root);
    if (failures) { printf("%d of %d checks failed\n", failures, checks); return 1; }
    printf("dp lora bf16: %d checks passed\n", checks);
    return 0;
}
