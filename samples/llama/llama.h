/* llama.h — LLaMA as Hugging Face transformers' LlamaForCausalLM, on any kernels.h backend.

   token embedding, L blocks of (RMSNorm, causal attention with RoPE θ=10000 (rotate-half) and
   grouped-query heads, residual, RMSNorm, SwiGLU MLP, residual), final RMSNorm, LM head (untied
   unless tie_embeddings), no biases. fp32, or bf16 mixed precision (cfg.precision).

   Mixed precision (--precision bf16; docs/PRECISION.md says why this scheme): the trainable parameters
   stay fp32 (the master weights, params/<name>) and each weight a GEMM uses has a bf16 copy
   (params/<name>.bf16: every linear layer and lm_head; the tied matrix once), refreshed from the
   master at the start of every forward, as autocast casts the weights at every forward (a master
   sharded over the ranks, --zero: llama_master_sharded, is rounded slice by slice after its update
   instead, and the copies all-gathered: samples/llama/shard.h). A FROZEN GEMM
   weight (LoRA's base) needs no master: it is kept in bf16 alone (params/<name>.bf16, initialised
   through a temporary fp32 buffer or loaded into it, never cast again; --zero 3: this rank's slice of
   it, llama_base_sharded), as PEFT keeps a bf16 base;
   so is a frozen embedding table when C is even (its lookup gathers the bf16 rows as 32-bit words;
   tied, it is lm_head's GEMM operand too); frozen RMSNorm weights stay fp32 (C floats each). Activations
   and activation gradients are bf16 (2 bytes), including the residual stream. fp32: gradients
   (accumulated in fp32: the weight-gradient GEMMs write fp32), optimizer state, RMSNorm weights and
   a trainable embedding lookup's table (not GEMM operands), the RMSNorm and attention statistics (rstd,
   lse), the logits, the softmax and the loss. The backward turns the fp32 logits into fp32
   dlogits in place and then rounds them to bf16 in the same buffer (its first half) for lm_head's
   GEMMs: no second N×V buffer.

   Activation checkpointing (cfg.checkpoint_activations): the forward keeps each block's input only
   (the embedding and every block's resid_out) and frees the block's other activations as soon as
   the block's forward no longer needs them; the backward recomputes block l's activations from its
   input (scope "recompute", the same ops in the same order: the same bits on the CPU) just before
   block l's backward, which frees them as usual. The final norm, the logits and the loss are not
   in a block and are kept.

   Memory: every tensor is its own tagged buffer (kbuf_alloc):
     params/<name>, grads/<name>, optimizer/<name>.exp_avg and .exp_avg_sq (Adam m, v),
     activations/<name> (saved by the forward, freed by the backward as it consumes them),
     workspace/... (the backward's gradient buffers, op scratch), input/tokens, input/targets.
   <name> reads like the Hugging Face checkpoint: layers.3.self_attn.q_proj for
   model.layers.3.self_attn.q_proj.weight. A frozen tensor (trainable = 0) gets no grad and no
   optimizer state.

   Backward hooks (GradHooks): at every weight gradient (each linear layer, lm_head, the embedding,
   each RMSNorm weight) the backward calls hooks->weight_grad with the layer's saved input A and its
   output gradient G; the hook may read them (per-sample norms) and may tell the backward to skip
   the ordinary dW += GᵀA, and to keep A (or G, when G is a saved buffer: lm_head's dlogits) alive
   past the backward. hooks->loss_weights scales each sample's loss. See train.h for how a DP
   strategy uses this.

   Sequence classification (cfg.task = LLAMA_TASK_CLASSIFY): transformers' LlamaForSequenceClassification.
   The head is `score` (K, C) instead of lm_head (never tied), run on every position as there (logits
   [N, K]); the loss is the cross-entropy of each row's logits at its last non-padding token (classify.h)
   against the row's label, and each sample's loss is that one term (llama_loss_positions = 1, not T).
   Everything else (hooks, two-pass, bk) sees score where it sees lm_head, with HV = K outputs.

   Dimension letters as kernels.h; N = B*T; HV the head's outputs (V, or K for classify).
   Not here: the training loop (train.h), checkpoint loading, KV cache / generation, bf16 weights
   without an fp32 master (pure bf16 training). */
#ifndef LLAMA_H
#define LLAMA_H

#include <stdio.h>

#include "config.h"
#include "kernels.h"
#include "lora.h"

typedef struct {
    float *input_layernorm;          /* (C) */
    float *q_proj;                   /* (NH*HS, C) */
    float *k_proj;                   /* (NKV*HS, C) */
    float *v_proj;                   /* (NKV*HS, C) */
    float *o_proj;                   /* (C, NH*HS) */
    float *post_attention_layernorm; /* (C) */
    float *gate_proj;                /* (F, C) */
    float *up_proj;                  /* (F, C) */
    float *down_proj;                /* (C, F) */
} LlamaLayerTensors;

/* The same struct for parameters, gradients and Adam's m and v. */
typedef struct {
    float *embed_tokens;             /* (V, C) */
    LlamaLayerTensors *layers;       /* [L] */
    float *norm;                     /* (C) */
    float *lm_head;                  /* (V, C); == embed_tokens when tied */
} LlamaTensors;

typedef enum { GROUP_EMBEDDING, GROUP_ATTENTION, GROUP_MLP, GROUP_NORM, GROUP_HEAD, GROUP_COUNT } ParamGroup;
typedef enum { HOOK_LINEAR, HOOK_EMBEDDING, HOOK_RMSNORM } HookKind;

/* Which tensor of a block (or of the model when layer < 0). */
typedef enum {
    W_INPUT_LAYERNORM, W_Q_PROJ, W_K_PROJ, W_V_PROJ, W_O_PROJ, W_POST_ATTENTION_LAYERNORM,
    W_GATE_PROJ, W_UP_PROJ, W_DOWN_PROJ, W_EMBED_TOKENS, W_NORM, W_LM_HEAD
} WhichTensor;

typedef struct {
    char name[64];                   /* "layers.3.self_attn.q_proj" */
    char hf_name[80];                /* "model.layers.3.self_attn.q_proj.weight" */
    int rows, cols;                  /* shape (rows, cols); a vector has rows = 1 */
    size_t numel;
    ParamGroup group;
    HookKind kind;
    int layer;                       /* block index, -1 outside the blocks */
    WhichTensor which;
    int trainable;
} ParamInfo;

/* What a backward hook sees at one weight gradient. Pointers are on the backend's device and valid
   only during the call (G lives in a reused workspace buffer: copy it to keep it). */
typedef struct {
    HookKind kind;
    const char *name;        /* the parameter's name, e.g. "layers.3.self_attn.q_proj" */
    int param_index;         /* into LlamaModel.params */
    int layer;               /* block index; -1 for embed_tokens, norm, lm_head */
    int B, T, d_in, d_out;   /* linear: A [B,T,d_in], G [B,T,d_out]; rmsnorm, embedding: d_in = d_out = C */
    KDtype dt;               /* how A and G store their elements (bf16 under --precision bf16); rstd, dW, W are fp32 */
    const float *A;          /* linear: the input; rmsnorm: the norm's input x (x̂ = x * rstd[row]); embedding: NULL */
    const float *rstd;       /* rmsnorm: [B*T] */
    const int *tokens;       /* embedding: [B*T] token ids */
    const float *G;          /* gradient w.r.t. the layer's output, [B,T,d_out] */
    float *dW;               /* the ordinary gradient's buffer (accumulated into), NULL if frozen */
    const float *W;          /* the weight (the fp32 master; NULL for a frozen GEMM weight under bf16: bf16 only, and
                                for a weight whose master is sharded over the ranks: llama_master_sharded; --zero 3
                                under fp32: a GEMM weight's gathered copy, valid during the call) */
} GradHookArgs;

/* weight_grad's answer: 0 lets the backward do dW += GᵀA; bits: */
enum {
    GRAD_HOOK_SKIP_DW = 1,   /* the hook handles dW */
    GRAD_HOOK_KEEP_A = 2,    /* A stays allocated until llama_release_saved (book-keeping under checkpointing) */
    GRAD_HOOK_KEEP_G = 4     /* the same for G when it is a saved buffer (lm_head's dlogits) */
};

typedef struct GradHooks {
    void *user;
    /* 0 or GRAD_HOOK_* bits (1: skip dW, as before the bits); -1: abort the backward. */
    int (*weight_grad)(void *user, const GradHookArgs *a);
    const float *loss_weights; /* device [B]: per-sample loss weights c_b; NULL = 1 */
    int retain_saved;          /* keep every saved activation until llama_release_saved (the DP trainers use
                                  the hooks' KEEP bits instead, which keep only what they need) */
    int frozen_too;            /* also call weight_grad for frozen weights (args->dW = NULL; the backward
                                  skips their dW whatever it returns): LoRA adapters on a frozen base */
    int dw_elsewhere;          /* this backward writes no weight gradient (its hooks skip every dW: the first
                                  backward of two-pass and book-keeping, whose dW are formed later): the
                                  model's gradient-unit hooks (LlamaUnitHooks) are not called in it */
    int keep_activations;      /* free nothing: every saved activation, and the logits as the output
                                  gradient they became, stay in place for llama_backward_rescaled;
                                  the input gradients of lm_head, gate/up, down and q/k/v go into
                                  the buffers of their inputs lnf, ln2, h and ln1 (fp32; these are not
                                  read again until then, and are recomputed from kept activations) */
} GradHooks;

/* Saved activations of one block (allocated by the forward, freed by the backward), of the model's
   activation type except the statistics (rstd, lse: fp32). */
typedef struct {
    float *ln1, *ln1_rstd;           /* (N, C), (N) */
    float *q, *k, *v;                /* (N, NH*HS), (N, NKV*HS) x2, after RoPE (q, k) */
    float *attn, *lse;               /* (N, NH*HS) attention output; (B, NH, T) */
    float *resid_mid;                /* (N, C) x + o_proj(attn) */
    float *ln2, *ln2_rstd;           /* (N, C), (N) */
    float *gate, *up, *h;            /* (N, F) x3; h = silu(gate) * up */
    float *resid_out;                /* (N, C) the block's output */
} LlamaLayerActs;

typedef struct {
    float *embed;                    /* (N, C) */
    LlamaLayerActs *layers;          /* [L] */
    float *lnf, *lnf_rstd;           /* (N, C), (N) */
    int holds_dx;                    /* lnf and each layer's ln1, ln2 and h hold the input gradients
                                        computed from them instead (a backward with keep_activations
                                        put them there for llama_backward_rescaled) */
    float *logits;                   /* (N, HV) fp32; the backward turns it into dlogits in place (bf16: then
                                        rounded to bf16 in its first half) */
    float *losses;                   /* (N) per-position loss; classify: (B) per-row loss */
} LlamaActs;

/* GRADIENT UNITS: the groups of weights whose gradients a backward completes together, the point
   where a data-parallel trainer can reduce them while the backward goes on (DDP's buckets, ZeRO-2's
   reduce-scatter; --zero 3's gather of a unit's weights sits beside it, before the unit's forward and
   again before its recompute and backward: gather/release below). Unit l < L is block l's nine tensors; unit L (llama_unit_head) the final
   norm and an untied lm_head; unit L+1 (llama_unit_embed) the embedding, and with it a tied lm_head
   (its gradient is complete only after the embedding's). A backward runs them in the order L,
   L-1 .. 0, L+1: begin(u) just before unit u's first weight gradient is written (the head's begin
   covers the tied matrix too: llama_unit_writes), done(u) just after its last. A strategy that forms
   the weight gradients after the backward (book-keeping) calls llama_unit_event around each unit
   it forms. NULL callbacks: nothing happens (the default). */
typedef struct {
    void *user;
    int (*begin)(void *user, int unit);   /* 0, or -1 (kbackend_error) */
    int (*done)(void *user, int unit);
    /* --zero 3 (cfg.params_by_unit): gather(u) puts unit u's sharded weights whole in their slots (w under
       fp32, w16 under bf16) just before the unit's forward, and again before its recompute and backward
       (every backward, dw_elsewhere too); release(u) frees them once the unit's GEMMs are done. Units with
       GEMM weights: the blocks and the head (an untied lm_head); the embedding's table is read whole.
       prefetch(u), right after a gather, names the unit whose gather comes next in the same pass (forward:
       L+1, 0 .. L-1, L; backward: L, L-1 .. 0): its gather may start then and complete at its gather(u). */
    int (*gather)(void *user, int unit);
    int (*release)(void *user, int unit);
    int (*prefetch)(void *user, int unit);
} LlamaUnitHooks;

typedef struct {
    LlamaConfig cfg;
    int C, L, NH, NKV, HS, F, V;
    int HV;                          /* the head's outputs: V (lm_head), or K (classify's score) */
    int B, T;                        /* the batch shape the model was built for */
    KBackend *kb;
    int n_params;
    ParamInfo *params;               /* every tensor, in checkpoint order */
    LlamaTensors w, dw, m, v;        /* parameters, gradients, Adam m, v (NULL where frozen) */
    LlamaTensors w16;                /* bf16 copies of the GEMM weights (bf16 only; NULL elsewhere); a frozen
                                        GEMM weight has this alone (w's slot NULL): see llama_bf16_only */
    LlamaTensors wsh;                /* --zero under bf16 (llama_master_sharded): this rank's slice of a trainable
                                        GEMM weight's fp32 master (params/<name>.shard), w's slot NULL */
    int shard_world, shard_rank;     /* the ranks the masters are sharded over (0: none) */
    LoraAdapter **lora;              /* [n_params] or NULL: adapters in unmerged form (lora.h), whose
                                        s·(x Aᵀ)Bᵀ the forward adds beside the weight's GEMM and whose
                                        s·(dy B)A the backward adds to dx (set by the trainer, not owned) */
    KDtype dt;                       /* activations and activation gradients (cfg.precision) */
    int ckpt;                        /* cfg.checkpoint_activations */
    LlamaActs acts;
    int *tokens, *targets;           /* device (N) */
    int *labels, *last, *host_stage; /* classify: device labels (B), host pooled positions (B) and staging (2N) */
    float *pooled;                   /* classify: fp32 (B, K) the pooled logits, the loss's scratch */
    void **deferred; int n_deferred, cap_deferred; /* saved buffers kept for retain_saved */
    const void **keep; int n_keep, cap_keep;       /* buffers the hooks asked to keep (GRAD_HOOK_KEEP_*) */
    size_t bytes_params, bytes_trainable;  /* 4 bytes per parameter, whatever the precision and storage */
    LlamaUnitHooks units;            /* the trainer's, called at each gradient unit (above); zeroed by llama_build */
} LlamaModel;

/* Fills m->params from the config (no allocation on the backend): enough for --print-params. */
int  llama_describe(LlamaModel *m, const LlamaConfig *cfg, int B, int T);
/* The initial weights: a matrix's element i is (float)(LLAMA_INIT_STD · z(seed, llama_init_stream(name), i)),
   z kernels/noise.h's standard normal stream (Philox4x32-10 + Box-Muller), drawn on the backend that
   holds the tensor (kernels.h: init_normal; the same floats on CPU and GPU); norm weights are 1. */
#define LLAMA_INIT_STD 0.02
uint64_t llama_init_stream(const char *name);
/* Whether tensor p is kept in bf16 only (a frozen GEMM weight under bf16; its fp32 slot in w is NULL). */
int  llama_bf16_only(const LlamaModel *m, const ParamInfo *p);
/* Rank r's slice of a tensor of n elements cut in `world` contiguous slices in rank order: n/world
   elements, one more when r < n % world (the remainder on the first ranks), from r·(n/world) +
   min(r, n % world) (samples/llama/shard.h). */
void llama_slice(size_t n, int world, int rank, size_t *lo, size_t *len);
/* Whether tensor p's fp32 master is sharded (llama_build_sharded with world > 0, --precision bf16, a
   trainable weight with its own bf16 GEMM copy: the linear layers and an untied lm_head, not a
   classifier's score, K·C floats): this rank
   then holds its slice in m->wsh (params/<name>.shard) and the whole bf16 copy in m->w16, w's slot
   NULL. The tied matrix and the RMSNorm weights stay whole: the forward reads them in fp32 (the
   embedding lookup, the norms). */
int  llama_master_sharded(const LlamaModel *m, const ParamInfo *p);
/* --zero 3 (cfg.params_by_unit, under fp32 or bf16): llama_master_sharded names the same tensors under
   fp32 too, and an untied trainable embedding table; each is held as this rank's fp32 slice alone
   (m->wsh); its slot in w (fp32, and the embedding's table) or w16 (a GEMM weight under bf16) is NULL but
   between the unit hooks' gather and release (LlamaUnitHooks): no whole copy between uses. */
int  llama_params_sharded(const LlamaModel *m);
/* --zero 3 with a frozen base (LoRA): a frozen GEMM weight (a linear layer, an untied lm_head) is held as
   this rank's slice alone too, in m->wsh: of its bf16 values under bf16 (params/<name>.bf16.shard: the
   slice of what llama_bf16_only keeps), of the fp32 weight under fp32 (params/<name>.shard); its slot in
   w16 (bf16) or w (fp32) is NULL but between the unit hooks' gather and release, as a trainable one's. */
int  llama_base_sharded(const LlamaModel *m, const ParamInfo *p);
/* Whether tensor p is held as this rank's slice alone (llama_master_sharded or llama_base_sharded), and the
   slice's element type (bf16 for a base kept in bf16 alone, else fp32). */
int  llama_held_sliced(const LlamaModel *m, const ParamInfo *p);
KDtype llama_slice_dt(const LlamaModel *m, const ParamInfo *p);
/* llama_describe, then allocates parameters (initialised: normal(0, 0.02) for matrices, 1 for norm
   weights, from seed: see llama_init_stream; bf16: then their GEMM copies), gradients and optimizer state (`optimizer`: "adamw" allocates m, v; "sgd" none)
   and the token buffers. frozen: optional callback saying which tensors are frozen (LoRA).
   0, or -1 with kbackend_error(kb) / a message on stderr. */
int  llama_build(LlamaModel *m, KBackend *kb, const LlamaConfig *cfg, int B, int T, const char *optimizer,
                 unsigned long long seed, int (*frozen)(void *user, const ParamInfo *p), void *frozen_user);
/* llama_build with the fp32 masters sharded over `world` ranks, this one `rank` (world 0: llama_build):
   each sharded weight is drawn whole into a temporary fp32 buffer (workspace/init.<name>: one tensor
   at a time), rounded whole into its bf16 copy and its slice kept (llama_master_sharded). */
int  llama_build_sharded(LlamaModel *m, KBackend *kb, const LlamaConfig *cfg, int B, int T, const char *optimizer,
                         unsigned long long seed, int (*frozen)(void *user, const ParamInfo *p), void *frozen_user,
                         int world, int rank);
/* Forward to logits (saving activations; bf16: after refreshing the weights' bf16 copies from their
   whole masters; a sharded master's copy is kept current by the optimizer step and its gather), then the
   per-position losses; *mean_loss on the host. */
int  llama_forward(LlamaModel *m);
int  llama_loss(LlamaModel *m, double *mean_loss);
/* Backward of loss_scale * Σ_b w_b Σ_t loss_bt into m->dw (accumulated: zero it between steps).
   hooks may be NULL. Frees the saved activations unless hooks->retain_saved. */
int  llama_backward(LlamaModel *m, const GradHooks *hooks, float loss_scale);
/* llama_backward with sample b's loss also weighted by sample_scale[b] (host [B]), applied to lm_head's
   output gradient after the loss's (each sample's rows scaled: the same bits whether that gradient
   is fresh or a first backward's). again: the logits already hold the output gradient of a backward
   with hooks->keep_activations, which left every activation in place: the loss is not recomputed,
   nor the forward (two-pass clipping as Opacus's retain_graph does it), nor the input gradients of
   lm_head and of every projection but o_proj: the first backward's, kept in their inputs' buffers,
   each sample's rows scaled (the backward is linear in its output gradient), the inputs recomputed
   for the weight gradients (RMSNorm, SwiGLU: the forward's kernels on kept activations, the same
   bits). The second backward's GEMMs are then the weight gradients, o_proj's input gradient and
   attention's backward. fp32 activations only. */
int  llama_backward_rescaled(LlamaModel *m, const GradHooks *hooks, float loss_scale, const float *sample_scale,
                             int again);
void llama_release_saved(LlamaModel *m);
/* The loss terms of one sample: T (a causal LM's positions) or 1 (classify). A per-sample mean loss is
   the sum of its terms times 1/llama_loss_positions. */
int  llama_loss_positions(const LlamaModel *m);
int  llama_zero_grad(LlamaModel *m);
/* Gradient units (above): their number (L + 2), the head's and the embedding's, the unit of tensor
   param_index, whether unit u writes that tensor's gradient (its own tensors; the head also the tied
   matrix), and one event (done 0: begin, 1: done) through m->units. */
int  llama_grad_units(const LlamaModel *m);
int  llama_unit_head(const LlamaModel *m);
int  llama_unit_embed(const LlamaModel *m);
int  llama_grad_unit(const LlamaModel *m, int param_index);
int  llama_unit_writes(const LlamaModel *m, int unit, int param_index);
int  llama_unit_event(LlamaModel *m, int unit, int done);
/* The slot of tensor p in a LlamaTensors (params, grads, m or v). */
float **llama_tensor(LlamaTensors *t, const ParamInfo *p);
void llama_free(LlamaModel *m);
void llama_print_params(const LlamaModel *m, FILE *out);
const char *param_group_name(ParamGroup g);
/* The config's RoPE frequencies (theta, llama3 scaling) as the kernels take them. */
KRope llama_rope(const LlamaConfig *cfg);
/* Closed-form parameter count of a config (for tests and the planner). */
size_t llama_param_count(const LlamaConfig *cfg);

#endif
