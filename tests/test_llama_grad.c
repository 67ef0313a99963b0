/* test_llama_grad.c — the model's backward against central finite differences of its forward, for
   every parameter kind of the tiny model (embedding, both RMSNorm weights of a block, the final norm,
   q, k, v, o, gate, up, down, the LM head), on three seeds: MHA, GQA (4 heads / 2 kv heads) and tied
   embeddings. Plus the hook contract the DP strategies rely on.

   Directional checks per tensor: d = (L(θ+εu) - L(θ-εu)) / 2ε against ⟨∇L, u⟩, for u a random ±1
   tensor and for u = sign(∇L) (whose derivative cannot vanish; a wrong element shows in both).
   The weights are the model's init scaled up x8 so that the loss is far from uniform and the
   gradient large enough to measure in fp32. With ε = 1e-3 the truncation error (ε² L''') is ~1e-6
   relative, and the fp32 forward's rounding (~1e-7 of L ≈ 7, i.e. ~1e-6 absolute, divided by 2ε)
   puts ~5e-4 absolute noise on d. Tolerance: |d - ⟨∇L,u⟩| <= 3e-3 + 2e-2 |d|: a wrong sign, a missing
   term or a wrong scale of any tensor's gradient is far outside it (the errors are printed).
   Not here: the kernels one by one (test_kernels_cpu), training (test_llama_train). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "llama/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static uint64_t rng = 7;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static double loss_of(LlamaModel *m) {
    double l = 0;
    if (llama_forward(m) || llama_loss(m, &l)) { printf("FAIL forward: %s\n", kbackend_error(m->kb)); exit(1); }
    return l;
}

static void gradient(LlamaModel *m, const GradHooks *h) {
    llama_zero_grad(m);
    loss_of(m);
    if (llama_backward(m, h, 1.0f / (float)(m->B * m->T))) { printf("FAIL backward: %s\n", kbackend_error(m->kb)); exit(1); }
}

static void build(LlamaModel *m, KBackend *kb, LlamaConfig *cfg, int B, int T, unsigned seed) {
    if (llama_build(m, kb, cfg, B, T, "sgd", seed, NULL, NULL)) { printf("FAIL build: %s\n", kbackend_error(kb)); exit(1); }
    for (int i = 0; i < m->n_params; i++) {   /* x8: a non-trivial loss surface (see the top comment) */
        float *w = *llama_tensor(&m->w, &m->params[i]);
        for (size_t j = 0; j < m->params[i].numel; j++) w[j] = m->params[i].kind == HOOK_RMSNORM ? 1.0f + 0.3f * (float)(urand() - 0.5) : 8.0f * w[j];
    }
    for (int i = 0; i < B * T; i++) { m->tokens[i] = (int)(urand() * cfg->vocab_size); m->targets[i] = (int)(urand() * cfg->vocab_size); }
    m->tokens[3] = m->tokens[1];    /* a repeated token: the embedding's scatter-add must sum */
}

static void check_model(LlamaConfig *cfg, unsigned seed, const char *label) {
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel m;
    build(&m, &kb, cfg, 2, 9, seed);
    gradient(&m, NULL);
    const double eps = 1e-3;
    for (int i = 0; i < m.n_params; i++) {
        const ParamInfo *p = &m.params[i];
        float *w = *llama_tensor(&m.w, p), *g = *llama_tensor(&m.dw, p);
        double *u = malloc(p->numel * sizeof *u);
        float *w0 = malloc(p->numel * sizeof *w0);
        memcpy(w0, w, p->numel * sizeof *w0);
        /* direction 0: random signs; direction 1: the signs of the analytic gradient (a large
           derivative even where a random direction's would vanish) */
        for (int dir = 0; dir < 2; dir++) {
            double analytic = 0;
            for (size_t j = 0; j < p->numel; j++) {
                u[j] = dir == 0 ? (urand() < 0.5 ? -1 : 1) : (g[j] < 0 ? -1 : 1);
                analytic += u[j] * g[j];
            }
            for (size_t j = 0; j < p->numel; j++) w[j] = (float)(w0[j] + eps * u[j]);
            double lp = loss_of(&m);
            for (size_t j = 0; j < p->numel; j++) w[j] = (float)(w0[j] - eps * u[j]);
            double lm = loss_of(&m);
            memcpy(w, w0, p->numel * sizeof *w0);
            double fd = (lp - lm) / (2 * eps), err = fabs(fd - analytic), tol = 3e-3 + 2e-2 * fabs(fd);
            int ok = err <= tol && (dir == 0 || fabs(fd) > 1e-2);   /* along sign(g) it cannot vanish */
            printf("%s %-5s %-36s %s fd %+.6f analytic %+.6f err/tol %.3f\n", ok ? "ok  " : "FAIL", label, p->name,
                   dir ? "u=sign(g)" : "u=random ", fd, analytic, err / tol);
            if (!ok) failures++;
        }
        free(u); free(w0);
    }
    llama_free(&m);
    if (kb.live) { printf("FAIL %zu bytes leaked\n", kb.live); failures++; }
    kbackend_destroy(&kb);
}

/* ---- hooks: what they see, skipping dW, per-sample loss weights ----------------------------------- */
typedef struct { int calls[64]; int bad; LlamaModel *m; int skip; } HookLog;

static int log_hook(void *user, const GradHookArgs *a) {
    HookLog *h = user;
    LlamaModel *m = h->m;
    if (a->param_index < 0 || a->param_index >= m->n_params) { h->bad++; return -1; }
    h->calls[a->param_index]++;
    const ParamInfo *p = &m->params[a->param_index];
    if (a->B != m->B || a->T != m->T || !a->G) h->bad++;
    if (a->kind == HOOK_LINEAR && a->dW) {
        /* GᵀA must be exactly the ordinary weight gradient's contribution (checked against dW below) */
        if (a->d_out != (strcmp(a->name, "lm_head") ? p->rows : m->V) || a->d_in != p->cols || !a->A) h->bad++;
    }
    if (a->kind == HOOK_RMSNORM && (!a->rstd || !a->A || a->d_in != m->C)) h->bad++;
    if (a->kind == HOOK_EMBEDDING && (!a->tokens || a->A)) h->bad++;
    return h->skip;
}

/* For the q_proj of block 1: ΣGᵀA computed from what the hook saw equals the backward's dW. */
typedef struct { float *ref; int rows, cols; } Capture;
static int capture_q(void *user, const GradHookArgs *a) {
    Capture *c = user;
    if (strcmp(a->name, "layers.1.self_attn.q_proj")) return 0;
    c->rows = a->d_out; c->cols = a->d_in;
    c->ref = calloc((size_t)a->d_out * a->d_in, sizeof(float));
    for (int n = 0; n < a->B * a->T; n++)
        for (int o = 0; o < a->d_out; o++)
            for (int i = 0; i < a->d_in; i++) c->ref[o * a->d_in + i] += a->G[(size_t)n * a->d_out + o] * a->A[(size_t)n * a->d_in + i];
    return 0;
}

static int freeze_embed_attn(void *user, const ParamInfo *p) { (void)user; return p->group == GROUP_EMBEDDING || p->group == GROUP_ATTENTION; }
static int count_hook(void *user, const GradHookArgs *a) { (void)a; ++*(int *)user; return 0; }

/* Frozen tensors (LoRA's base): no grads; the others' gradients are those of the unfrozen model. */
static void check_frozen(LlamaConfig *cfg) {
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel full, fr;
    uint64_t saved = rng;
    build(&full, &kb, cfg, 2, 9, 5);
    rng = saved;
    if (llama_build(&fr, &kb, cfg, 2, 9, "adamw", 5, freeze_embed_attn, NULL)) { printf("FAIL build frozen\n"); failures++; return; }
    for (int i = 0; i < fr.n_params; i++)
        memcpy(*llama_tensor(&fr.w, &fr.params[i]), *llama_tensor(&full.w, &full.params[i]), fr.params[i].numel * 4);
    memcpy(fr.tokens, full.tokens, sizeof(int) * 18); memcpy(fr.targets, full.targets, sizeof(int) * 18);
    gradient(&full, NULL);
    int calls = 0;
    GradHooks h = { .user = &calls, .weight_grad = count_hook, .frozen_too = 1 };
    gradient(&fr, &h);   /* frozen_too: hooks see frozen weights too, and nothing is written for them */
    int bad = 0;
    for (int i = 0; i < fr.n_params; i++) {
        const ParamInfo *p = &fr.params[i];
        const float *g = *llama_tensor(&fr.dw, p), *gf = *llama_tensor(&full.dw, p);
        if (!p->trainable) { if (g || *llama_tensor(&fr.m, p)) bad++; continue; }
        for (size_t j = 0; j < p->numel; j++) if (fabsf(g[j] - gf[j]) > 1e-6f + 1e-5f * fabsf(gf[j])) { bad++; break; }
    }
    if (bad || calls != fr.n_params) { printf("FAIL frozen tensors: %d mismatches, %d hook calls (want %d)\n", bad, calls, fr.n_params); failures++; }
    else printf("ok   frozen embedding + attention: no grads or Adam state for them, the other gradients unchanged\n");
    llama_free(&fr); llama_free(&full);
    kbackend_destroy(&kb);
}

static void check_hooks(LlamaConfig *cfg) {
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel m;
    build(&m, &kb, cfg, 2, 9, 11);
    /* (1) every trainable tensor's hook runs once per backward, with consistent shapes */
    HookLog log = { .m = &m };
    GradHooks h = { .user = &log, .weight_grad = log_hook };
    gradient(&m, &h);
    for (int i = 0; i < m.n_params; i++)
        if (log.calls[i] != 1) { printf("FAIL hook for %s ran %d times\n", m.params[i].name, log.calls[i]); failures++; }
    if (log.bad) { printf("FAIL %d hook calls had wrong shapes or pointers\n", log.bad); failures++; }
    /* (2) returning 1 skips every ordinary weight gradient */
    log.skip = 1;
    gradient(&m, &h);
    double s = 0;
    for (int i = 0; i < m.n_params; i++) {
        const float *g = *llama_tensor(&m.dw, &m.params[i]);
        for (size_t j = 0; j < m.params[i].numel; j++) s += fabs(g[j]);
    }
    if (s != 0) { printf("FAIL skipped weight gradients are not zero (sum |g| = %g)\n", s); failures++; }
    /* (3) the hook's A and G give the layer's gradient */
    Capture cap = { 0 };
    GradHooks hc = { .user = &cap, .weight_grad = capture_q };
    gradient(&m, &hc);
    const float *dq = m.dw.layers[1].q_proj;
    double worst = 0;
    for (int j = 0; j < cap.rows * cap.cols; j++) worst = fmax(worst, fabs(dq[j] - cap.ref[j]) / (1e-5 + fabs(cap.ref[j])));
    if (!cap.ref || worst > 1e-3) { printf("FAIL hook A,G: G^T A differs from dW by %g (relative)\n", worst); failures++; }
    else printf("ok   hooks: each tensor once, skip works, G^T A == dW (worst rel. diff %.2g)\n", worst);
    free(cap.ref);
    /* (4) loss_weights: the gradient of Σ_b c_b L_b is Σ_b c_b ∇L_b */
    const ParamInfo *pq = &m.params[1];   /* layers.0.self_attn.q_proj */
    size_t n = pq->numel;
    float *g0 = malloc(n * 4), *g1 = malloc(n * 4);
    float w0[2] = { 1, 0 }, w1[2] = { 0, 1 }, w2[2] = { 2.0f, 0.5f };
    GradHooks hw = { .loss_weights = w0 };
    gradient(&m, &hw); memcpy(g0, *llama_tensor(&m.dw, pq), n * 4);
    hw.loss_weights = w1;
    gradient(&m, &hw); memcpy(g1, *llama_tensor(&m.dw, pq), n * 4);
    hw.loss_weights = w2;
    gradient(&m, &hw);
    const float *g2 = *llama_tensor(&m.dw, pq);
    worst = 0;
    double mag = 0;
    for (size_t j = 0; j < n; j++) { worst = fmax(worst, fabs(g2[j] - (2 * g0[j] + 0.5 * g1[j]))); mag = fmax(mag, fabs(g2[j])); }
    if (!(mag > 0) || worst > 1e-5 * mag) { printf("FAIL loss_weights: max diff %g (max |g| %g)\n", worst, mag); failures++; }
    else printf("ok   loss_weights: grad(2 L_0 + 0.5 L_1) == 2 grad L_0 + 0.5 grad L_1 (max diff %.2g of %.2g)\n", worst, mag);
    free(g0); free(g1);
    /* (5) retain_saved keeps the activations until llama_release_saved */
    size_t before = kb.live;
    loss_of(&m);
    size_t with_acts = kb.live;
    GradHooks hr = { .retain_saved = 1 };
    llama_backward(&m, &hr, 1.0f);
    if (kb.live != with_acts || m.n_deferred == 0) { printf("FAIL retain_saved freed activations (%zu -> %zu)\n", with_acts, kb.live); failures++; }
    llama_release_saved(&m);
    if (kb.live != before) { printf("FAIL llama_release_saved left %zu bytes\n", kb.live - before); failures++; }
    llama_free(&m);
    kbackend_destroy(&kb);
}

int main(int argc, char **argv) {
    (void)argc;
    train_prefer_passive_omp(argv);
    TrainConfig c;
    config_defaults(&c);   /* the tiny preset */
    LlamaConfig mha = c.model, gqa = c.model, tied = c.model;
    gqa.n_kv_heads = 2;
    tied.tie_embeddings = 1;
    check_model(&mha, 1, "mha");
    check_model(&gqa, 2, "gqa");
    check_model(&tied, 3, "tied");
    check_hooks(&gqa);
    check_frozen(&gqa);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("all gradient checks passed\n");
    return 0;
}
