/* test_dp_precision.c — DP-SGD under --precision bf16 and --checkpoint-activations (samples/dp/dp_sgd.c
   through the real model), on random tiny LLaMAs of the DP rig (tests/test_dp_rig.h).

   1. Checkpointing changes no bit: for direct, ghost, flash and mixed norms with twopass and bk, in
      fp32 and in bf16, and for LoRA, the per-sample norms, clip factors and clipped gradients of a
      physical batch are identical with and without --checkpoint-activations (the backward
      recomputes each block with the same ops in the same order).
   2. What book-keeping keeps, with and without checkpointing: at the last hook of the backward the live
      activations are exactly the inputs A of the layers whose output gradient it copies (IC > T:
      their per-sample gradients would be bigger), lm_head's input and its dlogits (borrowed), and
      the embedding output (the last to be dropped) — no q, k, v, gate, up, statistics or block
      inputs; the same set without checkpointing (the backward frees what no hook asked for).
   3. bf16 against an exact reference: every hook's A and G (bf16 values) are captured, and the
      per-sample gradients computed from them in double give the trainer's norms (1e-5 relative:
      fp32 sums of the same values), its clipped sum Σ_b c_b g_b (1e-5 of the largest entry; the
      two-pass backward's clipped sums are formed from its own, identical, A and G), and
      c_b·‖g_b‖ ≤ C exactly, with no tolerance: no clipped per-sample gradient exceeds C.
   4. Memory under bf16: book-keeping's G copies take 2 bytes per element (bf16, as G), while the
      per-sample gradients and the Gram buffers stay fp32 (4 bytes), as in fp32.
   Each on an untied and a tied model (lm_head = embed_tokens: the cross term of its norm).
   Not here: the kernels' own bf16 checks (test_kernels_bf16.c), the planner (test_suite_plan.sh). */
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

enum { MAXB = 8, MAXSEEN = 64, MAXLIVE = 64 };

/* One hook's arguments, widened to double (pass 1 only). */
typedef struct { int idx, kind, B, T, din, dout; double *A, *G; float *rstd; int *tok; } Seen;
typedef struct {
    DpSgd *d;
    Seen s[MAXSEEN]; int n;
    char live[MAXLIVE][96]; int n_live;   /* activation tags live at the embedding's hook */
} Obs;

static double elem(const float *p, size_t i, KDtype dt) {
    return dt == KDT_BF16 ? (double)kbf16_to_f32(((const uint16_t *)p)[i]) : (double)p[i];
}

static void observe(void *user, const GradHookArgs *a) {
    Obs *o = user;
    if (o->d->pass != 1 || o->n == MAXSEEN) return;
    Seen *s = &o->s[o->n++];
    const size_t rows = (size_t)a->B * a->T;
    s->idx = a->param_index; s->kind = a->kind; s->B = a->B; s->T = a->T; s->din = a->d_in; s->dout = a->d_out;
    s->A = NULL; s->rstd = NULL; s->tok = NULL;
    if (a->A) {
        s->A = xcalloc(rows * a->d_in, sizeof(double));
        for (size_t i = 0; i < rows * a->d_in; i++) s->A[i] = elem(a->A, i, a->dt);
    }
    s->G = xcalloc(rows * a->d_out, sizeof(double));
    for (size_t i = 0; i < rows * a->d_out; i++) s->G[i] = elem(a->G, i, a->dt);
    if (a->rstd) { s->rstd = xcalloc(rows, sizeof(float)); memcpy(s->rstd, a->rstd, rows * sizeof(float)); }
    s->tok = xcalloc(rows, sizeof(int));
    memcpy(s->tok, a->tokens, rows * sizeof(int));
    if (a->kind == HOOK_EMBEDDING) {
        const KBackend *kb = o->d->kb;
        o->n_live = 0;
        for (int i = 0; i < kb->n_live && o->n_live < MAXLIVE; i++)
            if (!strncmp(kb->lives[i].tag, "activations/", 12)) snprintf(o->live[o->n_live++], 96, "%s", kb->lives[i].tag);
    }
}

static void obs_free(Obs *o) {
    for (int i = 0; i < o->n; i++) { free(o->s[i].A); free(o->s[i].G); free(o->s[i].rstd); free(o->s[i].tok); }
    o->n = 0;
}

typedef struct {
    float norm2[MAXB], c[MAXB];
    double *pre;                 /* the clipped sum left in the gradients (or the adapters') */
    size_t P;
    size_t peak_psg, peak_ghost, peak_bk;
    Obs obs;
} Run;

/* One physical batch of B rows, σ = 0; the gradients in out->pre (flat, parameter order). */
static void run(const LlamaConfig *mc, int B, int T, const int *tok, const int *tgt, uint64_t seed, DpNorm norm,
                DpClip clip, double C, int lora, Run *out) {
    Rig r;
    DpConfig dp;
    DpSgd d;
    TrainStrategy st;
    rig_config(&r.cfg, mc, B, T, "sgd");
    dp_config_defaults(&dp, norm, clip);
    dp.max_grad_norm = C; dp.noise_multiplier = 0; dp.flash_tile = 8;
    if (lora) { dp.lora_rank = 3; dp.lora_alpha = 5; dp.lora_targets = LORA_Q | LORA_V | LORA_DOWN; }
    if (dp_sgd_prepare(&d, &st, &dp, &r.cfg, "test")) { printf("FAIL: dp_sgd_prepare\n"); exit(1); }
    rig_open(&r, seed, st.frozen);
    if (dp_sgd_init(&d, &r.s)) { printf("FAIL: dp_sgd_init: %s\n", kbackend_error(&r.kb)); exit(1); }
    memset(&out->obs, 0, sizeof out->obs);
    out->obs.d = &d;
    d.observe = observe; d.observe_user = &out->obs;
    LlamaModel *m = &r.s.model;
    for (int k = 0; k < d.n_lora; k++)           /* B ≠ 0, so that both halves have gradients */
        for (size_t i = 0; i < (size_t)d.lora[k].OC * d.lora[k].r; i++)
            d.lora[k].B[i] = 0.05f * (float)((int)((i * 2654435761u + k) % 97) - 48) / 48.0f;
    llama_zero_grad(m);
    dpmem_reset_peak();
    size_t psg0 = dpmem_live_bytes("per_sample_grads"), gh0 = dpmem_live_bytes("ghost"), bk0 = dpmem_live_bytes("bk");
    rig_rows(&r, tok, tgt, 0);
    if (dp_sgd_physical_batch(&d, &r.s)) { printf("FAIL: physical batch: %s\n", kbackend_error(&r.kb)); exit(1); }
    out->peak_psg = dpmem_peak_bytes("per_sample_grads") - psg0;
    out->peak_ghost = dpmem_peak_bytes("ghost") - gh0;
    out->peak_bk = dpmem_peak_bytes("bk") - bk0;
    memcpy(out->norm2, d.norm2, (size_t)B * sizeof(float));
    memcpy(out->c, d.c, (size_t)B * sizeof(float));
    size_t P = 0;
    if (d.n_lora) for (int k = 0; k < d.n_lora; k++) P += lora_param_count(&d.lora[k]);
    else for (int i = 0; i < m->n_params; i++) P += m->params[i].numel;
    out->P = P;
    out->pre = xcalloc(P, sizeof(double));
    size_t k = 0;
    if (d.n_lora)
        for (int j = 0; j < d.n_lora; j++) {
            const LoraAdapter *l = &d.lora[j];
            for (size_t i = 0; i < (size_t)l->r * l->IC; i++) out->pre[k++] = l->dA[i];
            for (size_t i = 0; i < (size_t)l->OC * l->r; i++) out->pre[k++] = l->dB[i];
        }
    else
        for (int i = 0; i < m->n_params; i++) {
            const float *g = *llama_tensor(&m->dw, &m->params[i]);
            for (size_t j = 0; j < m->params[i].numel; j++) out->pre[k++] = g[j];
        }
    d.observe = NULL;
    dp_sgd_destroy(&d, &r.s);
    rig_close(&r);
}

static void run_free(Run *r) { free(r->pre); r->pre = NULL; obs_free(&r->obs); }

static void data(const LlamaConfig *mc, int B, int T, uint64_t seed, int *tok, int *tgt) {
    uint64_t st = seed * 7919 + 17;
    for (int i = 0; i < B * T; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int)((st >> 33) % (uint64_t)mc->vocab_size);
        tgt[i] = (int)((st >> 13) % (uint64_t)mc->vocab_size);
    }
}

static int same_floats(const float *a, const float *b, int n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

static int same_doubles(const double *a, const double *b, size_t n) {
    for (size_t i = 0; i < n; i++) if (a[i] != b[i]) return 0;
    return 1;
}

/* 1 and 2: checkpointed == not, bit for bit; bk's kept activations under checkpointing. */
static void test_checkpointing(const char *name, const LlamaConfig *mc0, int B, int T, uint64_t seed) {
    int *tok = xcalloc((size_t)B * T, sizeof(int)), *tgt = xcalloc((size_t)B * T, sizeof(int));
    data(mc0, B, T, seed, tok, tgt);
    for (int prec = 0; prec < 2; prec++)
        for (int lora = 0; lora < 2; lora++)
            for (int norm = 0; norm < 4; norm++)
                for (int clip = 0; clip < 2; clip++) {
                    if (lora && !((norm == DP_NORM_FLASH && clip == DP_CLIP_BK) || (norm == DP_NORM_GHOST && clip == DP_CLIP_TWOPASS)))
                        continue;
                    LlamaConfig mc = *mc0, mk = *mc0;
                    mc.precision = mk.precision = prec;
                    mk.checkpoint_activations = 1;
                    Run a, b;
                    run(&mc, B, T, tok, tgt, seed, (DpNorm)norm, (DpClip)clip, 0.05, lora, &a);
                    run(&mk, B, T, tok, tgt, seed, (DpNorm)norm, (DpClip)clip, 0.05, lora, &b);
                    char what[160];
                    snprintf(what, sizeof what, "%s %s %s%s+%s", name, prec ? "bf16" : "fp32", lora ? "lora " : "",
                             dp_norm_name((DpNorm)norm), dp_clip_name((DpClip)clip));
                    int clipped = 0;
                    for (int i = 0; i < B; i++) clipped += a.c[i] < 1.0f;
                    CHECK(clipped > 0, "%s: no sample clipped (the comparison would not cover the factors)", what);
                    CHECK(same_floats(a.norm2, b.norm2, B) && same_floats(a.c, b.c, B) && a.P == b.P && same_doubles(a.pre, b.pre, a.P),
                          "%s: checkpointed run differs (norm2 %.9g vs %.9g)", what, a.norm2[0], b.norm2[0]);
                    if (!lora && clip == DP_CLIP_BK && norm != DP_NORM_DIRECT) {
                        /* what bk keeps: the inputs of layers with IC > T, lm_head's input and dlogits */
                        const int C = mc.dim, QD = mc.dim, F = mc.ffn_dim;
                        char want[MAXLIVE][96];
                        int nw = 0;
                        snprintf(want[nw++], 96, "activations/embed_tokens");
                        snprintf(want[nw++], 96, "activations/norm");
                        snprintf(want[nw++], 96, "activations/logits");
                        for (int l = 0; l < mc.n_layers; l++) {
                            if (C > T) snprintf(want[nw++], 96, "activations/layers.%d.input_layernorm", l);
                            if (QD > T) snprintf(want[nw++], 96, "activations/layers.%d.self_attn.attn_out", l);
                            if (C > T) snprintf(want[nw++], 96, "activations/layers.%d.post_attention_layernorm", l);
                            if (F > T) snprintf(want[nw++], 96, "activations/layers.%d.mlp.act", l);
                        }
                        /* with and without checkpointing: the non-checkpointed backward once retained
                           every activation (retain_saved), 3.1 GB over vanilla's peak at 1b T=4096 */
                        const Run *runs[2] = { &b, &a };
                        for (int r = 0; r < 2; r++) {
                            const Run *x = runs[r];
                            int ok = x->obs.n_live == nw;
                            for (int i = 0; ok && i < nw; i++) {
                                int found = 0;
                                for (int j = 0; j < x->obs.n_live; j++) found |= !strcmp(want[i], x->obs.live[j]);
                                ok = found;
                            }
                            CHECK(ok, "%s: %s checkpointing bk keeps %d activations, want exactly %d (the inputs of the "
                                  "layers whose G is copied, lm_head's input and dlogits, the embedding)", what,
                                  r ? "without" : "under", x->obs.n_live, nw);
                            if (!ok) for (int j = 0; j < x->obs.n_live; j++) printf("     live: %s\n", x->obs.live[j]);
                        }
                    }
                    run_free(&a); run_free(&b);
                }
    free(tok); free(tgt);
}

/* Per-sample gradients (double, flat in parameter order) from what the hooks saw. */
static void exact_grads(const Obs *o, const LlamaModel *pm, int B, double *g, double *n2) {
    size_t P = 0, *off = xcalloc((size_t)pm->n_params, sizeof(size_t));
    for (int i = 0; i < pm->n_params; i++) { off[i] = P; P += pm->params[i].numel; }
    memset(g, 0, (size_t)B * P * sizeof(double));
    for (int k = 0; k < o->n; k++) {
        const Seen *s = &o->s[k];
        const int T = s->T, din = s->din, dout = s->dout;
        for (int b = 0; b < B; b++) {
            double *gb = g + (size_t)b * P + off[s->idx];
            for (int t = 0; t < T; t++) {
                const size_t row = (size_t)b * T + t;
                const double *Gt = s->G + row * dout;
                if (s->kind == HOOK_LINEAR) {
                    const double *At = s->A + row * din;
                    for (int q = 0; q < dout; q++) for (int i = 0; i < din; i++) gb[(size_t)q * din + i] += Gt[q] * At[i];
                } else if (s->kind == HOOK_EMBEDDING) {
                    for (int i = 0; i < dout; i++) gb[(size_t)s->tok[row] * dout + i] += Gt[i];
                } else {
                    const double *At = s->A + row * din;
                    for (int i = 0; i < dout; i++) gb[i] += Gt[i] * At[i] * (double)s->rstd[row];
                }
            }
        }
    }
    for (int b = 0; b < B; b++) {
        n2[b] = 0;
        for (size_t k = 0; k < P; k++) n2[b] += g[(size_t)b * P + k] * g[(size_t)b * P + k];
    }
    free(off);
}

/* 3 and 4: bf16 against the exact reference of its own bf16 values; bf16 memory. */
static void test_bf16(const char *name, const LlamaConfig *mc0, int B, int T, uint64_t seed) {
    int *tok = xcalloc((size_t)B * T, sizeof(int)), *tgt = xcalloc((size_t)B * T, sizeof(int));
    data(mc0, B, T, seed, tok, tgt);
    LlamaConfig mc = *mc0;
    mc.precision = 1;
    LlamaModel pm;
    llama_describe(&pm, &mc, B, T);
    for (int norm = 0; norm < 4; norm++)
        for (int clip = 0; clip < 2; clip++) {
            char what[160];
            snprintf(what, sizeof what, "%s bf16 %s+%s", name, dp_norm_name((DpNorm)norm), dp_clip_name((DpClip)clip));
            Run probe, r;
            run(&mc, B, T, tok, tgt, seed, (DpNorm)norm, (DpClip)clip, 1e30, 0, &probe);
            const size_t P = probe.P;
            double *g = xcalloc((size_t)B * P, sizeof(double)), n2[MAXB], sorted[MAXB];
            exact_grads(&probe.obs, &pm, B, g, n2);
            for (int b = 0; b < B; b++) sorted[b] = sqrt(n2[b]);
            for (int i = 0; i < B; i++) for (int j = i + 1; j < B; j++) if (sorted[j] < sorted[i]) { double t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t; }
            const double C = sorted[B / 2] * 0.999;   /* some samples clip, some do not */
            run(&mc, B, T, tok, tgt, seed, (DpNorm)norm, (DpClip)clip, C, 0, &r);
            double *want = xcalloc(P, sizeof(double)), scale = 0, err = 0;
            int nclip = 0;
            for (int b = 0; b < B; b++) {
                CHECK(fabs(r.norm2[b] - n2[b]) <= 1e-5 * n2[b], "%s: norm² of sample %d %.9g, from its bf16 A and G %.9g",
                      what, b, r.norm2[b], n2[b]);
                CHECK((double)r.c[b] * sqrt(n2[b]) <= C, "%s: sample %d's clipped norm c·‖g‖ = %.12g exceeds C = %.12g",
                      what, b, (double)r.c[b] * sqrt(n2[b]), C);
                nclip += r.c[b] < 1.0f;
                for (size_t k = 0; k < P; k++) want[k] += (double)r.c[b] * g[(size_t)b * P + k];
            }
            CHECK(nclip > 0 && nclip < B, "%s: %d of %d samples clipped (want some, not all)", what, nclip, B);
            for (size_t k = 0; k < P; k++) { scale = fmax(scale, fabs(want[k])); err = fmax(err, fabs(want[k] - r.pre[k])); }
            CHECK(err <= 1e-5 * scale, "%s: clipped sum off by %.3g (scale %.3g)", what, err, scale);
            /* memory: psg and Gram fp32, bk's G copies bf16 */
            const size_t tied_u = mc.tie_embeddings ? (size_t)B * T * mc.dim * 4 : 0;   /* the cross term's u, fp32 */
            if (norm == DP_NORM_GHOST)
                CHECK(r.peak_ghost == 2 * (size_t)B * T * T * 4 + tied_u, "%s: ghost peak %zu, want 2·B·T²·4 (+ B·T·C·4 tied) = %zu",
                      what, r.peak_ghost, 2 * (size_t)B * T * T * 4 + tied_u);
            if (norm == DP_NORM_DIRECT && clip == DP_CLIP_BK)
                CHECK(r.peak_psg == (size_t)B * P * 4, "%s: per_sample_grads peak %zu, want B·|θ|·4 = %zu", what, r.peak_psg,
                      (size_t)B * P * 4);
            if ((norm == DP_NORM_FLASH || norm == DP_NORM_GHOST) && clip == DP_CLIP_BK) {
                size_t want_bk = (size_t)B * T * mc.dim * 2;   /* the embedding's G, bf16 */
                for (int i = 0; i < pm.n_params; i++) {
                    const ParamInfo *q = &pm.params[i];
                    if (q->kind == HOOK_LINEAR && q->which != W_LM_HEAD && q->cols > T) want_bk += (size_t)B * T * q->rows * 2;
                }
                CHECK(r.peak_bk == want_bk, "%s: bk peak %zu, want %zu (G copies at 2 bytes per element)", what, r.peak_bk, want_bk);
            }
            free(g); free(want);
            run_free(&probe); run_free(&r);
        }
    llama_free(&pm);
    free(tok); free(tgt);
}

/* The factor's margin (dp_clip_factors_safe): with norms measured a little low (relative 1e-7, as an
   fp32 sum can be), Opacus's factor lets c·‖g‖ exceed C; the safe factor does not. */
static void test_clip_margin(void) {
    int over_plain = 0, over_safe = 0;
    for (int i = 0; i < 2000; i++) {
        double n = 1.0 + 1000.0 * i / 2000.0 + 1e-3 * (i % 7);   /* true norms 1 .. 1000 */
        double measured = n * (1.0 - 1e-7);
        float n2 = (float)(measured * measured), c1, c2;
        const float C = 0.75f;
        dp_clip_factors(&c1, &n2, 1, C);
        dp_clip_factors_safe(&c2, &n2, 1, C, DP_BF16_CLIP_MARGIN);
        over_plain += (double)c1 * n > (double)C;
        over_safe += (double)c2 * n > (double)C;
        CHECK(c2 <= c1 && (double)c2 >= (double)c1 * (1.0 - 2 * DP_BF16_CLIP_MARGIN), "margin: factor %.9g vs %.9g", c2, c1);
    }
    CHECK(over_plain > 0, "margin: the plain factor never exceeded C: this check would not see a missing margin");
    CHECK(over_safe == 0, "margin: the safe factor let c·‖g‖ exceed C %d times", over_safe);
    float nan2 = NAN, cn;
    dp_clip_factors_safe(&cn, &nan2, 1, 1.0f, DP_BF16_CLIP_MARGIN);
    CHECK(cn == 0.0f, "margin: a non-finite norm must drop the sample (c = 0), got %g", cn);
    printf("ok   clip margin: the plain factor exceeds C for %d of 2000 slightly underestimated norms, the safe one never\n", over_plain);
}

int main(void) {
    LlamaConfig a = { .preset = "test", .vocab_size = 61, .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                      .ffn_dim = 48, .tie_embeddings = 0, .rope_theta = 10000.0f, .norm_eps = 1e-6f };
    LlamaConfig b = { .preset = "test", .vocab_size = 37, .dim = 24, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
                      .ffn_dim = 40, .tie_embeddings = 0, .rope_theta = 10000.0f, .norm_eps = 1e-6f };
    test_clip_margin();
    test_checkpointing("GQA C32 T17 B3", &a, 3, 17, 1);
    test_checkpointing("MHA C24 T33 B4", &b, 4, 33, 2);
    test_bf16("GQA C32 T17 B3", &a, 3, 17, 1);
    test_bf16("MHA C24 T33 B4", &b, 4, 33, 2);
    /* tied embeddings (Llama-3.2's layout): the reference sums both hooks' contributions to the one matrix */
    LlamaConfig ta = a;
    ta.tie_embeddings = 1;
    test_checkpointing("tied GQA C32 T17 B3", &ta, 3, 17, 3);
    test_bf16("tied GQA C32 T17 B3", &ta, 3, 17, 3);
    if (failures) { printf("%d of %d checks failed\n", failures, checks); return 1; }
    printf("dp precision: %d checks passed\n", checks);
    return 0;
}
