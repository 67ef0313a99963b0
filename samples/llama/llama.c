/* llama.c — the LLaMA model on a kernels.h backend: parameter table and allocation, forward,
   loss, backward with weight-gradient hooks (see llama.h). Every buffer is tagged through kbuf_alloc;
   the forward allocates each saved activation as it produces it and the backward frees it as soon as
   it has consumed it, so the tagged timeline has the shape a real framework's has.
   Not here: the optimizer schedule and the loop (train.c), any arithmetic (kernels/). */
#include "llama.h"
#include "classify.h"
#include "dpmem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Order of a block's tensors, as transformers' named_parameters() lists them. */
static const WhichTensor BLOCK_ORDER[9] = {
    W_Q_PROJ, W_K_PROJ, W_V_PROJ, W_O_PROJ, W_GATE_PROJ, W_UP_PROJ, W_DOWN_PROJ,
    W_INPUT_LAYERNORM, W_POST_ATTENTION_LAYERNORM
};

const char *param_group_name(ParamGroup g) {
    static const char *const names[] = { "embedding", "attention", "mlp", "norm", "head" };
    return (unsigned)g < GROUP_COUNT ? names[g] : "?";
}

float **llama_tensor(LlamaTensors *t, const ParamInfo *p) {
    switch (p->which) {
    case W_EMBED_TOKENS: return &t->embed_tokens;
    case W_NORM: return &t->norm;
    case W_LM_HEAD: return &t->lm_head;
    default: break;
    }
    LlamaLayerTensors *l = &t->layers[p->layer];
    switch (p->which) {
    case W_INPUT_LAYERNORM: return &l->input_layernorm;
    case W_Q_PROJ: return &l->q_proj;
    case W_K_PROJ: return &l->k_proj;
    case W_V_PROJ: return &l->v_proj;
    case W_O_PROJ: return &l->o_proj;
    case W_POST_ATTENTION_LAYERNORM: return &l->post_attention_layernorm;
    case W_GATE_PROJ: return &l->gate_proj;
    case W_UP_PROJ: return &l->up_proj;
    default: return &l->down_proj;
    }
}

/* Index of a tensor in m->params (the tied lm_head is embed_tokens, index 0). */
static int param_index(const LlamaModel *m, int layer, WhichTensor which) {
    if (which == W_EMBED_TOKENS) return 0;
    if (which == W_NORM) return 1 + 9 * m->L;
    if (which == W_LM_HEAD) return m->cfg.tie_embeddings ? 0 : 2 + 9 * m->L;
    for (int j = 0; j < 9; j++) if (BLOCK_ORDER[j] == which) return 1 + 9 * layer + j;
    return -1;
}

static void add_param(LlamaModel *m, int layer, WhichTensor which, int rows, int cols) {
    ParamInfo *p = &m->params[m->n_params++];
    memset(p, 0, sizeof *p);
    p->layer = layer; p->which = which; p->rows = rows; p->cols = cols;
    p->numel = (size_t)rows * cols; p->trainable = 1;
    static const char *const block_names[] = {
        [W_INPUT_LAYERNORM] = "input_layernorm", [W_Q_PROJ] = "self_attn.q_proj", [W_K_PROJ] = "self_attn.k_proj",
        [W_V_PROJ] = "self_attn.v_proj", [W_O_PROJ] = "self_attn.o_proj",
        [W_POST_ATTENTION_LAYERNORM] = "post_attention_layernorm", [W_GATE_PROJ] = "mlp.gate_proj",
        [W_UP_PROJ] = "mlp.up_proj", [W_DOWN_PROJ] = "mlp.down_proj",
    };
    switch (which) {
    case W_EMBED_TOKENS:
        snprintf(p->name, sizeof p->name, "embed_tokens");
        snprintf(p->hf_name, sizeof p->hf_name, "model.embed_tokens.weight");
        p->group = GROUP_EMBEDDING; p->kind = HOOK_EMBEDDING; break;
    case W_NORM:
        snprintf(p->name, sizeof p->name, "norm");
        snprintf(p->hf_name, sizeof p->hf_name, "model.norm.weight");
        p->group = GROUP_NORM; p->kind = HOOK_RMSNORM; break;
    case W_LM_HEAD:   /* classify: LlamaForSequenceClassification's score */
        snprintf(p->name, sizeof p->name, "%s", m->cfg.task == LLAMA_TASK_CLASSIFY ? "score" : "lm_head");
        snprintf(p->hf_name, sizeof p->hf_name, "%s.weight", p->name);
        p->group = GROUP_HEAD; p->kind = HOOK_LINEAR; break;
    default:
        snprintf(p->name, sizeof p->name, "layers.%d.%s", layer, block_names[which]);
        snprintf(p->hf_name, sizeof p->hf_name, "model.layers.%d.%s.weight", layer, block_names[which]);
        p->kind = (which == W_INPUT_LAYERNORM || which == W_POST_ATTENTION_LAYERNORM) ? HOOK_RMSNORM : HOOK_LINEAR;
        p->group = p->kind == HOOK_RMSNORM ? GROUP_NORM
                 : (which == W_GATE_PROJ || which == W_UP_PROJ || which == W_DOWN_PROJ) ? GROUP_MLP : GROUP_ATTENTION;
    }
}

int llama_describe(LlamaModel *m, const LlamaConfig *cfg, int B, int T) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->C = cfg->dim; m->L = cfg->n_layers; m->NH = cfg->n_heads; m->NKV = cfg->n_kv_heads;
    m->HS = cfg->dim / cfg->n_heads; m->F = cfg->ffn_dim; m->V = cfg->vocab_size;
    if (cfg->task == LLAMA_TASK_CLASSIFY) m->cfg.tie_embeddings = 0;   /* score is its own matrix */
    m->HV = cfg->task == LLAMA_TASK_CLASSIFY ? cfg->num_labels : m->V;
    m->B = B; m->T = T;
    m->dt = cfg->precision ? KDT_BF16 : KDT_F32;
    m->ckpt = cfg->checkpoint_activations;
    int n = 3 + 9 * m->L;
    m->params = calloc((size_t)n, sizeof *m->params);
    if (!m->params) { fprintf(stderr, "error: out of host memory for the parameter table\n"); return -1; }
    int C = m->C, QD = m->NH * m->HS, KD = m->NKV * m->HS, F = m->F;
    add_param(m, -1, W_EMBED_TOKENS, m->V, C);
    for (int l = 0; l < m->L; l++)
        for (int j = 0; j < 9; j++) {
            WhichTensor w = BLOCK_ORDER[j];
            int rows = w == W_Q_PROJ ? QD : w == W_K_PROJ || w == W_V_PROJ ? KD : w == W_O_PROJ ? C
                     : w == W_GATE_PROJ || w == W_UP_PROJ ? F : w == W_DOWN_PROJ ? C : 1;
            int cols = w == W_O_PROJ ? QD : w == W_DOWN_PROJ ? F : C;
            add_param(m, l, w, rows, cols);
        }
    add_param(m, -1, W_NORM, 1, C);
    if (!m->cfg.tie_embeddings) add_param(m, -1, W_LM_HEAD, m->HV, C);
    for (int i = 0; i < m->n_params; i++) m->bytes_params += m->params[i].numel * sizeof(float);
    m->bytes_trainable = m->bytes_params;
    m->w.layers = calloc((size_t)m->L, sizeof(LlamaLayerTensors));
    m->wsh.layers = calloc((size_t)m->L, sizeof(LlamaLayerTensors));
    m->dw.layers = calloc((size_t)m->L, sizeof(LlamaLayerTensors));
    m->m.layers = calloc((size_t)m->L, sizeof(LlamaLayerTensors));
    m->v.layers = calloc((size_t)m->L, sizeof(LlamaLayerTensors));
    m->w16.layers = calloc((size_t)m->L, sizeof(LlamaLayerTensors));
    m->acts.layers = calloc((size_t)m->L, sizeof(LlamaLayerActs));
    if (!m->w.layers || !m->dw.layers || !m->m.layers || !m->v.layers || !m->w16.layers || !m->wsh.layers || !m->acts.layers) {
        fprintf(stderr, "error: out of host memory for the model tables\n");
        return -1;
    }
    return 0;
}

KRope llama_rope(const LlamaConfig *c) {
    KRope r = { c->rope_theta, c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor,
                (float)c->rope_original_max_pos };
    return r;
}

size_t llama_param_count(const LlamaConfig *c) {
    size_t C = (size_t)c->dim, HS = C / (size_t)c->n_heads, KD = HS * (size_t)c->n_kv_heads, F = (size_t)c->ffn_dim;
    size_t block = 2 * C * C + 2 * KD * C + 3 * F * C + 2 * C;
    if (c->task == LLAMA_TASK_CLASSIFY)
        return (size_t)c->vocab_size * C + (size_t)c->num_labels * C + (size_t)c->n_layers * block + C;
    return (size_t)c->vocab_size * C * (c->tie_embeddings ? 1 : 2) + (size_t)c->n_layers * block + C;
}

/* ---- initialisation ---------------------------------------------------------------------------- */

/* A tensor's stream: "INIT" in the high word of noise.h's step (the DP noise's steps have 0 there,
   Poisson sampling "POIS"), FNV-1a of its name in the low word. Its values then depend on the seed,
   its name and the index alone, not on which other tensors exist or in what order. */
uint64_t llama_init_stream(const char *name) {
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 16777619u;
    return (uint64_t)0x494E4954u << 32 | h;
}

/* normal(0, 0.02) from the tensor's own stream, drawn on the backend that holds it (no host copy; a
   plan records nothing for it), or 1 for norm weights. */
static int init_tensor(LlamaModel *m, float *dst, const ParamInfo *p, uint64_t seed) {
    /* --init-from: the checkpoint fills them; but classify's score, which a causal LM's checkpoint lacks, is
       drawn as transformers initialises a new head (normal(0, initializer_range 0.02)), and a classifier's
       checkpoint overwrites it */
    if (m->cfg.no_init && !(m->cfg.task == LLAMA_TASK_CLASSIFY && p->which == W_LM_HEAD)) return 0;
    if (p->kind == HOOK_RMSNORM) return fill_buffer(m->kb, dst, 1.0f, p->numel);
    return init_normal(m->kb, dst, p->numel, LLAMA_INIT_STD, seed, llama_init_stream(p->name));
}

/* ---- build / free ------------------------------------------------------------------------------ */

/* Weights a GEMM reads get a bf16 copy: the linear layers and lm_head (the tied matrix once, as
   embed_tokens, whose lookup itself reads the fp32 master). */
static int has_bf16_copy(const LlamaModel *m, const ParamInfo *p) {
    return p->kind == HOOK_LINEAR || (p->which == W_EMBED_TOKENS && m->cfg.tie_embeddings);
}

int llama_bf16_only(const LlamaModel *m, const ParamInfo *p) {
    /* the embedding table too: its lookup gathers bf16 rows (bf16_lookup), whole 32-bit words when C is even */
    return m->dt == KDT_BF16 && !p->trainable && (p->kind == HOOK_LINEAR || (p->which == W_EMBED_TOKENS && m->C % 2 == 0));
}

void llama_slice(size_t n, int world, int rank, size_t *lo, size_t *len) {
    const size_t w = world > 0 ? (size_t)world : 1, r = (size_t)rank, q = n / w, rem = n % w;
    *lo = r * q + (r < rem ? r : rem);
    *len = q + (r < rem ? 1 : 0);
}

int llama_master_sharded(const LlamaModel *m, const ParamInfo *p) {
    /* (a linear layer or an untied lm_head: the tied matrix is HOOK_EMBEDDING, its lookup reads the master;
       a classifier's score, K·C floats, stays whole: LoRA saves it beside the adapters from rank 0) */
    /* --zero 3 also an untied embedding's table (its lookup gathers it in fp32; its gradient reads no weight) */
    const int embed = m->cfg.params_by_unit && p->which == W_EMBED_TOKENS && !m->cfg.tie_embeddings;
    return m->shard_world > 0 && (m->dt == KDT_BF16 || m->cfg.params_by_unit) && p->trainable && (p->kind == HOOK_LINEAR || embed) &&
           !(m->cfg.task == LLAMA_TASK_CLASSIFY && p->which == W_LM_HEAD);
}

int llama_params_sharded(const LlamaModel *m) { return m->shard_world > 0 && m->cfg.params_by_unit; }

int llama_base_sharded(const LlamaModel *m, const ParamInfo *p) {
    return llama_params_sharded(m) && !p->trainable && p->kind == HOOK_LINEAR;   /* (the tied matrix is HOOK_EMBEDDING: whole) */
}

int llama_held_sliced(const LlamaModel *m, const ParamInfo *p) { return llama_master_sharded(m, p) || llama_base_sharded(m, p); }

KDtype llama_slice_dt(const LlamaModel *m, const ParamInfo *p) { return llama_bf16_only(m, p) ? KDT_BF16 : KDT_F32; }

static void *alloc_tagged(KBackend *kb, size_t bytes, const char *fmt, ...) {
    char tag[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tag, sizeof tag, fmt, ap);
    va_end(ap);
    return kbuf_alloc(kb, bytes, tag);
}

int llama_build(LlamaModel *m, KBackend *kb, const LlamaConfig *cfg, int B, int T, const char *optimizer,
                unsigned long long seed, int (*frozen)(void *user, const ParamInfo *p), void *frozen_user) {
    return llama_build_sharded(m, kb, cfg, B, T, optimizer, seed, frozen, frozen_user, 0, 0);
}

/* A tensor held sliced (llama_held_sliced): the whole tensor drawn into a temporary fp32 buffer (the
   same values as an unsharded run's), rounded whole into its bf16 copy (a sharded master below --zero 3),
   its slice kept (a base kept in bf16 alone: the slice rounded, RNE as the whole one is). */
static int init_sharded(LlamaModel *m, const ParamInfo *p, uint64_t seed) {
    KBackend *kb = m->kb;
    size_t lo, len;
    llama_slice(p->numel, m->shard_world, m->shard_rank, &lo, &len);
    const int whole = !llama_params_sharded(m);   /* --zero 1|2 under bf16: the whole bf16 copy (--zero 3: none) */
    const KDtype sdt = llama_slice_dt(m, p);
    float *x16 = whole ? alloc_tagged(kb, p->numel * KDT_SIZE(KDT_BF16), "params/%s.bf16", p->name) : NULL;
    float *sl = alloc_tagged(kb, (len ? len : 1) * KDT_SIZE(sdt), sdt == KDT_BF16 ? "params/%s.bf16.shard" : "params/%s.shard", p->name);
    if ((whole && !x16) || !sl) { kbuf_free(kb, x16); kbuf_free(kb, sl); return -1; }
    *llama_tensor(&m->w16, p) = x16;
    *llama_tensor(&m->wsh, p) = sl;
    if (m->cfg.no_init && !(m->cfg.task == LLAMA_TASK_CLASSIFY && p->which == W_LM_HEAD)) return 0;   /* the checkpoint fills them */
    float *x = alloc_tagged(kb, p->numel * sizeof(float), "workspace/init.%s", p->name);
    int rc = !x || init_tensor(m, x, p, seed) || (x16 && narrow_buffer(kb, x16, x, p->numel)) ||
             (len && (sdt == KDT_BF16 ? narrow_buffer(kb, sl, x + lo, len) : copy_buffer(kb, sl, x + lo, len)));
    kbuf_free(kb, x);
    return rc ? -1 : 0;
}

int llama_build_sharded(LlamaModel *m, KBackend *kb, const LlamaConfig *cfg, int B, int T, const char *optimizer,
                        unsigned long long seed, int (*frozen)(void *user, const ParamInfo *p), void *frozen_user,
                        int world, int rank) {
    if (llama_describe(m, cfg, B, T) != 0) return -1;
    m->kb = kb;
    m->shard_world = world; m->shard_rank = rank;
    int adam = strcmp(optimizer, "adamw") == 0;
    m->bytes_trainable = 0;
    for (int i = 0; i < m->n_params; i++) {
        ParamInfo *p = &m->params[i];
        if (frozen && frozen(frozen_user, p)) p->trainable = 0;
        if (p->trainable) m->bytes_trainable += p->numel * sizeof(float);
    }
    for (int i = 0; i < m->n_params; i++) {
        ParamInfo *p = &m->params[i];
        if (llama_held_sliced(m, p)) { if (init_sharded(m, p, seed) != 0) return -1; continue; }
        if (llama_bf16_only(m, p)) {   /* drawn in fp32 (the same values as an fp32 run's), kept rounded */
            float *x16 = alloc_tagged(kb, p->numel * KDT_SIZE(KDT_BF16), "params/%s.bf16", p->name);
            if (!x16) return -1;
            *llama_tensor(&m->w16, p) = x16;
            if (m->cfg.no_init) continue;   /* the checkpoint fills it */
            float *x = alloc_tagged(kb, p->numel * sizeof(float), "workspace/init.%s", p->name);
            int rc = !x || init_tensor(m, x, p, seed) || narrow_buffer(kb, x16, x, p->numel);
            kbuf_free(kb, x);
            if (rc) return -1;
            continue;
        }
        float *x = alloc_tagged(kb, p->numel * sizeof(float), "params/%s", p->name);
        if (!x || init_tensor(m, x, p, seed) != 0) return -1;
        *llama_tensor(&m->w, p) = x;
    }
    for (int i = 0; m->dt == KDT_BF16 && i < m->n_params; i++) {   /* the GEMMs' bf16 copies */
        ParamInfo *p = &m->params[i];
        if (!has_bf16_copy(m, p) || llama_bf16_only(m, p) || llama_master_sharded(m, p)) continue;
        if (!(*llama_tensor(&m->w16, p) = alloc_tagged(kb, p->numel * KDT_SIZE(KDT_BF16), "params/%s.bf16", p->name))) return -1;
    }
    for (int i = 0; !cfg->grads_by_unit && i < m->n_params; i++) {   /* (grads_by_unit: the trainer's, unit by unit) */
        ParamInfo *p = &m->params[i];
        if (!p->trainable) continue;
        if (!(*llama_tensor(&m->dw, p) = alloc_tagged(kb, p->numel * sizeof(float), "grads/%s", p->name))) return -1;
    }
    for (int i = 0; adam && i < m->n_params; i++) {
        ParamInfo *p = &m->params[i];
        if (!p->trainable) continue;
        if (!(*llama_tensor(&m->m, p) = alloc_tagged(kb, p->numel * sizeof(float), "optimizer/%s.exp_avg", p->name))) return -1;
        if (!(*llama_tensor(&m->v, p) = alloc_tagged(kb, p->numel * sizeof(float), "optimizer/%s.exp_avg_sq", p->name))) return -1;
    }
    if (m->cfg.tie_embeddings) {
        m->w.lm_head = m->w.embed_tokens; m->dw.lm_head = m->dw.embed_tokens; m->w16.lm_head = m->w16.embed_tokens;
    }
    /* zero grads and Adam state explicitly: a device allocator need not zero-fill */
    for (int i = 0; i < m->n_params; i++) {
        ParamInfo *p = &m->params[i];
        float *ts[3] = { *llama_tensor(&m->dw, p), *llama_tensor(&m->m, p), *llama_tensor(&m->v, p) };
        for (int j = 0; j < 3; j++) if (ts[j] && fill_buffer(kb, ts[j], 0.0f, p->numel) != 0) return -1;
    }
    size_t N = (size_t)B * T;
    if (!(m->tokens = kbuf_alloc(kb, N * sizeof(int), "input/tokens"))) return -1;
    if (!(m->targets = kbuf_alloc(kb, N * sizeof(int), "input/targets"))) return -1;
    if (cfg->task == LLAMA_TASK_CLASSIFY) {
        if (!(m->labels = kbuf_alloc(kb, (size_t)B * sizeof(int), "input/labels"))) return -1;
        if (!(m->pooled = kbuf_alloc(kb, (size_t)B * m->HV * sizeof(float), "workspace/score.pooled_logits"))) return -1;
        m->last = malloc((size_t)B * sizeof(int));
        m->host_stage = malloc(2 * N * sizeof(int));
        if (!m->last || !m->host_stage) { snprintf(kb->err, sizeof kb->err, "out of host memory (classify staging)"); return -1; }
    }
    return 0;
}

/* Frees every saved activation still live (a forward without backward, an error path). */
static void release_acts(LlamaModel *m) {
    KBackend *kb = m->kb;
    LlamaActs *a = &m->acts;
    if (!kb || !a->layers) return;
    float **top[] = { &a->embed, &a->lnf, &a->lnf_rstd, &a->logits, &a->losses };
    for (size_t i = 0; i < sizeof top / sizeof *top; i++) { kbuf_free(kb, *top[i]); *top[i] = NULL; }
    for (int l = 0; l < m->L; l++) {
        LlamaLayerActs *x = &a->layers[l];
        float **all[] = { &x->ln1, &x->ln1_rstd, &x->q, &x->k, &x->v, &x->attn, &x->lse, &x->resid_mid,
                          &x->ln2, &x->ln2_rstd, &x->gate, &x->up, &x->h, &x->resid_out };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) { kbuf_free(kb, *all[i]); *all[i] = NULL; }
    }
}

void llama_release_saved(LlamaModel *m) {
    for (int i = 0; i < m->n_deferred; i++) kbuf_free(m->kb, m->deferred[i]);
    m->n_deferred = 0;
    m->n_keep = 0;
}

void llama_free(LlamaModel *m) {
    if (m->kb) {
        release_acts(m);
        llama_release_saved(m);
        LlamaTensors *sets[] = { &m->v, &m->m, &m->dw, &m->w16, &m->wsh, &m->w };
        for (int s = 0; s < 6; s++)
            for (int i = m->n_params - 1; i >= 0; i--) {
                float **slot = llama_tensor(sets[s], &m->params[i]);
                kbuf_free(m->kb, *slot);
                *slot = NULL;
            }
        kbuf_free(m->kb, m->pooled);
        kbuf_free(m->kb, m->labels);
        kbuf_free(m->kb, m->targets);
        kbuf_free(m->kb, m->tokens);
    }
    free(m->last);
    free(m->host_stage);
    free(m->deferred);
    free(m->keep);
    free(m->w.layers); free(m->dw.layers); free(m->m.layers); free(m->v.layers); free(m->w16.layers); free(m->wsh.layers);
    free(m->acts.layers);
    free(m->params);
    memset(m, 0, sizeof *m);
}

/* ---- forward ----------------------------------------------------------------------------------- */

#define TRY(x) do { if ((x) != 0) return -1; } while (0)
/* A saved buffer of `count` elements of the activation type, or of fp32 (statistics, logits). */
#define SAVE(ptr, count, ...) do { if (!((ptr) = alloc_tagged(kb, (size_t)(count) * KDT_SIZE(dt), __VA_ARGS__))) return -1; } while (0)
#define SAVE32(ptr, count, ...) do { if (!((ptr) = alloc_tagged(kb, (size_t)(count) * sizeof(float), __VA_ARGS__))) return -1; } while (0)
#define DROP(ptr) do { kbuf_free(kb, (ptr)); (ptr) = NULL; } while (0)

/* bf16: every GEMM weight's copy from its master (as autocast casts them at each forward). */
static int cast_weights(LlamaModel *m) {
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        float *c = *llama_tensor(&m->w16, p), *master = *llama_tensor(&m->w, p);
        if (c && master) TRY(narrow_buffer(m->kb, c, master, p->numel));   /* bf16-only weights never change */
    }
    return 0;
}

/* The weights the GEMMs of block l read: the bf16 copies under bf16. */
static const LlamaLayerTensors *gemm_weights(const LlamaModel *m, int l) {
    return m->dt == KDT_BF16 ? &m->w16.layers[l] : &m->w.layers[l];
}

/* An adapter in unmerged form on this weight (llama.h: m->lora): y += s·(x Aᵀ)Bᵀ. */
static LoraAdapter *adapter(const LlamaModel *m, int layer, WhichTensor which) {
    return m->lora ? m->lora[param_index(m, layer, which)] : NULL;
}

static int linear_forward(LlamaModel *m, int layer, WhichTensor which, KDtype ydt, float *y, const float *x,
                          const float *W, int IC, int OC, float beta) {
    const int N = m->B * m->T;
    TRY(matmul_forward_ex(m->kb, m->dt, ydt, y, x, W, N, IC, OC, beta));
    LoraAdapter *l = adapter(m, layer, which);
    return l ? lora_forward_add(l, m->kb, y, x, N) : 0;
}

/* What a block's forward keeps. */
enum {
    FWD_SAVE,        /* every activation the block's backward reads, and its output (no checkpointing) */
    FWD_CKPT,        /* its output only (the next block's input); the rest is freed as soon as it dies */
    FWD_RECOMPUTE    /* in the backward: what the block's backward reads; not the output (dropped already) */
};

/* Block l on input x (its previous block's resid_out, or the embedding). The same ops in the same
   order in every mode, so that a recomputation reproduces the saved run bit for bit. */
static int block_forward(LlamaModel *m, int l, const float *x, int mode) {
    KBackend *kb = m->kb;
    const KDtype dt = m->dt;
    const int B = m->B, T = m->T, C = m->C, NH = m->NH, NKV = m->NKV, HS = m->HS, F = m->F;
    const int N = B * T, QD = NH * HS, KD = NKV * HS;
    const float eps = m->cfg.norm_eps;
    const KRope rope = llama_rope(&m->cfg);
    const int ck = mode == FWD_CKPT;
    LlamaLayerActs *s = &m->acts.layers[l];
    const LlamaLayerTensors *w = &m->w.layers[l], *g = gemm_weights(m, l);
    SAVE(s->ln1, (size_t)N * C, "activations/layers.%d.input_layernorm", l);
    SAVE32(s->ln1_rstd, N, "activations/layers.%d.input_layernorm.rstd", l);
    TRY(rmsnorm_forward_ex(kb, dt, s->ln1, s->ln1_rstd, x, w->input_layernorm, N, C, eps));
    if (ck) DROP(s->ln1_rstd);
    SAVE(s->q, (size_t)N * QD, "activations/layers.%d.self_attn.q", l);
    SAVE(s->k, (size_t)N * KD, "activations/layers.%d.self_attn.k", l);
    SAVE(s->v, (size_t)N * KD, "activations/layers.%d.self_attn.v", l);
    TRY(linear_forward(m, l, W_Q_PROJ, dt, s->q, s->ln1, g->q_proj, C, QD, 0.0f));
    TRY(linear_forward(m, l, W_K_PROJ, dt, s->k, s->ln1, g->k_proj, C, KD, 0.0f));
    TRY(linear_forward(m, l, W_V_PROJ, dt, s->v, s->ln1, g->v_proj, C, KD, 0.0f));
    if (ck) DROP(s->ln1);
    TRY(rope_forward_ex(kb, dt, s->q, B, T, NH, HS, rope));
    TRY(rope_forward_ex(kb, dt, s->k, B, T, NKV, HS, rope));
    SAVE(s->attn, (size_t)N * QD, "activations/layers.%d.self_attn.attn_out", l);
    SAVE32(s->lse, (size_t)B * NH * T, "activations/layers.%d.self_attn.lse", l);
    TRY(attention_forward_ex(kb, dt, s->attn, s->lse, s->q, s->k, s->v, B, T, NH, NKV, HS));
    if (ck) { DROP(s->lse); DROP(s->v); DROP(s->k); DROP(s->q); }
    SAVE(s->resid_mid, (size_t)N * C, "activations/layers.%d.resid_mid", l);
    TRY(copy_ex(kb, dt, s->resid_mid, x, (size_t)N * C));
    TRY(linear_forward(m, l, W_O_PROJ, dt, s->resid_mid, s->attn, g->o_proj, QD, C, 1.0f));
    if (ck) DROP(s->attn);
    SAVE(s->ln2, (size_t)N * C, "activations/layers.%d.post_attention_layernorm", l);
    SAVE32(s->ln2_rstd, N, "activations/layers.%d.post_attention_layernorm.rstd", l);
    TRY(rmsnorm_forward_ex(kb, dt, s->ln2, s->ln2_rstd, s->resid_mid, w->post_attention_layernorm, N, C, eps));
    if (ck) DROP(s->ln2_rstd);
    SAVE(s->gate, (size_t)N * F, "activations/layers.%d.mlp.gate", l);
    SAVE(s->up, (size_t)N * F, "activations/layers.%d.mlp.up", l);
    TRY(linear_forward(m, l, W_GATE_PROJ, dt, s->gate, s->ln2, g->gate_proj, C, F, 0.0f));
    TRY(linear_forward(m, l, W_UP_PROJ, dt, s->up, s->ln2, g->up_proj, C, F, 0.0f));
    if (ck) DROP(s->ln2);
    SAVE(s->h, (size_t)N * F, "activations/layers.%d.mlp.act", l);
    TRY(swiglu_forward_ex(kb, dt, s->h, s->gate, s->up, (size_t)N * F));
    if (ck) { DROP(s->up); DROP(s->gate); }
    if (mode == FWD_RECOMPUTE) return 0;
    SAVE(s->resid_out, (size_t)N * C, "activations/layers.%d.resid_out", l);
    TRY(copy_ex(kb, dt, s->resid_out, s->resid_mid, (size_t)N * C));
    TRY(linear_forward(m, l, W_DOWN_PROJ, dt, s->resid_out, s->h, g->down_proj, F, C, 1.0f));
    if (ck) { DROP(s->h); DROP(s->resid_mid); }
    return 0;
}

/* --zero 3: unit u's sharded weights gathered whole (get) or freed (LlamaUnitHooks.gather/release). */
static int unit_weights(LlamaModel *m, int unit, int get) {
    int (*f)(void *, int) = get ? m->units.gather : m->units.release;
    return f ? f(m->units.user, unit) : 0;
}
/* --zero 3: unit u's gathered (as unit_weights' get), then `next`'s gather started (LlamaUnitHooks.prefetch):
   the unit this pass gathers next (-1: none), in flight while unit u computes. */
static int unit_gather(LlamaModel *m, int unit, int next) {
    if (unit_weights(m, unit, 1)) return -1;
    return next >= 0 && m->units.prefetch ? m->units.prefetch(m->units.user, next) : 0;
}

/* The embedding of a table kept in bf16 alone (llama_bf16_only): a bf16 row of C elements is C/2 32-bit
   words, so the fp32 lookup over C/2 columns moves exactly its bits (a copy, no arithmetic), on every
   backend, with no fp32 twin of the table or of the output. */
static int bf16_lookup(LlamaModel *m, float *out) {
    return embedding_forward(m->kb, out, m->tokens, m->w16.embed_tokens, m->B * m->T, m->C / 2);
}

int llama_forward(LlamaModel *m) {
    KBackend *kb = m->kb;
    release_acts(m);
    llama_release_saved(m);
    const KDtype dt = m->dt;
    const int B = m->B, T = m->T, C = m->C, V = m->HV, N = B * T;
    LlamaActs *a = &m->acts;
    if (dt == KDT_BF16) TRY(cast_weights(m));
    if (m->cfg.task == LLAMA_TASK_CLASSIFY)
        TRY(classify_prepare(kb, m->last, m->labels, m->host_stage, m->tokens, m->targets, B, T, V, m->cfg.pad_id));
    SAVE(a->embed, (size_t)N * C, "activations/embed_tokens");
    TRY(unit_gather(m, llama_unit_embed(m), 0));   /* (block 0, or the head where L = 0) */
    if (m->w.embed_tokens) TRY(embedding_forward_ex(kb, dt, a->embed, m->tokens, m->w.embed_tokens, N, C));
    else TRY(bf16_lookup(m, a->embed));
    TRY(unit_weights(m, llama_unit_embed(m), 0));
    const float *x = a->embed;
    for (int l = 0; l < m->L; l++) {
        TRY(unit_gather(m, l, l + 1));   /* (block L-1's next: the head, unit L) */
        TRY(block_forward(m, l, x, m->ckpt ? FWD_CKPT : FWD_SAVE));
        TRY(unit_weights(m, l, 0));
        x = a->layers[l].resid_out;
    }
    SAVE(a->lnf, (size_t)N * C, "activations/norm");
    SAVE32(a->lnf_rstd, N, "activations/norm.rstd");
    TRY(rmsnorm_forward_ex(kb, dt, a->lnf, a->lnf_rstd, x, m->w.norm, N, C, m->cfg.norm_eps));
    a->holds_dx = 0;
    SAVE32(a->logits, (size_t)N * V, "activations/logits");
    TRY(unit_gather(m, llama_unit_head(m), -1));   /* (the backward's first gather is this unit's again, after the loss) */
    TRY(linear_forward(m, -1, W_LM_HEAD, KDT_F32, a->logits, a->lnf, dt == KDT_BF16 ? m->w16.lm_head : m->w.lm_head, C, V, 0.0f));
    return unit_weights(m, llama_unit_head(m), 0);
}

int llama_loss_positions(const LlamaModel *m) { return m->cfg.task == LLAMA_TASK_CLASSIFY ? 1 : m->T; }

int llama_loss(LlamaModel *m, double *mean_loss) {
    KBackend *kb = m->kb;
    int N = m->B * llama_loss_positions(m);
    if (!m->acts.losses) SAVE32(m->acts.losses, N, "activations/losses");
    if (m->cfg.task == LLAMA_TASK_CLASSIFY)
        TRY(classify_loss_forward(kb, m->acts.losses, m->pooled, m->acts.logits, m->labels, m->last, m->B, m->T, m->HV));
    else TRY(crossentropy_forward(kb, m->acts.losses, m->acts.logits, m->targets, N, m->V));
    double sum = 0.0;
    TRY(reduce_sum(kb, m->acts.losses, (size_t)N, &sum));
    *mean_loss = sum / N;
    return 0;
}

/* ---- backward ---------------------------------------------------------------------------------- */

static int is_kept(const LlamaModel *m, const void *p) {
    for (int i = 0; i < m->n_keep; i++) if (m->keep[i] == p) return 1;
    return 0;
}

/* A hook asked to keep p past the backward (GRAD_HOOK_KEEP_*). */
static int keep(LlamaModel *m, const void *p) {
    if (!p || is_kept(m, p)) return 0;
    if (m->n_keep == m->cap_keep) {
        int cap = m->cap_keep ? 2 * m->cap_keep : 32;
        const void **nk = realloc(m->keep, (size_t)cap * sizeof *nk);
        if (!nk) { snprintf(m->kb->err, sizeof m->kb->err, "out of host memory (kept buffers)"); return -1; }
        m->keep = nk; m->cap_keep = cap;
    }
    m->keep[m->n_keep++] = p;
    return 0;
}

/* A saved buffer the backward is done with: freed now, or kept for the hooks' owner (in place for
   llama_backward_rescaled, or on the deferred list until llama_release_saved). */
static int drop(LlamaModel *m, float **pp, const GradHooks *h) {
    if (!*pp || (h && h->keep_activations)) return 0;
    if ((h && h->retain_saved) || is_kept(m, *pp)) {
        if (m->n_deferred == m->cap_deferred) {
            int cap = m->cap_deferred ? 2 * m->cap_deferred : 64;
            void **nd = realloc(m->deferred, (size_t)cap * sizeof *nd);
            if (!nd) { snprintf(m->kb->err, sizeof m->kb->err, "out of host memory (deferred list)"); return -1; }
            m->deferred = nd; m->cap_deferred = cap;
        }
        m->deferred[m->n_deferred++] = *pp;
    } else {
        kbuf_free(m->kb, *pp);
    }
    *pp = NULL;
    return 0;
}

int llama_grad_units(const LlamaModel *m) { return m->L + 2; }
int llama_unit_head(const LlamaModel *m) { return m->L; }
int llama_unit_embed(const LlamaModel *m) { return m->L + 1; }

int llama_grad_unit(const LlamaModel *m, int i) {
    const ParamInfo *p = &m->params[i];
    if (p->which == W_EMBED_TOKENS) return llama_unit_embed(m);
    if (p->which == W_NORM || p->which == W_LM_HEAD) return llama_unit_head(m);
    return p->layer;
}

int llama_unit_writes(const LlamaModel *m, int u, int i) {
    return llama_grad_unit(m, i) == u || (u == llama_unit_head(m) && m->cfg.tie_embeddings && m->params[i].which == W_EMBED_TOKENS);
}

int llama_unit_event(LlamaModel *m, int unit, int done) {
    int (*f)(void *, int) = done ? m->units.done : m->units.begin;
    return f ? f(m->units.user, unit) : 0;
}

/* A unit's event inside a backward that writes weight gradients. */
static int unit_event(LlamaModel *m, const GradHooks *h, int unit, int done) {
    return h && h->dw_elsewhere ? 0 : llama_unit_event(m, unit, done);
}

/* Calls the hook of one weight (if any, and if the weight is trainable or hooks->frozen_too), and
   records what it asks to keep. Returns GRAD_HOOK_* bits (SKIP_DW set for frozen weights), -1 on error. */
static int hook(LlamaModel *m, const GradHooks *h, int layer, WhichTensor which, const float *A,
                const float *rstd, const float *G, int d_in, int d_out) {
    int idx = param_index(m, layer, which);
    const ParamInfo *p = &m->params[idx];
    if (!p->trainable && !(h && h->frozen_too && h->weight_grad)) return GRAD_HOOK_SKIP_DW;
    if (!h || !h->weight_grad) return 0;
    GradHookArgs a = {
        .kind = which == W_LM_HEAD ? HOOK_LINEAR : p->kind,
        .name = which == W_LM_HEAD && m->cfg.tie_embeddings ? "lm_head" : p->name, .param_index = idx, .layer = layer,
        .B = m->B, .T = m->T, .d_in = d_in, .d_out = d_out, .dt = m->dt, .A = A, .rstd = rstd, .tokens = m->tokens,
        .G = G, .dW = *llama_tensor(&m->dw, p), .W = *llama_tensor(&m->w, p),
    };
    if (which == W_LM_HEAD) { a.dW = m->dw.lm_head; a.W = m->w.lm_head; }
    int r = h->weight_grad(h->user, &a);
    if (r < 0 && !m->kb->err[0]) snprintf(m->kb->err, sizeof m->kb->err, "the gradient hook failed at %s", a.name);
    if (r < 0) return r;
    if (((r & GRAD_HOOK_KEEP_A) && keep(m, A)) || ((r & GRAD_HOOK_KEEP_G) && keep(m, G))) return -1;
    return p->trainable ? r : r | GRAD_HOOK_SKIP_DW;
}

/* dx = beta*dx + dy W (W: the GEMM's copy; + s·(dy B)A with an unmerged adapter), and (unless the hook says otherwise) dW += dyᵀ x. */
static int linear_backward(LlamaModel *m, const GradHooks *h, int layer, WhichTensor which, float *dx,
                           const float *dy, const float *x, const float *W, float *dW, int N, int IC, int OC,
                           float beta) {
    int r = hook(m, h, layer, which, x, NULL, dy, IC, OC);
    if (r < 0) return -1;
    if (!(r & GRAD_HOOK_SKIP_DW) && dW) TRY(matmul_backward_weight_ex(m->kb, m->dt, dW, dy, x, N, IC, OC));
    if (!dx) return 0;
    TRY(matmul_backward_input_ex(m->kb, m->dt, dx, dy, W, N, IC, OC, beta));
    LoraAdapter *l = adapter(m, layer, which);
    return l ? lora_backward_input_add(l, m->kb, dx, dy, N) : 0;
}

/* x's rows of sample b (per floats each) times scale[b], in place. */
static int scale_samples(KBackend *kb, float *x, const float *scale, int B, size_t per) {
    for (int b = 0; b < B; b++)
        if (scale[b] != 1.0f) TRY(scale_inplace(kb, x + (size_t)b * per, scale[b], per));
    return 0;
}

/* dinp += RMSNorm backward; the weight's gradient through the hook. With scale (a second backward
   that replicates the first, see `replica` in backward): dinp unscaled, then dout (dead after)
   scaled per sample for the weight's gradient alone. */
static int norm_backward(LlamaModel *m, const GradHooks *h, int layer, WhichTensor which, float *dinp,
                         float *dout, const float *inp, const float *w, float *dw, const float *rstd,
                         const float *scale) {
    int r = hook(m, h, layer, which, inp, rstd, dout, m->C, m->C);
    if (r < 0) return -1;
    const int N = m->B * m->T, C = m->C;
    if (r & GRAD_HOOK_SKIP_DW) dw = NULL;
    if (!scale || !dw) return rmsnorm_backward_ex(m->kb, m->dt, dinp, dw, dout, inp, w, rstd, N, C);
    TRY(rmsnorm_backward_ex(m->kb, m->dt, dinp, NULL, dout, inp, w, rstd, N, C));
    TRY(scale_samples(m->kb, dout, scale, m->B, (size_t)m->T * C));
    return rmsnorm_backward_ex(m->kb, m->dt, NULL, dw, dout, inp, w, rstd, N, C);
}

/* The loss's gradient from the logits (crossentropy backward, in place), unless again (the logits
   already hold a first backward's); then, with sample_scale, sample b's rows scaled by it. */
static int backward(LlamaModel *m, const GradHooks *h, float loss_scale, const float *sample_scale, int again) {
    KBackend *kb = m->kb;
    const KDtype dt = m->dt;
    const int B = m->B, T = m->T, C = m->C, NH = m->NH, NKV = m->NKV, HS = m->HS, F = m->F, V = m->HV;
    const int N = B * T, QD = NH * HS, KD = NKV * HS;
    const KRope rope = llama_rope(&m->cfg);
    LlamaActs *a = &m->acts;
    if (!a->logits) { snprintf(kb->err, sizeof kb->err, "llama_backward without a forward"); return -1; }
    float *d_resid = NULL, *d_norm = NULL, *d_q = NULL, *d_k = NULL, *d_v = NULL, *d_attn = NULL,
          *d_h = NULL, *d_gate = NULL, *d_up = NULL;
    int rc = -1;
#define WS(p, count, name) do { if (!((p) = kbuf_alloc(kb, (size_t)(count) * KDT_SIZE(dt), "workspace/backward." name))) goto done; } while (0)
#define CK(x) do { if ((x) != 0) goto done; } while (0)
    WS(d_resid, (size_t)N * C, "d_resid");
    WS(d_norm, (size_t)N * C, "d_norm_out");
    WS(d_q, (size_t)N * QD, "d_q");
    WS(d_k, (size_t)N * KD, "d_k");
    WS(d_v, (size_t)N * KD, "d_v");
    WS(d_attn, (size_t)N * QD, "d_attn");
    WS(d_h, (size_t)N * F, "d_h");
    WS(d_gate, (size_t)N * F, "d_gate");
    WS(d_up, (size_t)N * F, "d_up");

    /* loss and head: logits become dlogits in place (bf16: then bf16 in the buffer's first half) */
    if ((sample_scale || again) && dt != KDT_F32) {
        snprintf(kb->err, sizeof kb->err, "llama_backward_rescaled: fp32 activations only");
        goto done;
    }
    if (!again && m->cfg.task == LLAMA_TASK_CLASSIFY)
        CK(classify_loss_backward(kb, a->logits, m->pooled, m->labels, m->last, loss_scale, h ? h->loss_weights : NULL, B, T, V));
    else if (!again) CK(crossentropy_backward(kb, a->logits, m->targets, loss_scale, h ? h->loss_weights : NULL, B, T, V));
    /* A second backward of two-pass clipping with no hook that reads the output gradients (no LoRA:
       replica) replicates the first one's activation gradients bit for bit and puts each sample's
       scale on the inputs of the weight gradients instead: dW += Gᵀ(c ⊙ A), each A scaled in place
       after its last other use (RMSNorm weights: their dout; the embedding: its d_resid). Otherwise
       lm_head's output gradient is scaled, and everything after it with it. */
    const int replica = sample_scale && !(h && h->weight_grad);
    const float *scale = replica ? sample_scale : NULL;
    for (int b = 0; sample_scale && !replica && b < B; b++)
        if (sample_scale[b] != 1.0f) CK(scale_inplace(kb, a->logits + (size_t)b * T * V, sample_scale[b], (size_t)T * V));
    if (dt == KDT_BF16) CK(narrow_inplace(kb, a->logits, (size_t)N * V));
    if (h && h->keep_activations) { kbuf_free(kb, a->losses); a->losses = NULL; }   /* a second backward does not need them */
    else CK(drop(m, &a->losses, h));
    const float *x_last = m->L ? a->layers[m->L - 1].resid_out : a->embed;
    /* Two-pass on kept activations: the first backward (stash) keeps the input gradients of lm_head,
       down, gate/up and q/k/v in the buffers of those GEMMs' inputs (lnf, h, ln2, ln1: read by nothing
       else until the second backward, and recomputable from kept activations by the forward's own
       kernels, the same bits); the replica (reuse) copies them back instead of running those GEMMs,
       recomputes the inputs, and runs only the weight gradients: no memory, the same bits as a
       second backward that runs every GEMM (the checkpointed one), a sixth of a step of `small` less. */
    const int stash = h && h->keep_activations && dt == KDT_F32;
    const int reuse = again && replica && a->holds_dx;
    const float eps = m->cfg.norm_eps;
    if (reuse) {
        CK(copy_ex(kb, dt, d_norm, a->lnf, (size_t)N * C));
        CK(rmsnorm_forward_ex(kb, dt, a->lnf, a->lnf_rstd, x_last, m->w.norm, N, C, eps));
    }
    if (scale) CK(scale_samples(kb, a->lnf, scale, B, (size_t)T * C));
    CK(unit_event(m, h, llama_unit_head(m), 0));
    CK(unit_gather(m, llama_unit_head(m), m->L - 1));   /* (then block L-1) */
    CK(linear_backward(m, h, -1, W_LM_HEAD, reuse ? NULL : d_norm, a->logits, a->lnf,
                       dt == KDT_BF16 ? m->w16.lm_head : m->w.lm_head, m->dw.lm_head, N, C, V, 0.0f));
    CK(unit_weights(m, llama_unit_head(m), 0));
    if (stash) CK(copy_ex(kb, dt, a->lnf, d_norm, (size_t)N * C));
    CK(drop(m, &a->logits, h));
    CK(zero_ex(kb, dt, d_resid, (size_t)N * C));
    CK(norm_backward(m, h, -1, W_NORM, d_resid, d_norm, x_last, m->w.norm, m->dw.norm, a->lnf_rstd, scale));
    CK(unit_event(m, h, llama_unit_head(m), 1));
    CK(drop(m, &a->lnf, h));
    CK(drop(m, &a->lnf_rstd, h));

    for (int l = m->L - 1; l >= 0; l--) {
        LlamaLayerActs *s = &a->layers[l];
        const LlamaLayerTensors *w = &m->w.layers[l], *g = gemm_weights(m, l);
        LlamaLayerTensors *dw = &m->dw.layers[l];
        const float *x_in = l > 0 ? a->layers[l - 1].resid_out : a->embed;
        CK(drop(m, &s->resid_out, h));  /* the next block (or the final norm) has used it */
        CK(unit_gather(m, l, l - 1));   /* (g points at the slots the gather fills; block 0's next: none, the
                                           embedding's backward reads no weight) */
        if (m->ckpt) { DPMEM_SCOPE("recompute"); CK(block_forward(m, l, x_in, FWD_RECOMPUTE)); }
        /* MLP: resid_out = resid_mid + down(h); d_resid is d(resid_out), and d(resid_mid) through the skip */
        if (reuse) {
            CK(copy_ex(kb, dt, d_h, s->h, (size_t)N * F));
            CK(swiglu_forward_ex(kb, dt, s->h, s->gate, s->up, (size_t)N * F));
        }
        if (scale) CK(scale_samples(kb, s->h, scale, B, (size_t)T * F));
        CK(unit_event(m, h, l, 0));
        CK(linear_backward(m, h, l, W_DOWN_PROJ, reuse ? NULL : d_h, d_resid, s->h, g->down_proj, dw->down_proj, N, F, C, 0.0f));
        if (stash) CK(copy_ex(kb, dt, s->h, d_h, (size_t)N * F));
        CK(drop(m, &s->h, h));
        CK(swiglu_backward_ex(kb, dt, d_gate, d_up, d_h, s->gate, s->up, (size_t)N * F));
        CK(drop(m, &s->gate, h));
        CK(drop(m, &s->up, h));
        if (reuse) {
            CK(copy_ex(kb, dt, d_norm, s->ln2, (size_t)N * C));
            CK(rmsnorm_forward_ex(kb, dt, s->ln2, s->ln2_rstd, s->resid_mid, w->post_attention_layernorm, N, C, eps));
        }
        if (scale) CK(scale_samples(kb, s->ln2, scale, B, (size_t)T * C));
        CK(linear_backward(m, h, l, W_GATE_PROJ, reuse ? NULL : d_norm, d_gate, s->ln2, g->gate_proj, dw->gate_proj, N, C, F, 0.0f));
        CK(linear_backward(m, h, l, W_UP_PROJ, reuse ? NULL : d_norm, d_up, s->ln2, g->up_proj, dw->up_proj, N, C, F, 1.0f));
        if (stash) CK(copy_ex(kb, dt, s->ln2, d_norm, (size_t)N * C));
        CK(drop(m, &s->ln2, h));
        CK(norm_backward(m, h, l, W_POST_ATTENTION_LAYERNORM, d_resid, d_norm, s->resid_mid,
                         w->post_attention_layernorm, dw->post_attention_layernorm, s->ln2_rstd, scale));
        CK(drop(m, &s->ln2_rstd, h));
        CK(drop(m, &s->resid_mid, h));
        /* attention: resid_mid = x_in + o(attn); d_resid is now d(resid_mid) */
        if (scale) {
            /* attention's backward reads attn: o_proj's weight gradient after it, on attn scaled */
            CK(matmul_backward_input_ex(kb, dt, d_attn, d_resid, g->o_proj, N, QD, C, 0.0f));
            CK(attention_backward_ex(kb, dt, d_q, d_k, d_v, d_attn, s->q, s->k, s->v, s->attn, s->lse, B, T, NH, NKV, HS));
            CK(scale_samples(kb, s->attn, scale, B, (size_t)T * QD));
            CK(linear_backward(m, h, l, W_O_PROJ, NULL, d_resid, s->attn, g->o_proj, dw->o_proj, N, QD, C, 0.0f));
        } else {
            CK(linear_backward(m, h, l, W_O_PROJ, d_attn, d_resid, s->attn, g->o_proj, dw->o_proj, N, QD, C, 0.0f));
            CK(attention_backward_ex(kb, dt, d_q, d_k, d_v, d_attn, s->q, s->k, s->v, s->attn, s->lse, B, T, NH, NKV, HS));
        }
        CK(drop(m, &s->attn, h));
        CK(drop(m, &s->lse, h));
        CK(drop(m, &s->q, h));
        CK(drop(m, &s->k, h));
        CK(drop(m, &s->v, h));
        CK(rope_backward_ex(kb, dt, d_q, B, T, NH, HS, rope));
        CK(rope_backward_ex(kb, dt, d_k, B, T, NKV, HS, rope));
        if (reuse) {
            CK(copy_ex(kb, dt, d_norm, s->ln1, (size_t)N * C));
            CK(rmsnorm_forward_ex(kb, dt, s->ln1, s->ln1_rstd, x_in, w->input_layernorm, N, C, eps));
        }
        if (scale) CK(scale_samples(kb, s->ln1, scale, B, (size_t)T * C));
        CK(linear_backward(m, h, l, W_Q_PROJ, reuse ? NULL : d_norm, d_q, s->ln1, g->q_proj, dw->q_proj, N, C, QD, 0.0f));
        CK(linear_backward(m, h, l, W_K_PROJ, reuse ? NULL : d_norm, d_k, s->ln1, g->k_proj, dw->k_proj, N, C, KD, 1.0f));
        CK(linear_backward(m, h, l, W_V_PROJ, reuse ? NULL : d_norm, d_v, s->ln1, g->v_proj, dw->v_proj, N, C, KD, 1.0f));
        CK(unit_weights(m, l, 0));
        if (stash) CK(copy_ex(kb, dt, s->ln1, d_norm, (size_t)N * C));
        CK(drop(m, &s->ln1, h));
        CK(norm_backward(m, h, l, W_INPUT_LAYERNORM, d_resid, d_norm, x_in, w->input_layernorm,
                         dw->input_layernorm, s->ln1_rstd, scale));
        CK(unit_event(m, h, l, 1));
        CK(drop(m, &s->ln1_rstd, h));
    }
    {
        CK(unit_event(m, h, llama_unit_embed(m), 0));
        /* classify: the pad token's row gets no gradient (nn.Embedding(padding_idx), classify.h) */
        if (m->cfg.task == LLAMA_TASK_CLASSIFY && m->cfg.pad_id >= 0 && kbackend_computes(kb))
            CK(classify_zero_pad_rows(kb, dt, d_resid, m->host_stage, B, T, C, m->cfg.pad_id));
        int r = hook(m, h, -1, W_EMBED_TOKENS, NULL, NULL, d_resid, C, C);
        if (r < 0) goto done;
        if (scale) CK(scale_samples(kb, d_resid, scale, B, (size_t)T * C));   /* its last use */
        if (!(r & GRAD_HOOK_SKIP_DW) && m->dw.embed_tokens) CK(embedding_backward_ex(kb, dt, m->dw.embed_tokens, m->tokens, d_resid, N, C, m->V));
        CK(unit_event(m, h, llama_unit_embed(m), 1));
    }
    CK(drop(m, &a->embed, h));
    a->holds_dx = stash;
    rc = 0;
done:
    m->n_keep = 0;   /* every kept buffer is on the deferred list now (or the backward failed) */
    kbuf_free(kb, d_up); kbuf_free(kb, d_gate); kbuf_free(kb, d_h); kbuf_free(kb, d_attn);
    kbuf_free(kb, d_v); kbuf_free(kb, d_k); kbuf_free(kb, d_q); kbuf_free(kb, d_norm); kbuf_free(kb, d_resid);
    return rc;
#undef WS
#undef CK
}

int llama_backward(LlamaModel *m, const GradHooks *h, float loss_scale) { return backward(m, h, loss_scale, NULL, 0); }

int llama_backward_rescaled(LlamaModel *m, const GradHooks *h, float loss_scale, const float *sample_scale, int again) {
    return backward(m, h, loss_scale, sample_scale, again);
}

int llama_zero_grad(LlamaModel *m) {
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        float *g = *llama_tensor(&m->dw, p);
        if (g) TRY(fill_buffer(m->kb, g, 0.0f, p->numel));
    }
    return 0;
}

/* ---- --print-params ---------------------------------------------------------------------------- */

void llama_print_params(const LlamaModel *m, FILE *out) {
    size_t by_group[GROUP_COUNT] = { 0 }, bytes_group[GROUP_COUNT] = { 0 }, total = 0, trainable = 0, copies = 0, stored = 0;
    fprintf(out, "%-40s %-14s %-9s %14s %9s\n", "parameter", "shape", "dtype", "bytes", "trainable");
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        char shape[32];
        if (p->rows == 1) snprintf(shape, sizeof shape, "(%d)", p->cols);
        else snprintf(shape, sizeof shape, "(%d, %d)", p->rows, p->cols);
        const int only = llama_bf16_only(m, p), copy = m->dt == KDT_BF16 && has_bf16_copy(m, p) && !only;   /* + its bf16 GEMM copy */
        if (copy) copies += p->numel;
        fprintf(out, "%-40s %-14s %-9s %14zu %9s\n", p->hf_name, shape, only ? "bf16" : copy ? "fp32+bf16" : "fp32",
                p->numel * (only ? 2 : copy ? 6 : 4),
                p->trainable ? "yes" : "no");
        by_group[p->group] += p->numel;
        bytes_group[p->group] += p->numel * (only ? 2 : 4);   /* the master, or the bf16 values alone */
        stored += p->numel * (only ? 2 : 4);
        total += p->numel;
        if (p->trainable) trainable += p->numel;
    }
    if (m->cfg.tie_embeddings) fprintf(out, "(lm_head.weight is tied to model.embed_tokens.weight)\n");
    fprintf(out, "\n%-12s %16s %16s\n", "group", "parameters", "bytes");
    for (int g = 0; g < GROUP_COUNT; g++)
        fprintf(out, "%-12s %16zu %16zu\n", param_group_name((ParamGroup)g), by_group[g], bytes_group[g]);
    fprintf(out, "%-12s %16zu %16zu\n%-12s %16zu %16zu\n", "trainable", trainable, trainable * 4, "total", total, stored);
    if (copies) fprintf(out, "%-12s %16zu %16zu  (bf16 copies of the GEMM weights, beside the fp32 masters)\n", "bf16 copies", copies, copies * 2);
}
