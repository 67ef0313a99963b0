/* test_classify.c — sequence classification (--task classify, samples/llama/classify.h): the model of
   transformers' LlamaForSequenceClassification on the CPU.

   Checked here, in C:
     - the pooled position of each row (the last token that is not the pad id; 0 for a row of padding;
       T - 1 with no pad id), as transformers picks it;
     - the loss: the mean over the rows of the cross-entropy of the pooled logits, recomputed in double
       from the model's own logits;
     - the backward of every tensor kind (embedding, norms, q/k/v/o, gate/up/down, score) against
       central finite differences of the forward, in directions u = random ±1 and u = sign(∇L)
       (tolerance as test_llama_grad.c: |d - <∇L,u>| <= 3e-3 + 2e-2 |d|), with padded rows;
     - what the padding does not reach: the pad token's embedding row (used only after the pooled
       positions) gets exactly zero gradient (causal attention: the last real token never sees it);
     - --precision bf16: the loss and every gradient's direction as fp32's;
     - memory: the head is K x C (score, never tied, no lm_head), the logits N x K, the labels B ints;
     - the labelled token file (data.h): rows, padding to T, labels, and its one-line errors.
   With --dump DIR it also writes the tensors a Python test compares with transformers and Opacus
   (tests/test_classify_torch.py): the batch, the weights, the vanilla loss and gradients, and each
   DP method's per-sample norms, clipped sum, noise and noised step, for the full model and LoRA (dump_dp).
   Not here: the DP methods against per-sample references (test_dp_train.c, test_dp_lora.c run classify
   configurations), plans (tests/test_classify_cli.sh). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"
#include "llama/classify.h"
#include "noise.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures = 0, checks = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

#include "test_dp_rig.h"

static uint64_t rng = 11;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * 0x1.0p-53;
}

enum { B = 3, T = 9, K = 3, PAD = 0 };
static const LlamaConfig CFG = { .preset = "test", .vocab_size = 29, .dim = 16, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                                 .ffn_dim = 24, .tie_embeddings = 0, .rope_theta = 10000.0f, .norm_eps = 1e-6f,
                                 .task = LLAMA_TASK_CLASSIFY, .num_labels = K, .pad_id = PAD };

/* The batch: row 0 full, row 1 right-padded after 5 tokens, row 2 after 7; labels 2, 0, 1. */
static void batch(int *tok, int *tgt) {
    static const int len[B] = { T, 5, 7 }, label[B] = { 2, 0, 1 };
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            tok[b * T + t] = t < len[b] ? 1 + (int)(urand() * (CFG.vocab_size - 1)) : PAD;
            tgt[b * T + t] = label[b];
        }
}

static void test_positions(void) {
    const int tok[4 * 5] = { 3, 4, 5, 0, 0,   0, 0, 0, 0, 0,   7, 0, 7, 0, 0,   1, 2, 3, 4, 5 };
    int last[4];
    classify_last_positions(last, tok, 4, 5, 0);
    CHECK(last[0] == 2 && last[1] == 0 && last[2] == 2 && last[3] == 4, "last non-pad positions %d %d %d %d, want 2 0 2 4",
          last[0], last[1], last[2], last[3]);
    classify_last_positions(last, tok, 4, 5, -1);
    CHECK(last[0] == 4 && last[1] == 4 && last[2] == 4 && last[3] == 4, "no pad id: the last position");
}

static double loss_of(LlamaModel *m) {
    double l = 0;
    if (llama_forward(m) || llama_loss(m, &l)) { printf("FAIL forward: %s\n", kbackend_error(m->kb)); exit(1); }
    return l;
}

static void gradient(LlamaModel *m) {
    llama_zero_grad(m);
    loss_of(m);
    if (llama_backward(m, NULL, 1.0f / (float)m->B)) { printf("FAIL backward: %s\n", kbackend_error(m->kb)); exit(1); }
}

static void build(LlamaModel *m, KBackend *kb, const int *tok, const int *tgt, int scale_up) {
    if (llama_build(m, kb, &CFG, B, T, "sgd", 5, NULL, NULL)) { printf("FAIL build: %s\n", kbackend_error(kb)); exit(1); }
    for (int i = 0; scale_up && i < m->n_params; i++) {   /* x8: a loss surface worth differentiating */
        float *w = *llama_tensor(&m->w, &m->params[i]);
        for (size_t j = 0; j < m->params[i].numel; j++)
            w[j] = m->params[i].kind == HOOK_RMSNORM ? 1.0f + 0.3f * (float)(urand() - 0.5) : 8.0f * w[j];
    }
    memcpy(m->tokens, tok, sizeof(int) * B * T);
    memcpy(m->targets, tgt, sizeof(int) * B * T);
}

static void test_model(void) {
    int tok[B * T], tgt[B * T];
    batch(tok, tgt);
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel m;
    build(&m, &kb, tok, tgt, 1);
    /* the parameter table: score (K, C) last, no lm_head */
    const ParamInfo *h = &m.params[m.n_params - 1];
    CHECK(!strcmp(h->name, "score") && !strcmp(h->hf_name, "score.weight") && h->rows == K && h->cols == CFG.dim,
          "head %s (%s) %dx%d, want score (score.weight) %dx%d", h->name, h->hf_name, h->rows, h->cols, K, CFG.dim);
    CHECK(m.n_params == 3 + 9 * CFG.n_layers, "%d tensors", m.n_params);
    size_t total = 0;
    for (int i = 0; i < m.n_params; i++) total += m.params[i].numel;
    CHECK(total == llama_param_count(&CFG), "llama_param_count %zu, table %zu", llama_param_count(&CFG), total);
    CHECK(llama_loss_positions(&m) == 1, "one loss term per sample");
    /* the loss from the model's logits, in double */
    double loss = loss_of(&m);
    CHECK(dpmem_tag_bytes(m.acts.logits) == (size_t)B * T * K * 4, "logits %zu bytes, want B*T*K*4", dpmem_tag_bytes(m.acts.logits));
    CHECK(dpmem_tag_bytes(m.labels) == (size_t)B * 4, "labels %zu bytes", dpmem_tag_bytes(m.labels));
    const int last[B] = { T - 1, 4, 6 };
    double want = 0;
    for (int b = 0; b < B; b++) {
        const float *z = m.acts.logits + ((size_t)b * T + last[b]) * K;
        double mx = z[0], s = 0;
        for (int k = 1; k < K; k++) mx = fmax(mx, z[k]);
        for (int k = 0; k < K; k++) s += exp(z[k] - mx);
        want += (log(s) + mx - z[tgt[b * T]]) / B;
    }
    CHECK(fabs(loss - want) <= 1e-6 * fabs(want), "loss %.9g, recomputed %.9g", loss, want);
    CHECK(loss > 0.5, "the x8 weights give a loss of %.4g: too flat to differentiate", loss);
    /* finite differences of every tensor kind */
    gradient(&m);
    const double eps = 1e-3;
    for (int i = 0; i < m.n_params; i++) {
        const ParamInfo *p = &m.params[i];
        float *w = *llama_tensor(&m.w, p);
        const float *g = *llama_tensor(&m.dw, p);
        float *u = xcalloc(p->numel, sizeof(float)), *w0 = xcalloc(p->numel, sizeof(float));
        memcpy(w0, w, p->numel * sizeof(float));
        for (int dir = 0; dir < 2; dir++) {
            double gu = 0;
            for (size_t j = 0; j < p->numel; j++) {
                u[j] = dir == 0 ? (urand() < 0.5 ? -1.0f : 1.0f) : (g[j] > 0 ? 1.0f : g[j] < 0 ? -1.0f : 0.0f);
                gu += (double)g[j] * u[j];
            }
            for (size_t j = 0; j < p->numel; j++) w[j] = w0[j] + (float)eps * u[j];
            double lp = loss_of(&m);
            for (size_t j = 0; j < p->numel; j++) w[j] = w0[j] - (float)eps * u[j];
            double lm = loss_of(&m);
            memcpy(w, w0, p->numel * sizeof(float));
            double d = (lp - lm) / (2 * eps);
            CHECK(fabs(d - gu) <= 3e-3 + 2e-2 * fabs(d), "%s (%s): finite difference %.6g, backward %.6g", p->name,
                  dir ? "sign(grad)" : "random", d, gu);
            if (dir == 1) CHECK(fabs(gu) > 1e-3, "%s: gradient too small to check (%.3g)", p->name, gu);
        }
        free(u); free(w0);
    }
    /* the padding never reaches the loss (it follows each row's pooled position, which causal attention
       keeps from seeing it): the pad token's embedding row, used only there, gets exactly no gradient */
    double pad_row = 0, other = 0;
    for (int c = 0; c < CFG.dim; c++) {
        pad_row += fabs(m.dw.embed_tokens[(size_t)PAD * CFG.dim + c]);
        other += fabs(m.dw.embed_tokens[(size_t)tok[0] * CFG.dim + c]);
    }
    CHECK(pad_row == 0 && other > 0, "the pad token's embedding gradient is %.3g (a real token's %.3g)", pad_row, other);
    /* a real token of a padded row changed: the loss moves */
    m.tokens[1 * T + 3] = m.tokens[1 * T + 3] == 1 ? 2 : 1;
    CHECK(fabs(loss_of(&m) - loss) > 1e-6, "a real token of row 1 changed and the loss did not");
    llama_free(&m);
    CHECK(kb.live == 0, "%zu bytes left allocated", kb.live);
    kbackend_destroy(&kb);
}

/* The batch with the pad token where it is used: row 0 has it inside (a real token that is also the pad,
   as --pad-id 0 on Llama-3), row 1 is all padding. */
static void pad_inside_batch(int *tok, int *tgt) {
    batch(tok, tgt);
    tok[0 * T + 2] = PAD;
    for (int t = 0; t < T; t++) tok[1 * T + t] = PAD;
}

/* The pad token's embedding row gets no gradient however the pad is used (transformers builds
   nn.Embedding(padding_idx=pad_token_id); it got 1.976 of an embedding gradient of 5.43 here): exactly 0,
   and every other embedding row is the loss's gradient (finite differences along the other rows). */
static void test_pad_row(void) {
    int tok[B * T], tgt[B * T];
    pad_inside_batch(tok, tgt);
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel m;
    build(&m, &kb, tok, tgt, 1);
    gradient(&m);
    const size_t C = (size_t)CFG.dim, n = (size_t)CFG.vocab_size * C;
    double pad_row = 0, gu = 0;
    float *w = m.w.embed_tokens, *u = xcalloc(n, sizeof(float)), *w0 = xcalloc(n, sizeof(float));
    for (size_t c = 0; c < C; c++) pad_row += fabs(m.dw.embed_tokens[(size_t)PAD * C + c]);
    CHECK(pad_row == 0, "pad inside a row, and a row of padding: the pad token's embedding gradient is %.4g, want 0", pad_row);
    memcpy(w0, w, n * sizeof(float));
    for (size_t j = C; j < n; j++) { u[j] = urand() < 0.5 ? -1.0f : 1.0f; gu += (double)m.dw.embed_tokens[j] * u[j]; }   /* (row 0 = PAD: u 0) */
    const double eps = 1e-3;
    for (size_t j = 0; j < n; j++) w[j] = w0[j] + (float)eps * u[j];
    double lp = loss_of(&m);
    for (size_t j = 0; j < n; j++) w[j] = w0[j] - (float)eps * u[j];
    double lm = loss_of(&m), d = (lp - lm) / (2 * eps);
    memcpy(w, w0, n * sizeof(float));
    CHECK(fabs(d - gu) <= 3e-3 + 2e-2 * fabs(d) && fabs(gu) > 1e-3, "the other embedding rows: finite difference %.6g, backward %.6g", d, gu);
    free(u); free(w0);
    llama_free(&m);
    kbackend_destroy(&kb);
}

/* --precision bf16: the same model and batch as fp32 (the same seed), the loss within 1e-2 relative and
   every gradient tensor pointing the same way (cosine >= 0.99): the bf16 path of the pooled loss (fp32
   logits and dlogits, then rounded for the score GEMMs) is the fp32 path's, rounded. */
static void test_bf16(void) {
    int tok[B * T], tgt[B * T];
    batch(tok, tgt);
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel m32, m16;
    LlamaConfig c16 = CFG;
    c16.precision = 1;
    build(&m32, &kb, tok, tgt, 0);
    if (llama_build(&m16, &kb, &c16, B, T, "sgd", 5, NULL, NULL)) { printf("FAIL build bf16: %s\n", kbackend_error(&kb)); exit(1); }
    memcpy(m16.tokens, tok, sizeof tok);
    memcpy(m16.targets, tgt, sizeof tgt);
    gradient(&m32);
    llama_zero_grad(&m16);
    double l16 = loss_of(&m16);
    if (llama_backward(&m16, NULL, 1.0f / B)) { printf("FAIL backward bf16: %s\n", kbackend_error(&kb)); exit(1); }
    double l32 = 0;
    if (llama_forward(&m32) || llama_loss(&m32, &l32)) { printf("FAIL forward\n"); exit(1); }
    CHECK(fabs(l16 - l32) <= 1e-2 * l32, "bf16 loss %.6f, fp32 %.6f", l16, l32);
    for (int i = 0; i < m32.n_params; i++) {
        const float *a = *llama_tensor(&m32.dw, &m32.params[i]), *b = *llama_tensor(&m16.dw, &m16.params[i]);
        double ab = 0, aa = 0, bb = 0;
        for (size_t j = 0; j < m32.params[i].numel; j++) { ab += (double)a[j] * b[j]; aa += (double)a[j] * a[j]; bb += (double)b[j] * b[j]; }
        const double cosine = ab / (sqrt(aa * bb) + 1e-300);
        CHECK(cosine >= 0.99, "bf16 gradient of %s: cosine %.5f with fp32's", m32.params[i].name, cosine);
    }
    llama_free(&m16);
    llama_free(&m32);
    CHECK(kb.live == 0, "%zu bytes left allocated (bf16)", kb.live);
    kbackend_destroy(&kb);
}

/* A labelled token file (data.h) written by hand, read back; then its errors. */
static void put32(FILE *f, int32_t v) { fwrite(&v, 4, 1, f); }
static int write_labelled(const char *path, int rows, int R, int k, int pad, const int *labels, const int *toks, long cut) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int32_t h[256] = { DATA_LABELLED_MAGIC, 1, rows, R, k, pad };
    fwrite(h, 4, 256, f);
    for (int i = 0; i < rows; i++) {
        put32(f, labels[i]);
        for (int t = 0; t < R; t++) put32(f, toks[i * R + t]);
    }
    fclose(f);
    if (cut > 0) { if (truncate(path, cut)) return -1; }
    return 0;
}

static void test_data(void) {
    char path[] = "/tmp/test_classify_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { printf("FAIL: mkstemp\n"); failures++; return; }
    close(fd);
    const int labels[3] = { 1, 0, 2 }, toks[3 * 4] = { 5, 6, 0, 0,   7, 8, 9, 0,   1, 2, 3, 4 };
    write_labelled(path, 3, 4, 3, 0, labels, toks, 0);
    DataLoader d;
    int in[6], tg[6];
    CHECK(data_open_task(&d, path, 29, 6, 1, 3, 0) == 0, "the labelled file must open");
    CHECK(data_rows(&d, 6) == 3, "rows %zu, want 3", data_rows(&d, 6));
    data_row(&d, 1, in, tg, 6);
    CHECK(in[0] == 7 && in[1] == 8 && in[2] == 9 && in[3] == 0 && in[4] == 0 && in[5] == 0, "row 1 padded to T = 6");
    int same = 1;
    for (int t = 0; t < 6; t++) same &= tg[t] == 0;
    CHECK(same, "every target of row 1 is its label 0");
    data_row(&d, 5, in, tg, 3);   /* i mod rows; T < R: the first T tokens */
    CHECK(in[0] == 1 && in[2] == 3 && tg[0] == 2, "row 5 = row 2, truncated to T = 3");
    data_close(&d);
    printf("(the four errors below are expected)\n");
    fflush(stdout);
    CHECK(data_open_task(&d, path, 29, 6, 1, 4, 0) != 0, "a file of 3 labels for a model of 4 must be refused");
    CHECK(data_open_task(&d, path, 29, 6, 1, 0, -1) != 0, "a causal LM must refuse a labelled file");
    const int bad[3] = { 1, 3, 2 };
    write_labelled(path, 3, 4, 3, 0, bad, toks, 0);
    CHECK(data_open_task(&d, path, 29, 6, 1, 3, 0) != 0, "label 3 of 3 labels must be refused");
    write_labelled(path, 3, 4, 3, 0, labels, toks, 1024 + 4 * 12);
    CHECK(data_open_task(&d, path, 29, 6, 1, 3, 0) != 0, "a truncated file must be refused");
    fflush(stderr);
    unlink(path);
}

/* ---- --dump DIR: what tests/test_classify_torch.py compares ------------------------------------- */

static void dump(const char *dir, const char *name, const void *p, size_t bytes) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f)) { printf("FAIL: cannot write %s\n", path); exit(1); }
}

static void dump_grads(const char *dir, const char *prefix, LlamaModel *m) {
    for (int i = 0; i < m->n_params; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s.%s", prefix, m->params[i].hf_name);
        dump(dir, name, *llama_tensor(&m->dw, &m->params[i]), m->params[i].numel * sizeof(float));
    }
}

/* The dump's DP runs (dump_dp below): LoRA's rank and alpha, the adapters' SGD learning rate, the noise. */
enum { LORA_R = 3 };
#define LORA_ALPHA 5.0
#define LORA_LR 0.5f
#define SIGMA 0.7
#define NOISE_SEED 1234u

/* The update's noise σ·C·z of n entries at offset (step 0), as dp_sgd adds it (kernels/noise.h), for Opacus to
   add in place of its own: noise_privatize of zeros with a logical batch of 1. */
static void dump_noise(const char *dir, const char *name, size_t n, double C, uint64_t offset) {
    float *z = xcalloc(n, sizeof(float));
    noise_privatize(z, n, SIGMA, C, 1.0, NOISE_SEED, 0, offset);
    dump(dir, name, z, n * sizeof(float));
    free(z);
}

/* One DP run (norm, clip; LoRA or the full model) of the dump, with prefix <norm>-<clip> (lora-<norm>-<clip>):
     norm2.P                 the per-sample norms² (per-sample loss = the sample's CE);
     clipped.P.<tensor>      the clipped sum Σ_b min(1, C/(‖g_b‖ + 1e-6)) g_b of every trainable tensor (before the noise);
     noised.P.<tensor>       after dp_sgd_before_update (σ = SIGMA, --noise-seed NOISE_SEED): the update's
                             gradient (Σ + σ·C·z) / B of the full model's tensors and of score; LoRA's adapters
                             are stepped there (SGD, lr LORA_LR), so for them the adapters after the step;
     noise.P.<tensor>        σ·C·z, the noise that went into it, at dp_sgd's offsets (trainable model tensors
                             in table order, then each adapter's A and B).
   LoRA: all seven projections get adapters of rank LORA_R, alpha LORA_ALPHA (A from the seed; B, zero at init,
   set to fixed values so that A's gradients are not zero, and merged), score trains whole (PEFT's
   modules_to_save); lora_init.<tensor>.lora_A|B: the adapters before the step (the same in every run). */
static int dump_dp(const char *dir, double C, DpNorm norm, DpClip clip, int lora, const int *tok, const int *tgt) {
    Rig r;
    DpConfig dp;
    DpSgd d;
    TrainStrategy st;
    rig_config(&r.cfg, &CFG, B, T, "sgd");
    dp_config_defaults(&dp, norm, clip);
    dp.max_grad_norm = C; dp.noise_multiplier = SIGMA; dp.seed = NOISE_SEED; dp.seed_given = 1;
    dp.flash_tile = 4; dp.quiet_dp = 1;
    if (lora) { dp.lora_rank = LORA_R; dp.lora_alpha = LORA_ALPHA; dp.lora_targets = LORA_Q | LORA_K | LORA_V | LORA_O | LORA_GATE | LORA_UP | LORA_DOWN; }
    if (dp_sgd_prepare(&d, &st, &dp, &r.cfg, "dump")) { printf("FAIL: dp_sgd_prepare\n"); return 1; }
    rig_open(&r, 5, st.frozen);
    if (dp_sgd_init(&d, &r.s)) { printf("FAIL: dp_sgd_init: %s\n", kbackend_error(&r.kb)); return 1; }
    LlamaModel *m = &r.s.model;
    char prefix[64], name[256];
    snprintf(prefix, sizeof prefix, "%s%s-%s", lora ? "lora-" : "", dp_norm_name(norm), dp_clip_name(clip));
    CHECK(!lora || d.n_lora == 7 * CFG.n_layers, "%d adapters, want 7 per layer", d.n_lora);
    for (int k = 0; k < d.n_lora; k++) {
        LoraAdapter *l = &d.lora[k];
        for (size_t i = 0; i < (size_t)l->OC * l->r; i++) l->B[i] = 0.05f * (float)((int)((i * 2654435761u + k) % 97) - 48) / 48.0f;
        lora_merge(l, &r.kb, *llama_tensor(&m->w, &m->params[l->param_index]), 1.0f);
        const char *hf = m->params[l->param_index].hf_name;
        const int base = (int)strlen(hf) - (int)strlen(".weight");
        snprintf(name, sizeof name, "lora_init.%.*s.lora_A", base, hf);
        dump(dir, name, l->A, (size_t)l->r * l->IC * sizeof(float));
        snprintf(name, sizeof name, "lora_init.%.*s.lora_B", base, hf);
        dump(dir, name, l->B, (size_t)l->OC * l->r * sizeof(float));
    }
    llama_zero_grad(m);
    rig_rows(&r, tok, tgt, 0);
    if (dp_sgd_physical_batch(&d, &r.s)) { printf("FAIL: physical batch: %s\n", kbackend_error(&r.kb)); return 1; }
    snprintf(name, sizeof name, "norm2.%s", prefix);
    dump(dir, name, d.norm2, B * sizeof(float));
    /* what: 0 the clipped sums, 1 the noised step, 2 the noise */
    for (int what = 0; what < 3; what++) {
        static const char *const label[3] = { "clipped", "noised", "noise" };
        if (what == 1) {
            r.s.lr = LORA_LR;
            if (dp_sgd_before_update(&d, &r.s)) { printf("FAIL: before_update: %s\n", kbackend_error(&r.kb)); return 1; }
        }
        uint64_t offset = 0;
        for (int i = 0; i < m->n_params; i++) {
            const ParamInfo *p = &m->params[i];
            if (!p->trainable) continue;
            snprintf(name, sizeof name, "%s.%s.%s", label[what], prefix, p->hf_name);
            if (what == 2) dump_noise(dir, name, p->numel, C, offset);
            else dump(dir, name, *llama_tensor(&m->dw, p), p->numel * sizeof(float));
            offset += p->numel;
        }
        for (int k = 0; k < d.n_lora; k++) {
            const LoraAdapter *l = &d.lora[k];
            const char *hf = m->params[l->param_index].hf_name;
            const int base = (int)strlen(hf) - (int)strlen(".weight");
            const size_t na = (size_t)l->r * l->IC, nb = (size_t)l->OC * l->r;
            snprintf(name, sizeof name, "%s.%s.%.*s.lora_A", label[what], prefix, base, hf);
            if (what == 2) dump_noise(dir, name, na, C, offset);
            else dump(dir, name, what ? l->A : l->dA, na * sizeof(float));
            snprintf(name, sizeof name, "%s.%s.%.*s.lora_B", label[what], prefix, base, hf);
            if (what == 2) dump_noise(dir, name, nb, C, offset + na);
            else dump(dir, name, what ? l->B : l->dB, nb * sizeof(float));
            offset += na + nb;
        }
    }
    dp_sgd_destroy(&d, &r.s);
    rig_close(&r);
    return 0;
}

/* One batch's dump: its tokens and targets, the weights, the vanilla loss and gradients, and every DP method's
   (full model; with_lora: LoRA's too). */
static int dump_batch(const char *dir, const int *tok, const int *tgt, double C, double C_lora, int with_lora) {
    dump(dir, "tokens", tok, sizeof(int) * B * T);
    dump(dir, "targets", tgt, sizeof(int) * B * T);
    {   /* the weights, the vanilla loss (the batch mean) and its gradients */
        Rig r;
        rig_config(&r.cfg, &CFG, B, T, "sgd");
        rig_open(&r, 5, NULL);
        LlamaModel *m = &r.s.model;
        for (int i = 0; i < m->n_params; i++) {
            char name[160];
            snprintf(name, sizeof name, "weight.%s", m->params[i].hf_name);
            dump(dir, name, *llama_tensor(&m->w, &m->params[i]), m->params[i].numel * sizeof(float));
        }
        llama_zero_grad(m);
        rig_rows(&r, tok, tgt, 0);
        if (train_forward(&r.s) || train_backward_scaled(&r.s, NULL, 1.0f / B)) { printf("FAIL: vanilla\n"); return 1; }
        double loss = r.s.loss;
        dump(dir, "loss", &loss, sizeof loss);
        dump_grads(dir, "grad", m);
        rig_close(&r);
    }
    /* each DP method, full and LoRA: per-sample norms², the clipped sum, the noised step */
    for (int lora = 0; lora <= with_lora; lora++)
        for (int norm = 0; norm < 4; norm++)
            for (int clip = 0; clip < 2; clip++)
                if (dump_dp(dir, lora ? C_lora : C, (DpNorm)norm, (DpClip)clip, lora, tok, tgt)) return 1;
    return 0;
}

/* The dump: the batch of right-padded rows in DIR, the batch with the pad inside a row and a row of padding
   (pad_inside_batch) in DIR/pad_inside (its vanilla gradients and the full model's DP runs). */
static int dump_all(const char *dir, double C, double C_lora) {
    int tok[B * T], tgt[B * T];
    batch(tok, tgt);
    if (dump_batch(dir, tok, tgt, C, C_lora, 1)) return 1;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/pad_inside", dir);
    if (mkdir(sub, 0755) && errno != EEXIST) { printf("FAIL: cannot make %s\n", sub); return 1; }
    pad_inside_batch(tok, tgt);
    if (dump_batch(sub, tok, tgt, C, C_lora, 0)) return 1;
    FILE *f;
    char path[512];
    snprintf(path, sizeof path, "%s/config.txt", dir);
    if (!(f = fopen(path, "w"))) return 1;
    fprintf(f, "B %d\nT %d\nK %d\npad %d\nvocab %d\ndim %d\nlayers %d\nheads %d\nkv_heads %d\nffn %d\nmax_grad_norm %.17g\n"
            "max_grad_norm_lora %.17g\nsigma %.17g\nlora_r %d\nlora_alpha %.17g\nlora_lr %.17g\n",
            B, T, K, PAD, CFG.vocab_size, CFG.dim, CFG.n_layers, CFG.n_heads, CFG.n_kv_heads, CFG.ffn_dim, C,
            C_lora, SIGMA, LORA_R, LORA_ALPHA, (double)LORA_LR);
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--dump")) return dump_all(argv[2], atof(argv[3]), atof(argv[4]));
    test_positions();
    test_model();
    test_pad_row();
    test_bf16();
    test_data();
    if (failures) { printf("%d of %d checks failed\n", failures, checks); return 1; }
    printf("classify: %d checks passed\n", checks);
    return 0;
}
