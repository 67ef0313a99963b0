/* dp_sgd.h — DP-SGD as a TrainStrategy of the one training loop (train.h): per-sample gradient
   norms by the method of --norm (direct, ghost, flash, mixed) from the backward's weight-gradient
   hooks, the clipped sum Σ_b c_b g_b by --clip (twopass: a second backward with loss weights c_b,
   for ghost without a second forward where that costs no memory;
   bk: book-keeping, Gᵀdiag(c)A per layer from the one backward; direct norms: the sum of the clipped
   materialized per-sample gradients), Gaussian noise once per logical batch (kernels/noise.h's Philox;
   --secure-noise: kernels/secure_noise.h's ChaCha20 on a grid, also for Poisson's draws), the RDP
   accountant (samples/dp/accountant.h) under the adjacency each printed ε names, printed and logged as
   META dp.*.

   Usage (the whole of a DP sample's main):
       TrainConfig cfg; DpConfig dp; DpSgd d; TrainStrategy st;
       config_defaults(&cfg); dp_config_defaults(&dp, DP_NORM_FLASH, DP_CLIP_BK);
       int r = config_parse(&cfg, argc, argv, dp_config_extra, &dp, DP_CONFIG_USAGE);
       if (r) return r > 0 ? 0 : 1;
       if (dp_sgd_prepare(&d, &st, &dp, &cfg, "flash")) return 1;
       return train_run(&cfg, &st);
   dp_sgd_prepare turns --batch-size (the logical batch) and --max-physical-batch-size into the
   loop's physical batch and grad_accum.

   Memory tags: norms/per_sample_norm2, norms/clip_factors, per_sample_grads/<param> (direct; the
   RMSNorm weights under every method; under bk, every layer whose per-sample gradients B·IC·OC
   are smaller than a copy of its output gradient B·T·OC, i.e. IC ≤ T, and LoRA's adapters), ghost/<param>.gram (ghost), ghost/<param>.tile (flash),
   per_sample_grads/<param>.one (mixed's direct path: one sample at a time), bk/<param>.G (the output
   gradients book-keeping keeps for layers with IC > T; lm_head's is the model's retained dlogits, not
   a copy), lora/... (samples/llama/lora.h).

   LoRA (--lora-rank r): adapters on the --lora-targets projections (lora.h: merged form in fp32,
   unmerged beside the bf16-only base under bf16, m->lora), every
   base tensor frozen (no grads, no optimizer state, no per-sample anything), DP on the adapters:
   the weight-gradient hooks of the frozen projections give x and dy, from which each adapter is
   an ordinary linear layer for the norms (B: hs → dy, A: x → dh); the adapters' optimizer step
   runs in before_update (scope "optimizer_step"), followed by the re-merge (merged form; --zero 3, the
   base held sliced: on the weight gathered whole, shard_gather_tensor, the same GEMMs as unsharded, this
   rank's slice kept).

   Poisson sampling (--poisson): each step includes every row of the dataset independently with
   probability q = L / rows (a Philox stream of (seed, step, row)), processed in physical batches of
   P with the last one padded by rows of loss weight 0 (they contribute exactly zero); the loop runs
   ceil(K / P) physical batches per step, K the rows of poisson_capacity.h (the odds that any rank's step
   draws more, for the whole job, below 1e-9 by the binomial tail); such a step is truncated, counted
   and logged (dp.poisson_truncated). The update is divided by the
   expected batch size L, as Opacus does. A physical batch with no row drawn on this rank (the others may
   have some) is skipped, but for the collectives the others run: --zero 2's reduce-scatters (of zeros,
   grad_reduce_idle); under --zero 3 the whole forward and backward run on padding rows of loss
   weight 0 (every unit's gathers in the others' order, whatever the method's passes), their loss left
   out of the step's.

   The levers (docs/LEVERS.md): under --precision bf16 the hooks' A and G are bf16; the GPU kernels
   read them (`_dt` twins), the CPU widens one sample at a time (workspace/dp_widen.A, .G) and runs the
   fp32 kernels; per-sample gradients, Gram tiles, norms and sums stay fp32; two-pass forms Σ c_b g_b in
   the second backward's hooks (pass 2, clip_in_hooks) instead of weighting the loss; the factors keep
   a 2^-12 margin (dp_clip_factors_safe). Under --checkpoint-activations book-keeping asks the
   backward to keep only the A's it needs (GRAD_HOOK_KEEP_A; lm_head's dlogits: GRAD_HOOK_KEEP_G).

   Backends: CPU, CUDA (every kernel is the `_cuda` twin of kernels/cuda; at most KCUDA_MAX_B samples
   per physical batch) and plan for either target (`--plan-for cuda` allocates what the CUDA path does:
   no ghost/<param>.tile, flash's tiles are on chip there).

   Tied embeddings (Llama-3.2: lm_head is embed_tokens): the matrix's per-sample gradient is the sum
   e_b + h_b of its two uses, whose squared norm has a cross term 2⟨e_b, h_b⟩: direct forms the sum
   and measures it; the other methods add the cross term from u = D·A (kernels/cpu/dp_norms_tied.c),
   computed at lm_head's hook and dotted with the embedding's gradient at its hook
   (docs/DP_METHODS.md). The clipped sum Σ_b c_b (e_b + h_b) goes into the one dW. With LoRA the
   tied matrix is frozen like the rest of the base. */
#ifndef DP_SGD_H
#define DP_SGD_H

#include "accountant.h"
#include "dp_config.h"
#include "dp_kernels.h"
#include "secure_noise.h"
#include "llama/lora.h"
#include "llama/train.h"

typedef struct {
    float *psg;            /* per-sample gradients kept until the clip (direct, RMSNorm); with
                              psg_first, those of samples 1..B-1 */
    float *psg_first;      /* bk: sample 0's gradient, written into the still-zero dW (not ours) */
    int kept;              /* bk keeps this layer's per-sample gradients: the norms came from them */
    float *G;              /* bk: copy of the output gradient [B,T,d_out] (or LoRA's own dh) */
    const float *A;        /* bk: the saved input (retained by the backward, or LoRA's own hs) */
    float *A_owned;        /* bk: A when it is ours to free (LoRA's hs) */
    int G_borrowed;        /* bk: G is the model's retained buffer (lm_head's dlogits), not a copy */
    int kind, B, T, d_in, d_out;
    int used;              /* the method used for this tensor (DpNorm), -1: none yet */
    DpIO io;               /* traffic of its norm computation, per physical batch */
} DpParamState;

typedef struct DpSgd {
    DpConfig cfg;
    const char *method_name;     /* the sample's name ("flash", ...) */
    char method[48];             /* what runs: "flash+bk", "ghost+twopass", "lora+mixed+bk" (META config.method) */
    int logical_batch;           /* --batch-size */
    int physical_batch;          /* the loop's batch */
    long dataset_size;           /* rows, for the sample rate */
    double sample_rate;          /* q = logical batch / dataset size */
    double sigma;                /* resolved noise multiplier */
    double sigma_acc[2];         /* the accountant's: [0] zero-out and add/remove (sensitivity C), [1] replace-one (2C);
                                    σ and σ/2, or with --secure-noise σC / (S + Λ√d) (the grid's rounding) */
    uint64_t seed;
    SecureKey key;               /* --secure-noise: ChaCha20's key (getrandom(); --noise-seed: the seed's 64 bits) */
    int seed_shared;             /* --secure-seed with several ranks: rank 0's seed was broadcast */
    TrainState *s;
    KBackend *kb;
    float *norm2, *c;            /* backend [B] */
    float *c_host;               /* host [B]: c, read back once per physical batch (stats, bk GEMMs, two-pass) */
    float *scratch_norm2;        /* backend [B]: norms nobody reads (bk's per-sample gradients) */
    int n_params;
    DpParamState *ps;            /* [n_params] */
    LoraAdapter *lora;           /* [n_lora] adapters (--lora-rank > 0); the base is then frozen */
    int n_lora;
    int *lora_of;                /* [n_params]: adapter index or -1 */
    LoraAdapter **unmerged;      /* [n_params] (bf16: the model's m->lora): adapter or NULL; NULL in fp32 (merged) */
    DpParamState *lps;           /* [2 n_lora]: adapter k's A at 2k, its B at 2k+1 */
    float **lora_hs, **lora_dh;  /* [n_lora]: side products of the current backward */
    int pass;                    /* 1: norms, 2: two-pass's weighted backward */
    int retain;                  /* this backward keeps the saved activations (bk) */
    /* Poisson sampling (--poisson): this step's rows, and the mask of real (1) vs padding (0) rows */
    long *rows; long n_rows, cap_rows;
    float *mask;                 /* backend [B] */
    int *host_batch;             /* [2 B T] staging */
    long truncated;              /* samples dropped because the step's capacity was exceeded */
    long sampled_total;
    long empty_batches;          /* physical batches this rank ran with no row drawn (dp.poisson_empty_batches) */
    long dropped_samples;        /* samples of this rank whose clip factor was 0 (a norm not finite; dp.dropped_samples) */
    long backward_again;         /* physical batches whose second backward ran on the first's activations */
    int fused;                   /* the noise runs inside AdamW's pass (dp_fused.c: DPMEM_FUSED_UPDATE, AdamW, a twin) */
    uint64_t *flat;              /* [n_params + n_lora]: each trainable tensor's (adapter's) first index in the flat
                                    trainable vector, the noise's coordinate numbering */
    Accountant acc;
    long steps_done;
    int printed_choice, shortcut, computes;
    int cuda;                    /* the backend is CUDA: kernels are the `_cuda` twins on device pointers */
    int gpu;                     /* allocations are those of the CUDA path (CUDA, or a plan for it) */
    KDtype dt;                   /* the model's activations (bf16: the norms read bf16 A and G) */
    int ckpt;                    /* the model checkpoints activations: bk keeps A's through GRAD_HOOK_KEEP_* */
    int clip_in_hooks;           /* bf16 two-pass: the second backward's hooks form Σ_b c_b g_b */
    int pass2_sums;              /* this physical batch's second backward forms them in its hooks (bf16, or a
                                    sample dropped: c_b = 0, which a weighted backward turns into 0 · NaN) */
    int keep_bits;               /* what the current linear hook asks the backward to keep */
    int tied;                    /* full DP on a tied lm_head = embed_tokens: its lm_head part is ps[n_params] */
    int tied_head;               /* inside lm_head's hook of a tied matrix under --norm direct */
    float *tied_u;               /* tied, not direct: u [B,T,C] from lm_head's hook to the embedding's */
    /* Tests: called with every hook's arguments before anything else (A and G as the hooks see them). */
    void (*observe)(void *user, const GradHookArgs *a);
    void *observe_user;
    double clipped_frac_sum, norm_sum; long norm_count;  /* statistics for the summary */
    uint64_t io_step;            /* norm IO of one logical step (first step) */
} DpSgd;

/* Fills d and st for a TrainStrategy and adjusts cfg (batch_size := physical, grad_accum). name:
   the strategy's name in the log. 0, or -1 after a one-line error. */
int dp_sgd_prepare(DpSgd *d, TrainStrategy *st, const DpConfig *dp, TrainConfig *cfg, const char *name);

/* The strategy's entries (exposed for tests). */
int  dp_sgd_init(void *user, TrainState *s);
/* TrainStrategy.fields: the DP settings the ranks of a job must agree on. */
void dp_sgd_fields(void *user, const TrainState *s, ConfigFields *f);
int  dp_sgd_physical_batch(void *user, TrainState *s);
int  dp_sgd_before_update(void *user, TrainState *s);
/* TrainStrategy.update (dp_fused.c): the noise and AdamW of one tensor's range in one pass, where d->fused. */
int  dp_sgd_update(void *user, TrainState *s, int i, float *w, float *g, float *m, float *v, size_t n, float wd);
void dp_sgd_destroy(void *user, TrainState *s);
int  dp_sgd_save_adapters(void *user, TrainState *s, const char *dir);

/* The hook (exposed for tests): per-sample norms of one weight gradient. */
int  dp_sgd_weight_grad(void *user, const GradHookArgs *a);

/* The TrainStrategy.frozen of LoRA runs: every base tensor is frozen. */
int  dp_sgd_frozen(void *user, const ParamInfo *p);
/* Adapter parameters (0 without LoRA), and the trainable total of the run. */
size_t dp_sgd_lora_params(const DpSgd *d);

/* ε of the steps done so far at cfg.delta (best order in *alpha if non-NULL), as the run's sampling
   supports it, under the adjacency of --adjacency: --poisson, the subsampled Gaussian at q = L / rows
   per step (Opacus's figure, add/remove); batches in order, no amplification: each row is in at most
   dp_sgd_row_uses(steps) = ⌈steps·L / rows⌉ of them, each a Gaussian mechanism on it, so the
   accountant at q = 1 for that many steps, at σ (zero-out: sensitivity C) or σ/2 (replace-one: 2C).
   dp_sgd_epsilon_under: the same for a given adjacency (replace_one 0 or 1; runs in order). */
double dp_sgd_epsilon(const DpSgd *d, double *alpha);
double dp_sgd_epsilon_under(const DpSgd *d, int replace_one, double *alpha);
/* The adjacency of dp_sgd_epsilon. */
AccountantAdjacency dp_sgd_adjacency(const DpSgd *d);
long   dp_sgd_row_uses(const DpSgd *d, long steps);
/* The subsampled figure whatever the sampling: what the same run would account with --poisson
   (printed, labelled so, beside the true one of a run without it). */
double dp_sgd_epsilon_if_poisson(const DpSgd *d, double *alpha);

#endif
