/* test_dp_lora.c — DP-SGD on LoRA adapters (samples/llama/lora.c through samples/dp/dp_sgd.c) on a random
   tiny GQA LLaMA, against an independent reference.

   The reference: with W = W₀ + s·B·A merged, the adapters' gradients are exactly
       dL/dA = s·Bᵀ (dL/dW),   dL/dB = s·(dL/dW) Aᵀ
   where dL/dW is the ordinary gradient of the merged weight. So each sample is run ALONE through a
   plain model (everything trainable) holding the merged weights, its dL/dW of every target is
   turned into the adapters' per-sample gradients in double, and their norms and the clipped sum
   are compared with what the DP run left in dA, dB (B is set random, so neither factor is zero).
   Tolerance as in test_dp_train.c (1e-5 relative; observed differences are ~1e-7).

   Also: targets q,v and then all seven projections, with GQA (k, v narrower than q); direct,
   ghost, flash and mixed norms with twopass and bk; memory: the frozen base has no grads and no
   optimizer bytes (grads = 4·|adapters|, optimizer = 8·|adapters| with AdamW), direct's
   per_sample_grads are B·|adapters|·4; after the adapters' optimizer step the weight holds
   W₀ + s·B'A' (the re-merge), W₀ recovered to float rounding. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

#include "test_dp_rig.h"

static void run_case(const LlamaConfig *mc, int B, int T, unsigned targets, DpNorm norm, DpClip clip, uint64_t seed) {
    int *tok = xcalloc((size_t)B * T, sizeof(int)), *tgt = xcalloc((size_t)B * T, sizeof(int));
    uint64_t st = seed * 7919 + 5;
    for (int i = 0; i < B * T; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int)((st >> 33) % (uint64_t)mc->vocab_size);
        tgt[i] = (int)((st >> 13) % (uint64_t)mc->vocab_size);
    }
    /* classify: a label per row, rows right-padded; the score head trains whole beside the adapters
       (PEFT's modules_to_save): its per-sample gradient joins the adapters' in the norm */
    const int cls = mc->task == LLAMA_TASK_CLASSIFY;
    for (int b = 0; cls && b < B; b++)
        for (int t = 0; t < T; t++) {
            tgt[b * T + t] = tgt[b * T] % mc->num_labels;
            if (t >= T - 3 * b) tok[b * T + t] = mc->pad_id;
        }
    /* the DP run's rig: adapters built, B set random and merged */
    Rig r;
    DpConfig dp;
    DpSgd d;
    TrainStrategy strat;
    rig_config(&r.cfg, mc, B, T, "adamw");
    dp_config_defaults(&dp, norm, clip);
    dp.lora_rank = 3; dp.lora_alpha = 5; dp.lora_targets = targets; dp.noise_multiplier = 0; dp.flash_tile = 8;
    if (dp_sgd_prepare(&d, &strat, &dp, &r.cfg, "lora-test")) { printf("FAIL: prepare\n"); exit(1); }
    size_t grads0 = dpmem_live_bytes("grads"), opt0 = dpmem_live_bytes("optimizer"), psg0 = dpmem_live_bytes("per_sample_grads");
    rig_open(&r, seed, strat.frozen);
    if (dp_sgd_init(&d, &r.s)) { printf("FAIL: init: %s\n", kbackend_error(&r.kb)); exit(1); }
    LlamaModel *m = &r.s.model;
    const int score = cls ? m->n_params - 1 : -1;      /* the score head's index (the last tensor) */
    const size_t PS = cls ? m->params[score].numel : 0;
    CHECK(!cls || (m->params[score].trainable && !strcmp(m->params[score].name, "score")), "classify: score must be trainable");
    const size_t PL = dp_sgd_lora_params(&d) + PS;   /* the adapters, then the score head */
    CHECK(d.n_lora > 0, "no adapters built");
    size_t pos = 0;
    float **W0 = xcalloc(d.n_lora, sizeof *W0);
    for (int k = 0; k < d.n_lora; k++) {
        LoraAdapter *l = &d.lora[k];
        float *W = *llama_tensor(&m->w, &m->params[l->param_index]);
        size_t nw = (size_t)l->OC * l->IC;
        W0[k] = xcalloc(nw, sizeof(float));
        memcpy(W0[k], W, nw * sizeof(float));
        for (size_t i = 0; i < (size_t)l->OC * l->r; i++) l->B[i] = 0.05f * (float)((int)((i * 2654435761u + k) % 97) - 48) / 48.0f;
        lora_merge(l, &r.kb, W, 1.0f);
        pos += lora_param_count(l);
    }
    CHECK(pos + PS == PL, "adapter count");
    /* per-sample references from a plain model holding the merged weights */
    double *gref = xcalloc((size_t)B * PL, 8), *rn = xcalloc(B, 8);
    {
        Rig ref;
        rig_config(&ref.cfg, mc, 1, T, "adamw");
        rig_open(&ref, seed, NULL);
        for (int k = 0; k < d.n_lora; k++) {
            LoraAdapter *l = &d.lora[k];
            const ParamInfo *p = &m->params[l->param_index];
            memcpy(*llama_tensor(&ref.s.model.w, &ref.s.model.params[l->param_index]), *llama_tensor(&m->w, p),
                   p->numel * sizeof(float));
        }
        for (int b = 0; b < B; b++) {
            llama_zero_grad(&ref.s.model);
            rig_rows(&ref, tok, tgt, b);
            if (train_forward(&ref.s) || train_backward_scaled(&ref.s, NULL, 1.0f / llama_loss_positions(&ref.s.model))) {
                printf("FAIL: reference\n"); exit(1);
            }
            size_t off = 0;
            for (int k = 0; k < d.n_lora; k++) {
                LoraAdapter *l = &d.lora[k];
                const float *gW = *llama_tensor(&ref.s.model.dw, &ref.s.model.params[l->param_index]);
                double *gA = gref + (size_t)b * PL + off, *gB = gA + (size_t)l->r * l->IC;
                for (int j = 0; j < l->r; j++)            /* gA[j][i] = s Σ_o B[o][j] gW[o][i] */
                    for (int i = 0; i < l->IC; i++) {
                        double acc = 0;
                        for (int o = 0; o < l->OC; o++) acc += (double)l->B[o * l->r + j] * gW[(size_t)o * l->IC + i];
                        gA[j * l->IC + i] = l->scale * acc;
                    }
                for (int o = 0; o < l->OC; o++)           /* gB[o][j] = s Σ_i gW[o][i] A[j][i] */
                    for (int j = 0; j < l->r; j++) {
                        double acc = 0;
                        for (int i = 0; i < l->IC; i++) acc += (double)gW[(size_t)o * l->IC + i] * l->A[j * l->IC + i];
                        gB[o * l->r + j] = l->scale * acc;
                    }
                off += lora_param_count(l);
            }
            if (cls) {   /* the reference model starts from the same seed: score's weights are the DP run's */
                const float *gS = *llama_tensor(&ref.s.model.dw, &ref.s.model.params[score]);
                for (size_t i = 0; i < PS; i++) gref[(size_t)b * PL + off + i] = gS[i];
            }
            rn[b] = 0;
            for (size_t k = 0; k < PL; k++) rn[b] += gref[(size_t)b * PL + k] * gref[(size_t)b * PL + k];
        }
        rig_close(&ref);
    }
    dpmem_reset_peak();               /* the reference model is gone: peaks from the DP run alone */
    double med = 0;
    for (int b = 0; b < B; b++) med += sqrt(rn[b]) / B;
    dp.max_grad_norm = med;   /* the mean norm: some samples clip */
    d.cfg.max_grad_norm = med;
    double *want = xcalloc(PL, 8);
    for (int b = 0; b < B; b++) {
        double c = fmin(1.0, med / (sqrt(rn[b]) + 1e-6));
        for (size_t k = 0; k < PL; k++) want[k] += c * gref[(size_t)b * PL + k];
    }
    /* the DP physical batch */
    rig_rows(&r, tok, tgt, 0);
    if (dp_sgd_physical_batch(&d, &r.s)) { printf("FAIL: physical batch: %s\n", kbackend_error(&r.kb)); exit(1); }
    char what[96];
    snprintf(what, sizeof what, "LoRA %s %s+%s seed %llu", targets == (LORA_Q | LORA_V) ? "q,v" : "all",
             dp_norm_name(norm), dp_clip_name(clip), (unsigned long long)seed);
    for (int b = 0; b < B; b++)
        CHECK(fabs(d.norm2[b] - rn[b]) <= 1e-5 * rn[b], "%s: norm² of sample %d %.8g, alone %.8g", what, b, d.norm2[b], rn[b]);
    double e = 0, scale = 0;
    size_t off = 0;
    for (int k = 0; k < d.n_lora; k++) {
        LoraAdapter *l = &d.lora[k];
        for (size_t i = 0; i < (size_t)l->r * l->IC; i++) { e = fmax(e, fabs(l->dA[i] - want[off + i])); scale = fmax(scale, fabs(want[off + i])); }
        off += (size_t)l->r * l->IC;
        for (size_t i = 0; i < (size_t)l->OC * l->r; i++) { e = fmax(e, fabs(l->dB[i] - want[off + i])); scale = fmax(scale, fabs(want[off + i])); }
        off += (size_t)l->OC * l->r;
    }
    if (cls) {
        const float *dS = *llama_tensor(&m->dw, &m->params[score]);
        for (size_t i = 0; i < PS; i++) { e = fmax(e, fabs(dS[i] - want[off + i])); scale = fmax(scale, fabs(want[off + i])); }
    }
    CHECK(e <= 1e-5 * scale, "%s: clipped adapter gradient off by %.3g (scale %.3g)", what, e, scale);
    /* memory: nothing for the frozen base */
    CHECK(dpmem_peak_bytes("grads") - grads0 == PL * 4, "%s: grads peak %zu, want 4*|adapters| = %zu", what,
          dpmem_peak_bytes("grads") - grads0, PL * 4);
    CHECK(dpmem_peak_bytes("optimizer") - opt0 == PL * 8, "%s: optimizer peak %zu, want 8*|adapters| = %zu", what,
          dpmem_peak_bytes("optimizer") - opt0, PL * 8);
    if (norm == DP_NORM_DIRECT && clip == DP_CLIP_BK)
        CHECK(dpmem_peak_bytes("per_sample_grads") - psg0 == (size_t)B * PL * 4, "%s: per_sample_grads peak %zu, want %zu",
              what, dpmem_peak_bytes("per_sample_grads") - psg0, (size_t)B * PL * 4);
    for (int i = 0; i < m->n_params; i++)
        if (i != score) CHECK(*llama_tensor(&m->dw, &m->params[i]) == NULL && *llama_tensor(&m->m, &m->params[i]) == NULL,
              "%s: frozen %s has a gradient or optimizer buffer", what, m->params[i].name);
    /* the adapters' step and the re-merge: W - s B'A' == W0 to rounding */
    r.s.step = 0; r.s.lr = 1e-2f;
    if (dp_sgd_before_update(&d, &r.s)) { printf("FAIL: before_update: %s\n", kbackend_error(&r.kb)); exit(1); }
    for (int k = 0; k < d.n_lora; k++) {
        LoraAdapter *l = &d.lora[k];
        const float *W = *llama_tensor(&m->w, &m->params[l->param_index]);
        double worst = 0, wmax = 0;
        for (int o = 0; o < l->OC; o++)
            for (int i = 0; i < l->IC; i++) {
                double ba = 0;
                for (int j = 0; j < l->r; j++) ba += (double)l->B[o * l->r + j] * l->A[j * l->IC + i];
                double w0 = W[(size_t)o * l->IC + i] - l->scale * ba;
                worst = fmax(worst, fabs(w0 - W0[k][(size_t)o * l->IC + i]));
                wmax = fmax(wmax, fabs(W0[k][(size_t)o * l->IC + i]));
            }
        CHECK(worst <= 1e-6 * (wmax + 1), "%s: %s after the step: W - sBA differs from W0 by %.3g", what, l->name, worst);
        size_t nonzero = 0;
        for (size_t i = 0; i < (size_t)l->r * l->IC; i++) nonzero += l->dA[i] != 0;
        CHECK(nonzero == 0, "%s: adapter gradients must be zeroed after the step", what);
    }
    const int n_lora = d.n_lora;
    dp_sgd_destroy(&d, &r.s);
    for (int k = 0; k < n_lora; k++) free(W0[k]);
    free(W0);
    rig_close(&r);
    free(tok); free(tgt); free(gref); free(rn); free(want);
}

int main(void) {
    LlamaConfig mc = { .preset = "test", .vocab_size = 53, .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                       .ffn_dim = 48, .tie_embeddings = 0, .rope_theta = 10000.0f, .norm_eps = 1e-6f };
    const unsigned all = LORA_Q | LORA_K | LORA_V | LORA_O | LORA_GATE | LORA_UP | LORA_DOWN;
    for (uint64_t seed = 1; seed <= 2; seed++)
        for (int norm = 0; norm < 4; norm++)
            for (int clip = 0; clip < 2; clip++) {
                run_case(&mc, 3, 17, LORA_Q | LORA_V, (DpNorm)norm, (DpClip)clip, seed);
                run_case(&mc, 3, 33, all, (DpNorm)norm, (DpClip)clip, seed);
            }
    /* tied embeddings (Llama-3.2's layout): the tied matrix is frozen with the base, the adapters
       train as usual */
    LlamaConfig tied = mc;
    tied.tie_embeddings = 1;
    for (int norm = 0; norm < 4; norm++)
        for (int clip = 0; clip < 2; clip++) run_case(&tied, 3, 17, LORA_Q | LORA_V | LORA_DOWN, (DpNorm)norm, (DpClip)clip, 3);
    /* sequence classification: the score head trainable beside the adapters, padded rows */
    LlamaConfig cls = tied;
    cls.task = LLAMA_TASK_CLASSIFY; cls.num_labels = 3; cls.pad_id = 0;
    for (int norm = 0; norm < 4; norm++)
        for (int clip = 0; clip < 2; clip++) run_case(&cls, 3, 17, LORA_Q | LORA_V, (DpNorm)norm, (DpClip)clip, 4);
    if (failures) { printf("%d of %d checks failed\n", failures, checks); return 1; }
    printf("dp lora: %d checks passed\n", checks);
    return 0;
}
