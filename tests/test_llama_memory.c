/* test_llama_memory.c — the memory accounting of the model and the plan backend.
   1. Tagged params, grads and optimizer bytes (dpmem's own counters) equal the closed-form counts
      for tiny (hand-counted: 259,392 parameters), small, medium, 1b and 3b (the large ones built on
      the plan backend: nothing is touched), with SGD (no optimizer state) and with frozen tensors
      (no grads, no state), and every tensor is tagged with its own exact size. The Llama-3.2
      presets equal the published config.json field by field and have the published parameter
      counts, 1,235,814,400 and 3,212,749,824 (the tied matrix counted once).
   2. The plan backend replays a real CPU run exactly: two training steps of the same configuration
      through the real loop (train_run) give the same sequence of (tag, bytes, alloc/free) and the
      same peak, on the backend and in dpmem's counters; in fp32 and bf16, with and without
      activation checkpointing.
   3. The memory limit: a build that does not fit fails cleanly with "out of memory" and the tag.
   Not here: the gradients (test_llama_grad) or the CLI (test_llama_cli.sh). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "llama/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define EXPECT_EQ(what, got, want) do { unsigned long long g_ = (got), w_ = (want); \
    if (g_ != w_) { printf("FAIL %s: %llu, want %llu\n", what, g_, w_); failures++; } \
    else printf("ok   %s = %llu\n", what, g_); } while (0)

/* Closed form, written out independently of llama.c. */
static unsigned long long closed_form(int V, int C, int L, int NH, int NKV, int F, int tied) {
    unsigned long long HS = (unsigned long long)C / NH, KD = HS * NKV;
    unsigned long long attn = 2ull * C * C + 2ull * KD * C, mlp = 3ull * C * F, norms = 2ull * C;
    return (unsigned long long)V * C * (tied ? 1 : 2) + (unsigned long long)L * (attn + mlp + norms) + C;
}

static int freeze_attention(void *user, const ParamInfo *p) { (void)user; return p->group == GROUP_ATTENTION; }

static void check_preset(const char *preset, int use_plan, const char *optimizer, int frozen, int expect_ffn) {
    TrainConfig c;
    config_defaults(&c);
    config_preset(&c, preset);
    LlamaConfig *mc = &c.model;
    if (mc->ffn_dim != expect_ffn) { printf("FAIL %s ffn %d, want %d (LLaMA's rule)\n", preset, mc->ffn_dim, expect_ffn); failures++; }
    KBackend kb;
    if (use_plan) kbackend_plan_init(&kb, &kops_cpu, 2); else kbackend_cpu_init(&kb, 2);
    LlamaModel m;
    if (llama_build(&m, &kb, mc, 1, 8, optimizer, 1, frozen ? freeze_attention : NULL, NULL) != 0) {
        printf("FAIL build %s: %s\n", preset, kbackend_error(&kb)); failures++; return;
    }
    unsigned long long P = closed_form(mc->vocab_size, mc->dim, mc->n_layers, mc->n_heads, mc->n_kv_heads, mc->ffn_dim, 0);
    unsigned long long attn = (unsigned long long)mc->n_layers * 4ull * mc->dim * mc->dim;   /* MHA presets */
    unsigned long long trainable = frozen ? P - attn : P;
    char what[96];
    snprintf(what, sizeof what, "%s%s%s params bytes", preset, frozen ? " (attention frozen)" : "", !strcmp(optimizer, "sgd") ? " sgd" : "");
    EXPECT_EQ(what, dpmem_live_bytes("params"), 4 * P);
    snprintf(what, sizeof what, "%s%s grads bytes", preset, frozen ? " (attention frozen)" : "");
    EXPECT_EQ(what, dpmem_live_bytes("grads"), 4 * trainable);
    snprintf(what, sizeof what, "%s%s %s optimizer bytes", preset, frozen ? " (attention frozen)" : "", optimizer);
    EXPECT_EQ(what, dpmem_live_bytes("optimizer"), !strcmp(optimizer, "adamw") ? 8 * trainable : 0);
    EXPECT_EQ("parameter count (llama_param_count)", llama_param_count(mc), P);
    for (int i = 0; i < m.n_params; i++) {   /* each tensor its own tag, its own exact size */
        const ParamInfo *p = &m.params[i];
        if (dpmem_tag_bytes(*llama_tensor(&m.w, p)) != p->numel * 4) { printf("FAIL tag size of params/%s\n", p->name); failures++; }
    }
    llama_free(&m);
    if (dpmem_live_bytes(NULL) != 0) { printf("FAIL %zu tagged bytes live after llama_free\n", dpmem_live_bytes(NULL)); failures++; }
    kbackend_destroy(&kb);
}

/* ---- plan == CPU --------------------------------------------------------------------------------- */
typedef struct { char tag[96]; size_t bytes; int alloc; } Event;
typedef struct { Event *ev; int n, cap; } Trace;

static void record(void *user, const char *tag, size_t bytes, int is_alloc) {
    Trace *t = user;
    if (t->n == t->cap) { t->cap = t->cap ? 2 * t->cap : 1024; t->ev = realloc(t->ev, (size_t)t->cap * sizeof *t->ev); }
    Event *e = &t->ev[t->n++];
    snprintf(e->tag, sizeof e->tag, "%s", tag);
    e->bytes = bytes; e->alloc = is_alloc;
}

static size_t run_traced(const char *device, Trace *t, size_t *by_category_at_peak, int bf16, int ckpt) {
    TrainConfig c;
    config_defaults(&c);
    c.model.n_kv_heads = 2; c.batch_size = 2; c.seq_len = 17; c.steps = 2; c.grad_accum = 2;
    c.model.precision = bf16; c.model.checkpoint_activations = ckpt;
    c.quiet = 1; c.threads = 2; c.run_name = "test_llama_memory";
    snprintf(c.device, sizeof c.device, "%s", device);
    TrainStrategy st = { .name = "vanilla", .trace = record, .trace_user = t };
    dpmem_reset_peak();
    int rc = train_run(&c, &st);
    if (rc != 0) { printf("FAIL train_run on %s: exit %d\n", device, rc); failures++; }
    static const char *cats[] = { "params", "grads", "optimizer", "activations", "workspace", "input" };
    for (int i = 0; i < 6; i++) by_category_at_peak[i] = dpmem_bytes_at_peak(cats[i]);
    return dpmem_peak_bytes(NULL);
}

static void check_plan_matches_cpu(int bf16, int ckpt) {
    Trace cpu = { 0 }, plan = { 0 };
    size_t cat_cpu[6], cat_plan[6];
    size_t peak_cpu = run_traced("cpu", &cpu, cat_cpu, bf16, ckpt);
    size_t peak_plan = run_traced("plan", &plan, cat_plan, bf16, ckpt);
    printf("     (%s%s)\n", bf16 ? "bf16" : "fp32", ckpt ? ", activations checkpointed" : "");
    int first_diff = -1;
    for (int i = 0; i < cpu.n && i < plan.n && first_diff < 0; i++)
        if (strcmp(cpu.ev[i].tag, plan.ev[i].tag) || cpu.ev[i].bytes != plan.ev[i].bytes || cpu.ev[i].alloc != plan.ev[i].alloc) first_diff = i;
    if (cpu.n != plan.n || first_diff >= 0) {
        printf("FAIL plan vs cpu allocation sequences differ: %d vs %d events, first difference at %d", cpu.n, plan.n, first_diff);
        if (first_diff >= 0) printf(" (cpu %s %zu, plan %s %zu)", cpu.ev[first_diff].tag, cpu.ev[first_diff].bytes, plan.ev[first_diff].tag, plan.ev[first_diff].bytes);
        printf("\n"); failures++;
    } else {
        printf("ok   plan and cpu: the same %d allocation/free events, tag by tag and byte by byte\n", cpu.n);
    }
    int allocs = 0, has_scratch = 0, has_act = 0;
    for (int i = 0; i < cpu.n; i++) {
        allocs += cpu.ev[i].alloc;
        if (!strcmp(cpu.ev[i].tag, "workspace/attn_backward")) has_scratch = 1;
        if (bf16 && !strcmp(cpu.ev[i].tag, "params/lm_head.bf16")) has_scratch |= 2;
        if (!strcmp(cpu.ev[i].tag, "activations/layers.1.self_attn.lse")) has_act = 1;
    }
    if (allocs * 2 != cpu.n) { printf("FAIL %d allocations but %d frees: something leaked\n", allocs, cpu.n - allocs); failures++; }
    if (!(has_scratch & 1) || !has_act) { printf("FAIL the trace lacks op scratch or saved activations\n"); failures++; }
    if (bf16 && !(has_scratch & 2)) { printf("FAIL the bf16 trace lacks the weights' bf16 copies\n"); failures++; }
    EXPECT_EQ("peak tagged bytes, plan == cpu", peak_plan, peak_cpu);
    for (int i = 0; i < 6; i++) if (cat_cpu[i] != cat_plan[i]) { printf("FAIL category %d at the peak: cpu %zu plan %zu\n", i, cat_cpu[i], cat_plan[i]); failures++; }
    /* The peak is at the end of the forward: params + grads + optimizer + every saved activation. */
    if (!(cat_cpu[3] > 0 && peak_cpu > cat_cpu[0] + cat_cpu[1] + cat_cpu[2])) { printf("FAIL peak breakdown looks wrong\n"); failures++; }
    free(cpu.ev); free(plan.ev);
}

static void check_mem_limit(void) {
    TrainConfig c;
    config_defaults(&c);
    KBackend kb;
    kbackend_plan_init(&kb, &kops_cpu, 2);
    kb.mem_limit = 300000;   /* the 256,000-byte embedding and two 16 KiB projections fit, the third does not */
    LlamaModel m;
    int rc = llama_build(&m, &kb, &c.model, 1, 8, "adamw", 1, NULL, NULL);
    if (rc == 0 || strstr(kbackend_error(&kb), "out of memory") == NULL || strstr(kbackend_error(&kb), "params/") == NULL) {
        printf("FAIL mem-limit: rc %d, error '%s'\n", rc, kbackend_error(&kb)); failures++;
    } else printf("ok   mem-limit: %s\n", kbackend_error(&kb));
    if (kb.live > kb.mem_limit) { printf("FAIL live %zu above the limit\n", kb.live); failures++; }
    llama_free(&m);
    kbackend_destroy(&kb);
}

/* The Llama-3.2 presets: the published config.json of meta-llama/Llama-3.2-1B and -3B, field by
   field, and the published parameter counts (tied: one V x C matrix), built on the plan backend. */
static void check_llama32(const char *preset, int C, int L, int NH, unsigned long long published) {
    TrainConfig c;
    config_defaults(&c);
    if (config_preset(&c, preset) != 0) { printf("FAIL no preset %s\n", preset); failures++; return; }
    const LlamaConfig *m = &c.model;
    int ok = m->vocab_size == 128256 && m->dim == C && m->n_layers == L && m->n_heads == NH && m->n_kv_heads == 8 &&
             m->ffn_dim == 8192 && m->tie_embeddings == 1 && m->rope_theta == 500000.0f && m->norm_eps == 1e-5f &&
             m->rope_factor == 32.0f && m->rope_low_freq_factor == 1.0f && m->rope_high_freq_factor == 4.0f &&
             m->rope_original_max_pos == 8192 && m->max_pos == 131072;
    if (!ok) { printf("FAIL %s: a field differs from the published config.json\n", preset); failures++; }
    else printf("ok   %s fields = config.json\n", preset);
    char what[96];
    snprintf(what, sizeof what, "%s parameter count", preset);
    EXPECT_EQ(what, llama_param_count(m), published);
    EXPECT_EQ("closed form (tied, GQA)", closed_form(m->vocab_size, C, L, NH, 8, 8192, 1), published);
    KBackend kb;
    kbackend_plan_init(&kb, &kops_cpu, 2);
    LlamaModel lm;
    if (llama_build(&lm, &kb, m, 1, 8, "adamw", 1, NULL, NULL) != 0) { printf("FAIL build %s\n", preset); failures++; return; }
    snprintf(what, sizeof what, "%s params bytes (tied: counted once)", preset);
    EXPECT_EQ(what, dpmem_live_bytes("params"), 4 * published);
    snprintf(what, sizeof what, "%s grads bytes", preset);
    EXPECT_EQ(what, dpmem_live_bytes("grads"), 4 * published);
    llama_free(&lm);
    kbackend_destroy(&kb);
}

int main(int argc, char **argv) {
    (void)argc;
    train_prefer_passive_omp(argv);
    check_preset("tiny", 0, "adamw", 0, 256);
    EXPECT_EQ("tiny parameter count (hand-counted)", closed_form(1000, 64, 2, 4, 4, 256, 0), 259392);
    check_preset("tiny", 0, "sgd", 1, 256);
    check_preset("small", 1, "adamw", 0, 1536);
    check_preset("medium", 1, "adamw", 1, 2816);
    check_preset("1b", 1, "adamw", 0, 5632);    /* TinyLlama's FFN width for dim 2048 */
    check_preset("3b", 1, "adamw", 0, 8704);
    check_llama32("llama3.2-1b", 2048, 16, 32, 1235814400ull);
    check_llama32("llama3.2-3b", 3072, 28, 24, 3212749824ull);
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int ckpt = 0; ckpt < 2; ckpt++) check_plan_matches_cpu(bf16, ckpt);
    check_mem_limit();
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("all memory accounting checks passed\n");
    return 0;
}
