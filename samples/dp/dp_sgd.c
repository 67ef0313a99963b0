/* dp_sgd.c — DP-SGD plugged into the training loop through its TrainStrategy and GradHooks
   (see dp_sgd.h). One physical batch:
     forward; backward with the per-sample loss scale 1/T and hooks that add each weight's
     per-sample squared norms into norm2 and skip the ordinary dW (scope "clip" inside "backward");
     c_b = min(1, C/(‖g_b‖+1e-6)); then
       bk / direct: dW += Σ_b c_b g_b from what the hooks kept (psg, or A and a copy of G);
       twopass:     a second backward of the per-sample losses weighted by c_b (lm_head's output
                    gradient scaled per sample); ghost, where keeping the activations through the
                    first backward costs no memory (again_fits), runs it on them, as Opacus does;
                    otherwise the forward runs again (the loop's model frees its activations in the
                    backward).
   Once per logical batch (before_update, scope "noise"): dW = (dW + N(0, σ²C²)) / L, the noise of
   coordinate i of the flat trainable vector from (seed, step, i); the accountant counts the step.
   Physical batch of 1 with no accumulation: the per-sample gradient is the ordinary gradient, so
   the norm is that of dW and clipping one scale, whatever --norm says (printed once).
   On the CUDA backend every DP kernel call goes to its `_cuda` twin (kernels/cuda/kernels_cuda.h) on
   device pointers; the host reads back only B floats per physical batch (the norms and clip factors,
   for the summary's statistics). A plan for the CUDA target allocates what that path allocates: the
   same tags and sizes (flash's ghost/<param>.tile and the tied gather's .tied.tile sized by the GPU's
   block rows, kcuda_flash_rows and kcuda_tied_rows, where the CPU's come from --flash-tile).
   Built with DP_HAVE_CUDA where the program links the CUDA backend (mk/dp.mk); without it a CUDA
   backend cannot exist in the process, and the GPU calls are never reached.
   Not here: the kernels (kernels/cpu/dp_*.c, kernels/cuda), the loop (train.c), LoRA's adapters (lora.c). */
#include "dp_sgd.h"
#include "llama/checkpoint.h"
#include "llama/comm.h"
#include "llama/shard.h"
#include "dpmem.h"
#include "noise.h"
#include "cuda/kernels_cuda.h"   /* plain C: the GPU twins' declarations and KCUDA_MAX_B */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(DpSgd *d, const char *fmt, const char *what) {
    snprintf(d->kb->err, sizeof d->kb->err, fmt, what);
    return -1;
}

/* DP_GPU(call): a call to a `_cuda` kernel, compiled only where the program links them. Reached only
   when d->cuda is set, which needs a CUDA backend, which needs the same link. */
#ifdef DP_HAVE_CUDA
#define DP_GPU(call) (call)
#else
#define DP_GPU(call) dp_no_gpu_kernels()
static void dp_no_gpu_kernels(void) {
    fprintf(stderr, "error: DP-SGD on a CUDA backend in a program built without the DP CUDA kernels\n");
    exit(1);
}
#endif

static float *alloc_tag(DpSgd *d, size_t floats, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    if (floats > SIZE_MAX / sizeof(float)) {   /* kbuf_alloc refuses over 1 EiB; this product must not wrap first */
        snprintf(d->kb->err, sizeof d->kb->err, "%s: %zu floats do not fit a 64-bit byte count", tag, floats);
        return NULL;
    }
    return kbuf_alloc(d->kb, floats * sizeof(float), tag);
}

int dp_sgd_prepare(DpSgd *d, TrainStrategy *st, const DpConfig *dp, TrainConfig *cfg, const char *name) {
    memset(d, 0, sizeof *d);
    memset(st, 0, sizeof *st);
    d->cfg = *dp;
    d->method_name = name;
    snprintf(d->method, sizeof d->method, "%s%s+%s", dp->lora_rank > 0 ? "lora+" : "", dp_norm_name(dp->norm), dp_clip_name(dp->clip));
    if (dp_config_check(dp)) return -1;
    /* L: this rank's share of the logical batch (config_parse divided --batch-size among the ranks) */
    int L = cfg->batch_size, P = dp->max_physical_batch ? dp->max_physical_batch : L;
    if (cfg->grad_accum > 1) {
        fprintf(stderr, "error: DP trainers accumulate with --max-physical-batch-size, not --grad-accum\n");
        return -1;
    }
    if (P > L) P = L;
    if (!dp->poisson && L % P) {
        if (g_comm.world > 1)
            fprintf(stderr, "error: each rank's share %d of --batch-size %d is not a multiple of --max-physical-batch-size %d\n",
                    L, L * g_comm.world, P);
        else fprintf(stderr, "error: --batch-size %d is not a multiple of --max-physical-batch-size %d\n", L, P);
        return -1;
    }
    /* Direct norms keep every sample's gradient: P x the parameters, 4 bytes each. Counted in floating
       point (the size_t products B x V x C wrap past 2^64), it must stay under 1 EiB like the model's
       own bytes (config_check): a plan of 3.2e19 bytes reported 1.8e19. */
    if (dp->norm == DP_NORM_DIRECT) {
        double psg = 4.0 * P * (double)llama_param_count(&cfg->model);
        if (!(psg < 0x1p60)) {
            fprintf(stderr, "error: direct norms keep about %.3g bytes of per-sample gradients (%d samples x %zu parameters), "
                    "more than 1 EiB: use a smaller --max-physical-batch-size or model, or --norm ghost/flash\n",
                    psg, P, llama_param_count(&cfg->model));
            return -1;
        }
    }
    d->logical_batch = L * g_comm.world;   /* the sum is over every rank's samples: the noise and 1/L are the job's */
    d->physical_batch = P;
    cfg->batch_size = P;
    cfg->grad_accum = dp->poisson ? (int)ceil((L + 6.0 * sqrt((double)L) + 1.0) / P) : L / P;
    st->name = d->method;   /* the method that runs, whatever the binary's name */
    st->user = d;
    st->init = dp_sgd_init;
    st->physical_batch = dp_sgd_physical_batch;
    st->before_update = dp_sgd_before_update;
    st->destroy = dp_sgd_destroy;
    if (dp->lora_rank > 0) { st->frozen = dp_sgd_frozen; st->save = dp_sgd_save_adapters; }
    st->fields = dp_sgd_fields;
    return 0;
}

/* The DP settings every rank must share (train.c compares them before the first step): the noise
   is added alike on every rank, and the accountant's epsilon is the job's. */
void dp_sgd_fields(void *user, const TrainState *s, ConfigFields *f) {
    const DpSgd *d = user;
    char t[64];
    (void)s;
    config_field(f, "--norm", "%s", dp_norm_name(d->cfg.norm));
    config_field(f, "--clip", "%s", dp_clip_name(d->cfg.clip));
    config_field(f, "--max-grad-norm", "%.17g", d->cfg.max_grad_norm);
    config_field(f, "the noise multiplier", "%.17g", d->sigma);
    config_field(f, "--target-epsilon", "%.17g", d->cfg.target_epsilon);
    config_field(f, "--delta", "%.17g", d->cfg.delta);
    config_field(f, "the logical batch", "%d", d->logical_batch);
    config_field(f, "--max-physical-batch-size", "%d", d->physical_batch);
    config_field(f, "--poisson", "%d", d->cfg.poisson);
    config_field(f, "--dataset-size", "%ld", d->dataset_size);
    /* the seed itself only when given (--noise-seed); a drawn one is secret (rank 0's, broadcast at the first batch) */
    config_field(f, "--noise-seed", "%llu", d->cfg.seed_given ? (unsigned long long)d->seed : 0ull);
    config_field(f, "the noise seed's source", "%s", d->cfg.seed_given ? "--noise-seed" : "getrandom");
    config_field(f, "--lora-rank", "%d", d->cfg.lora_rank);
    config_field(f, "--lora-alpha", "%.17g", d->cfg.lora_alpha);
    config_field(f, "--lora-targets", "%s", dp_lora_targets_string(d->cfg.lora_targets, t, sizeof t));
}

/* --save with LoRA: the model saved by the loop is merged (fp32: in place; bf16: ckpt_save merges
   each adapter into the fp32 tensor it writes, lora.h); the adapters go to
   <dir>/adapter in PEFT's layout (a subdirectory: see checkpoint.h). */
int dp_sgd_save_adapters(void *user, TrainState *s, const char *dir) {
    DpSgd *d = user;
    if (d->n_lora == 0) return 0;
    char sub[4096], err[CKPT_ERR];
    snprintf(sub, sizeof sub, "%s/adapter", dir);
    /* a classifier: its score head (the last tensor, trained whole) goes with the adapters, as PEFT's SEQ_CLS */
    const LlamaModel *m = &s->model;
    const ParamInfo *last = &m->params[m->n_params - 1];
    const int cls = m->cfg.task == LLAMA_TASK_CLASSIFY && last->trainable;
    const CkptLoraHead head = { cls ? *llama_tensor((LlamaTensors *)&m->w, last) : NULL, last->rows, last->cols };
    if (ckpt_save_lora_adapters(d->lora, d->n_lora, cls ? &head : NULL, d->kb, s->cfg->init_from, sub, err, sizeof err) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    if (!(s->cfg->quiet || d->cfg.quiet_dp) && kbackend_computes(d->kb)) printf("saved: %s/adapter_model.safetensors, adapter_config.json (PEFT)\n", sub);
    return 0;
}

long dp_sgd_row_uses(const DpSgd *d, long steps) {
    const long double used = (long double)steps * d->logical_batch;   /* rows read in order, around again */
    return (long)ceill(used / d->dataset_size);
}

double dp_sgd_epsilon(const DpSgd *d, double *alpha) {
    if (d->steps_done == 0) { if (alpha) *alpha = 0; return 0; }
    if (d->cfg.poisson) return accountant_epsilon(&d->acc, d->cfg.delta, alpha);
    return accountant_epsilon_for(d->sigma, 1.0, dp_sgd_row_uses(d, d->steps_done), d->cfg.delta, alpha);
}

double dp_sgd_epsilon_if_poisson(const DpSgd *d, double *alpha) {
    if (d->steps_done == 0) { if (alpha) *alpha = 0; return 0; }
    return accountant_epsilon(&d->acc, d->cfg.delta, alpha);
}

static int lora_target_bit(WhichTensor w) {
    switch (w) {
    case W_Q_PROJ: return LORA_Q;  case W_K_PROJ: return LORA_K;   case W_V_PROJ: return LORA_V;
    case W_O_PROJ: return LORA_O;  case W_GATE_PROJ: return LORA_GATE; case W_UP_PROJ: return LORA_UP;
    case W_DOWN_PROJ: return LORA_DOWN; default: return 0;
    }
}

int dp_sgd_frozen(void *user, const ParamInfo *p) {
    (void)user;
    /* classify's score head trains whole, as PEFT's modules_to_save for sequence classification */
    return !(p->which == W_LM_HEAD && !strcmp(p->name, "score"));
}

size_t dp_sgd_lora_params(const DpSgd *d) {
    size_t n = 0;
    for (int k = 0; k < d->n_lora; k++) n += lora_param_count(&d->lora[k]);
    return n;
}

static int lora_setup(DpSgd *d, TrainState *s) {
    LlamaModel *m = &s->model;
    const int r = d->cfg.lora_rank;
    const float alpha = d->cfg.lora_alpha > 0 ? (float)d->cfg.lora_alpha : 2.0f * r;
    d->lora = calloc((size_t)m->n_params, sizeof *d->lora);
    d->lora_of = malloc((size_t)m->n_params * sizeof *d->lora_of);
    d->lps = calloc(2 * (size_t)m->n_params, sizeof *d->lps);
    if (!d->lora || !d->lora_of || !d->lps) return fail(d, "%s", "out of host memory (LoRA state)");
    /* bf16: the frozen base is bf16 alone (llama.h), where s·B·A would round away: the model adds the
       adapters beside its GEMMs instead (unmerged form, lora.h) */
    if (m->dt == KDT_BF16 && !(m->lora = d->unmerged = calloc((size_t)m->n_params, sizeof *d->unmerged)))
        return fail(d, "%s", "out of host memory (LoRA state)");
    const int adam = !strcmp(s->cfg->optimizer, "adamw");
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        d->lora_of[i] = -1;
        if (!(lora_target_bit(p->which) & d->cfg.lora_targets) || p->trainable) continue;   /* score: trained whole */
        LoraAdapter *l = &d->lora[d->n_lora];
        if (lora_build(l, d->kb, p->name, i, p->cols, p->rows, r, alpha, adam, (unsigned long long)s->cfg->seed, m->dt)) return -1;
        d->lora_of[i] = d->n_lora++;
        if (d->unmerged) { d->unmerged[i] = l; continue; }
        float *W = *llama_tensor(&m->w, p);   /* (NULL: --zero 3 holds this rank's slice alone; B = 0 adds nothing) */
        if (W && lora_merge(l, d->kb, W, 1.0f)) return -1;   /* B = 0: W is unchanged, but say what is meant */
    }
    for (int k = 0; k < 2 * d->n_lora; k++) d->lps[k].used = -1;
    if (!(s->cfg->quiet || d->cfg.quiet_dp)) {
        char t[64];
        printf("LoRA: rank %d, alpha %g (scale %g) on %s: %d adapters, %zu trainable parameters; the %zu base parameters are frozen\n",
               r, alpha, alpha / r, dp_lora_targets_string(d->cfg.lora_targets, t, sizeof t), d->n_lora,
               dp_sgd_lora_params(d), m->bytes_params / 4);
    }
    char t[64], a[32];
    dpmem_meta_int("lora.rank", r);
    snprintf(a, sizeof a, "%.9g", alpha);
    dpmem_meta("lora.alpha", a);
    dpmem_meta("lora.targets", dp_lora_targets_string(d->cfg.lora_targets, t, sizeof t));
    dpmem_meta_int("lora.trainable_params", (long long)dp_sgd_lora_params(d));
    return 0;
}

static int init_inner(DpSgd *d, TrainState *s);

/* On failure the loop never calls destroy: free what was built here. */
int dp_sgd_init(void *user, TrainState *s) {
    DPMEM_SCOPE("dp_setup");
    DpSgd *d = user;
    int rc = init_inner(d, s);
    if (rc) dp_sgd_destroy(d, s);
    return rc;
}

static int init_inner(DpSgd *d, TrainState *s) {
    d->s = s;
    d->kb = s->kb;
    d->computes = kbackend_computes(s->kb);
    d->cuda = s->kb->kind == KB_CUDA;
    d->gpu = d->cuda || (s->kb->kind == KB_PLAN && s->kb->target && s->kb->target->space != 0);
    LlamaModel *m = &s->model;
    d->dt = m->dt;
    d->ckpt = m->ckpt;
    d->clip_in_hooks = m->dt == KDT_BF16;
    d->tied = m->cfg.tie_embeddings && d->cfg.lora_rank == 0;   /* with LoRA the tied matrix is frozen */
    const int B = m->B;
#ifndef DP_HAVE_CUDA
    if (d->cuda) return fail(d, "%s", "this program was built without the DP CUDA kernels (no nvcc at build time, or SAN=1); use --device cpu");
#endif
    if (d->gpu && B > KCUDA_MAX_B) {
        snprintf(d->kb->err, sizeof d->kb->err, "the CUDA DP kernels take at most %d samples per physical batch, not %d "
                 "(give --max-physical-batch-size)", KCUDA_MAX_B, B);
        return -1;
    }
    d->n_params = m->n_params;
    d->ps = calloc((size_t)m->n_params + 1, sizeof *d->ps);
    if (!d->ps) return fail(d, "%s", "out of host memory (DP state)");
    for (int i = 0; i <= m->n_params; i++) d->ps[i].used = -1;
    if (!(d->norm2 = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/per_sample_norm2")) ||
        !(d->c = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/clip_factors")) ||
        !(d->scratch_norm2 = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/scratch")))
        return -1;
    if (!(d->c_host = calloc((size_t)B, sizeof(float)))) return fail(d, "%s", "out of host memory (clip factors)");
    /* sample rate and σ */
    long rows = d->cfg.dataset_size;
    const long real_rows = (long)data_rows(&s->data, m->T);   /* a row: T+1 tokens at stride T (data.h) */
    if (rows > real_rows) {
        /* rows past the end would be read as row i mod real_rows: one sequence drawn under many
           indices, and q understated by rows / real_rows */
        snprintf(d->kb->err, sizeof d->kb->err, "--dataset-size %ld is above the data's %ld rows (sequences of %d tokens, "
                 "one every %d): rows past the end would repeat real ones and understate the sample rate", rows, real_rows,
                 m->T + 1, m->T);
        return -1;
    }
    if (!rows) rows = real_rows;
    if (rows < d->logical_batch) {
        snprintf(d->kb->err, sizeof d->kb->err, "the dataset has %ld rows (sequences of %d tokens, one every %d), fewer "
                 "than the batch %d", rows, m->T + 1, m->T, d->logical_batch);
        return -1;
    }
    if (d->cfg.poisson && rows > 100000000L) {
        /* the draw visits every row each step (one Philox call per row) */
        snprintf(d->kb->err, sizeof d->kb->err, "--poisson draws each of the %ld rows every step: at most 10^8 rows "
                 "(give a smaller --dataset-size)", rows);
        return -1;
    }
    d->dataset_size = rows;
    d->sample_rate = (double)d->logical_batch / rows;
    d->sigma = d->cfg.noise_multiplier;
    if (d->cfg.target_epsilon > 0) {
        /* the σ whose ε, as this run's sampling supports it (dp_sgd_epsilon), meets the target */
        char err[160];
        d->sigma = d->cfg.poisson ? accountant_sigma_for_epsilon(d->cfg.target_epsilon, d->sample_rate, s->cfg->steps, d->cfg.delta, err)
                                  : accountant_sigma_for_epsilon(d->cfg.target_epsilon, 1.0, dp_sgd_row_uses(d, s->cfg->steps), d->cfg.delta, err);
        if (d->sigma < 0) { snprintf(d->kb->err, sizeof d->kb->err, "%s", err); return -1; }
    }
    /* The noise's (and Poisson's) seed: a given one (--noise-seed, reproducible: the ε holds only while
       it is secret), else 64 bits from getrandom() that nothing prints or logs (noise.h: whoever
       knows the seed can subtract the noise and knows the batches). */
    if (d->cfg.seed_given) d->seed = d->cfg.seed;
    else {
        int ok = 0;
        d->seed = noise_secure_seed(&ok);
        if (!ok) return fail(d, "%s", "the noise seed: getrandom() failed (give --noise-seed N to run with a known seed)");
    }
    accountant_init(&d->acc);
    if (d->cfg.lora_rank > 0 && lora_setup(d, s)) return -1;
    /* (not under --zero 2: the shortcut scales the whole gradient after the backward, which --zero 2 never holds) */
    d->shortcut = (B == 1 && s->cfg->grad_accum == 1 && d->n_lora == 0 && !d->cfg.poisson && s->cfg->zero < 2);
    if (d->cfg.poisson) {
        d->cap_rows = (long)B * s->cfg->grad_accum;
        d->rows = malloc((size_t)d->cap_rows * sizeof *d->rows);
        d->host_batch = malloc(2 * (size_t)B * m->T * sizeof *d->host_batch);
        if (!d->rows || !d->host_batch) return fail(d, "%s", "out of host memory (Poisson rows)");
        if (!(d->mask = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/sample_mask"))) return -1;
    }
    if (!(s->cfg->quiet || d->cfg.quiet_dp)) {
        if (g_comm.world > 1)
            printf("DP-SGD: %d ranks, each with %d of the logical batch's %d samples (%s); the clipped sums are added "
                   "across ranks before the noise, %s\n", g_comm.world, d->logical_batch / g_comm.world, d->logical_batch,
                   d->cfg.poisson ? "Poisson: rank r draws the rows i with i mod N = r" : "rank r: its consecutive share of each step's rows",
                   s->cfg->zero ? "which the rank holding each coordinate's slice adds once (--zero)"
                                : "which every rank adds alike (one Philox stream)");
        printf("DP-SGD: %s norms, %s clipping, C=%g, sigma=%.6g%s, delta=%g, logical batch %d (physical %d x %d), "
               "sample rate %.6g (%ld rows)%s\n",
               dp_norm_name(d->cfg.norm), d->cfg.norm == DP_NORM_DIRECT && d->cfg.clip == DP_CLIP_BK ? "per-sample-sum" : dp_clip_name(d->cfg.clip),
               d->cfg.max_grad_norm, d->sigma, d->cfg.target_epsilon > 0 ? " (from --target-epsilon)" : "",
               d->cfg.delta, d->logical_batch, B, s->cfg->grad_accum, d->sample_rate, rows,
               d->cfg.poisson ? ", Poisson sampling" : "");
        if (d->tied)
            printf("DP-SGD: tied embeddings (lm_head is tied): embed_tokens' per-sample gradient is e_b + h_b, its norm "
                   "%s\n", d->cfg.norm == DP_NORM_DIRECT ? "measured on the sum" : "with the cross term 2<e_b, h_b> from u = D A");
        if (d->shortcut)
            printf("DP-SGD: physical batch of 1 sequence: its gradient IS the per-sample gradient; clipping is one scale (--norm %s not needed)\n",
                   dp_norm_name(d->cfg.norm));
        if (d->cfg.seed_given)
            printf("DP-SGD: --noise-seed given: the noise%s can be regenerated from it; the epsilon printed holds only while "
                   "that seed is secret\n", d->cfg.poisson ? " and the Poisson batches" : "");
        printf("DP-SGD: not covered by epsilon (computed on the private data without noise): the training loss, the "
               "per-sample norms' mean and share clipped%s\n", d->cfg.log_sample_norms ? ", the logged per-sample norms" : "");
    }
    char buf[64];
    dpmem_meta("dp.norm", dp_norm_name(d->cfg.norm));
    dpmem_meta("dp.clip", dp_clip_name(d->cfg.clip));
    snprintf(buf, sizeof buf, "%.9g", d->cfg.max_grad_norm); dpmem_meta("dp.max_grad_norm", buf);
    snprintf(buf, sizeof buf, "%.9g", d->sigma); dpmem_meta("dp.noise_multiplier", buf);
    snprintf(buf, sizeof buf, "%.9g", d->cfg.delta); dpmem_meta("dp.delta", buf);
    snprintf(buf, sizeof buf, "%.9g", d->sample_rate); dpmem_meta("dp.sample_rate", buf);
    dpmem_meta_int("dp.logical_batch", d->logical_batch);
    dpmem_meta_int("dp.physical_batch", B);
    dpmem_meta_int("dp.dataset_size", rows);
    if (d->cfg.target_epsilon > 0) { snprintf(buf, sizeof buf, "%.9g", d->cfg.target_epsilon); dpmem_meta("dp.target_epsilon", buf); }
    dpmem_meta_int("dp.poisson", d->cfg.poisson);
    dpmem_meta("dp.noise_seed", d->cfg.seed_given ? "given" : "getrandom");   /* never the seed itself */
    dpmem_meta_int("dp.shortcut_batch1", d->shortcut);
    dpmem_meta_int("dp.tied_embeddings", d->tied);
    return 0;
}

/* ---- the hook ------------------------------------------------------------------------------------ */

/* CPU with bf16 activations: the fp32 kernels of kernels/cpu see one sample at a time, its rows of A
   and G widened (exactly) into two workspace buffers, T·d_in and T·d_out floats
   (workspace/dp_widen.A, .G). Only on the CPU target: the GPU kernels read bf16 themselves. */
typedef struct { float *a, *g; } Widen;

static int widen_open(DpSgd *d, Widen *w, int T, int din, int dout) {
    w->a = w->g = NULL;
    if (d->dt != KDT_BF16 || d->gpu) return 0;
    if (din > 0 && !(w->a = kbuf_alloc(d->kb, (size_t)T * din * sizeof(float), "workspace/dp_widen.A"))) return -1;
    if (!(w->g = kbuf_alloc(d->kb, (size_t)T * dout * sizeof(float), "workspace/dp_widen.G"))) {
        kbuf_free(d->kb, w->a); w->a = NULL;
        return -1;
    }
    return 0;
}

static void widen_close(DpSgd *d, Widen *w) { kbuf_free(d->kb, w->g); kbuf_free(d->kb, w->a); w->a = w->g = NULL; }

/* Sample b's rows of A [B,T,din] (if given) and G [B,T,dout] into w. */
static void widen_sample(DpSgd *d, Widen *w, const float *A, const float *G, int b, int T, int din, int dout) {
    if (A) widen_buffer(d->kb, w->a, kact_at(A, (size_t)b * T * din, KDT_BF16), (size_t)T * din);
    widen_buffer(d->kb, w->g, kact_at(G, (size_t)b * T * dout, KDT_BF16), (size_t)T * dout);
}

static float *alloc_act(DpSgd *d, size_t elems, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    return kbuf_alloc(d->kb, elems * KDT_SIZE(d->dt), tag);
}

/* A buffer the next kernel writes before anything reads it (the per-sample gradient GEMMs and Gram
   products, beta = 0; the copies of G): no zero-fill on the GPU (kbuf_alloc_overwritten). */
static float *alloc_written(DpSgd *d, size_t bytes, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    return kbuf_alloc_overwritten(d->kb, bytes, tag);
}

/* Every sample's gradient G_bᵀA_b, sample 0's at `first` and the others at `rest`, and their norms. */
static void direct_norms(DpSgd *d, float *norm2, float *first, float *rest, const float *A, const float *G,
                         int B, int T, int din, int dout, Widen *wd, DpIO *io) {
    const size_t per = (size_t)din * dout;
    const KDtype dt = d->dt;
    (void)dt;                                    /* only the GPU calls read it */
    if (wd->g) {
        for (int b = 0; b < B; b++) {
            widen_sample(d, wd, A, G, b, T, din, dout);
            dp_linear_norms_direct_split(norm2 + b, b == 0 ? first : rest + (size_t)(b - 1) * per, NULL, wd->a, wd->g,
                                         1, T, din, dout, io);
        }
        return;
    }
    if (!d->cuda) { dp_linear_norms_direct_split(norm2, first, rest, A, G, B, T, din, dout, io); return; }
    if (rest == first + per) { DP_GPU(dp_linear_norms_direct_cuda_dt(norm2, first, A, G, B, T, din, dout, dt, io)); return; }
    DP_GPU(dp_linear_norms_direct_cuda_dt(norm2, first, A, G, 1, T, din, dout, dt, io));
    if (B > 1) DP_GPU(dp_linear_norms_direct_cuda_dt(norm2 + 1, rest, kact_at(A, (size_t)T * din, dt), kact_at(G, (size_t)T * dout, dt),
                                                     B - 1, T, din, dout, dt, io));
}

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
    if (widen_open(d, &wd, T, din, dout)) return -1;
    int rc = -1;
    if (method == DP_NORM_DIRECT && (d->cfg.norm == DP_NORM_DIRECT || keep_psg)) {
        /* every sample's gradient at once; kept under bk */
        const size_t per = (size_t)din * dout;
        float *first = p->kept && dw && d->s->micro == 0 ? dw : NULL;
        const int slices = first ? B - 1 : B;
        if (slices > 0 && !(p->psg = alloc_written(d, dp_linear_direct_floats(slices, din, dout) * sizeof(float), "per_sample_grads",
                                                   name, "")))
            goto out;
        p->psg_first = first;
        /* the tied lm_head: h_b is measured with e_b added, at the embedding's hook (tied_embedding) */
        float *n2 = d->tied_head ? d->scratch_norm2 : d->norm2;
        if (run) direct_norms(d, n2, first ? first : p->psg, first ? p->psg : p->psg + per, A, G, B, T, din, dout, &wd, &p->io);
        if (!bk && !d->tied_head) { kbuf_free(d->kb, p->psg); p->psg = NULL; }
    } else if (method == DP_NORM_DIRECT) {
        /* mixed: nt samples' gradients at a time (one per thread), squared and thrown away */
        const int chunk = B < nt ? B : nt;
        float *some = alloc_written(d, dp_linear_direct_floats(chunk, din, dout) * sizeof(float), "per_sample_grads", name, ".stream");
        if (!some) goto out;
        if (run)
            for (int b = 0; b < B; b += chunk) {
                const int n = B - b < chunk ? B - b : chunk;
                const float *Ab = kact_at(A, (size_t)b * T * din, dt), *Gb = kact_at(G, (size_t)b * T * dout, dt);
                if (d->cuda) DP_GPU(dp_linear_norms_direct_cuda_dt(d->norm2 + b, some, Ab, Gb, n, T, din, dout, dt, &p->io));
                else if (wd.g)
                    for (int j = 0; j < n; j++) {
                        widen_sample(d, &wd, A, G, b + j, T, din, dout);
                        dp_linear_norms_direct(d->norm2 + b + j, some, wd.a, wd.g, 1, T, din, dout, &p->io);
                    }
                else dp_linear_norms_direct(d->norm2 + b, some, Ab, Gb, n, T, din, dout, &p->io);
            }
        kbuf_free(d->kb, some);
        method = DP_NORM_MIXED;                  /* recorded as "direct-streamed" */
    } else if (method == DP_NORM_GHOST) {
        float *gram = alloc_written(d, dp_linear_ghost_floats(B, T) * sizeof(float), "ghost", name, ".gram");
        if (!gram) goto out;
        if (run && d->cuda) DP_GPU(dp_linear_norms_ghost_cuda_dt(d->norm2, gram, A, G, B, T, din, dout, dt, &p->io));
        else if (run && wd.g)
            for (int b = 0; b < B; b++) {        /* sample b's two Gram matrices in its own part of the buffer */
                widen_sample(d, &wd, A, G, b, T, din, dout);
                dp_linear_norms_ghost(d->norm2 + b, gram + 2 * (size_t)b * T * T, wd.a, wd.g, 1, T, din, dout, &p->io);
            }
        else if (run) dp_linear_norms_ghost(d->norm2, gram, A, G, B, T, din, dout, &p->io);
        kbuf_free(d->kb, gram);
    } else if (d->gpu) {
        /* the GPU's Gram blocks [2, B, R, T] and partial sums: R from a fixed budget (kcuda_flash_rows),
           the same on the plan for cuda; --flash-tile is the CPU's */
        const int R = kcuda_flash_rows(B, T);
        float *tile = alloc_written(d, kcuda_flash_floats(B, T, R) * sizeof(float), "ghost", name, ".tile");
        if (!tile) goto out;
        if (run) DP_GPU(dp_linear_norms_flash_cuda_dt(d->norm2, tile, A, G, B, T, din, dout, R, dt, &p->io));
        kbuf_free(d->kb, tile);
    } else {
        /* one tile pair per thread, and the row sums */
        float *tile = alloc_tag(d, dp_linear_flash_floats(B, T, d->cfg.flash_tile, nt), "ghost", name, ".tile");
        if (!tile) goto out;
        if (run && wd.g)
            for (int b = 0; b < B; b++) {
                widen_sample(d, &wd, A, G, b, T, din, dout);
                dp_linear_norms_flash(d->norm2 + b, tile, wd.a, wd.g, 1, T, din, dout, d->cfg.flash_tile, nt, &p->io);
            }
        else if (run) dp_linear_norms_flash(d->norm2, tile, A, G, B, T, din, dout, d->cfg.flash_tile, nt, &p->io);
        kbuf_free(d->kb, tile);
    }
    p->used = (int)method;
    rc = 0;
out:
    widen_close(d, &wd);
    if (rc) return rc;
    if (bk && !keep_psg) {
        if (borrow) {
            /* lm_head: G is the logits buffer turned into dlogits in place, which the backward keeps
               (GRAD_HOOK_KEEP_G) until llama_release_saved: N x V not copied */
            p->G = (float *)G;
            p->G_borrowed = 1;
            d->keep_bits |= GRAD_HOOK_KEEP_G;
        } else {
            if (!(p->G = alloc_written(d, (size_t)B * T * dout * KDT_SIZE(d->dt), "bk", name, ".G"))) return -1;
            if (copy_ex(d->kb, dt, p->G, G, (size_t)B * T * dout)) return -1;
        }
        p->A = A;
        p->A_owned = a_owned;
        if (!a_owned) d->keep_bits |= GRAD_HOOK_KEEP_A;
    }
    return 0;
}

/* dW += Σ_b c_b g_b of one tensor from what its hook kept (per-sample gradients, or A and G). */
static int clipped_sum(DpSgd *d, DpParamState *p, float *dw, const int *tokens, int V) {
    const int B = p->B, T = p->T, run = d->computes;
    const KDtype dt = d->dt;
    (void)dt;
    if (!dw) return 0;
    const size_t P = p->kind == HOOK_LINEAR ? (size_t)p->d_in * p->d_out : p->kind == HOOK_RMSNORM ? (size_t)p->d_out
                   : (size_t)V * p->d_out;
    if (p->psg_first || p->psg) {
        if (!run) return 0;
        if (d->cuda) {
            if (p->psg_first) DP_GPU(dp_clipped_sum_first_cuda(dw, p->psg, d->c, B, P));
            else DP_GPU(dp_clipped_sum_cuda(dw, p->psg, d->c, B, P));
        } else if (p->psg_first) dp_clipped_sum_first(dw, p->psg, d->c, B, P);
        else if (p->kind == HOOK_EMBEDDING) dp_embedding_clipped_sum_direct(dw, p->psg, tokens, d->c, B, T, p->d_out, V);
        else dp_clipped_sum(dw, p->psg, d->c, B, P);
        return 0;
    }
    if (!p->G) return 0;
    const int emb = p->kind == HOOK_EMBEDDING;
    Widen wd;
    if (widen_open(d, &wd, T, emb ? 0 : p->d_in, p->d_out)) return -1;
    if (run && d->cuda) {
        if (emb) DP_GPU(dp_embedding_clipped_grad_bk_cuda_dt(dw, tokens, p->G, d->c, B, T, p->d_out, V, dt));
        else DP_GPU(dp_linear_clipped_grad_bk_hostc_cuda_dt(dw, p->A, p->G, d->c_host, B, T, p->d_in, p->d_out, dt));
    } else if (run && wd.g) {
        for (int b = 0; b < B; b++) {
            if (d->c[b] == 0.0f) continue;       /* dropped (the kernels skip it too): nothing to widen */
            widen_sample(d, &wd, emb ? NULL : p->A, p->G, b, T, p->d_in, p->d_out);
            if (emb) dp_embedding_clipped_grad_bk(dw, tokens + (size_t)b * T, wd.g, d->c + b, 1, T, p->d_out);
            else dp_linear_clipped_grad_bk(dw, wd.a, wd.g, d->c + b, 1, T, p->d_in, p->d_out);
        }
    } else if (run) {
        if (emb) dp_embedding_clipped_grad_bk(dw, tokens, p->G, d->c, B, T, p->d_out);
        else dp_linear_clipped_grad_bk(dw, p->A, p->G, d->c, B, T, p->d_in, p->d_out);
    }
    widen_close(d, &wd);
    return 0;
}

/* RMSNorm weight: psg [B, C] = Σ_t dout·inp·rstd, its norms into norm2. */
static void rmsnorm_norms(DpSgd *d, float *norm2, float *psg, const GradHookArgs *a, Widen *wd) {
    const int B = a->B, T = a->T, C = a->d_out;
    if (d->cuda) DP_GPU(dp_rmsnorm_norms_direct_cuda_dt(norm2, psg, a->G, a->A, a->rstd, B, T, C, a->dt));
    else if (wd->g)
        for (int b = 0; b < B; b++) {
            widen_sample(d, wd, a->A, a->G, b, T, C, C);
            dp_rmsnorm_norms_direct(norm2 + b, psg + (size_t)b * C, wd->g, wd->a, a->rstd + (size_t)b * T, 1, T, C);
        }
    else dp_rmsnorm_norms_direct(norm2, psg, a->G, a->A, a->rstd, B, T, C);
}

/* Two-pass under bf16: the second backward runs with the first one's loss weights, so its
   activation gradients are those of the first (the same ops: the same bits), and each weight's
   clipped sum Σ_b c_b g_b is formed here, from exactly the values whose norms were measured.
   (A loss weighted by c_b would be rounded to bf16 after the scaling: not c_b times the measured
   gradient.) The RMSNorm weights' per-sample gradients are formed again (B·C each). */
static int pass2_clipped(DpSgd *d, const GradHookArgs *a) {
    DpParamState t = { .kind = a->kind, .B = a->B, .T = a->T, .d_in = a->d_in, .d_out = a->d_out, .used = -1 };
    if (a->kind == HOOK_RMSNORM) {
        Widen wd;
        if (widen_open(d, &wd, a->T, a->d_in, a->d_out)) return -1;
        t.psg = alloc_tag(d, (size_t)a->B * a->d_out, "per_sample_grads", a->name, "");
        if (t.psg && d->computes) rmsnorm_norms(d, d->scratch_norm2, t.psg, a, &wd);
        widen_close(d, &wd);
        if (!t.psg) return -1;
        int rc = clipped_sum(d, &t, a->dW, NULL, 0);
        kbuf_free(d->kb, t.psg);
        return rc;
    }
    t.G = (float *)a->G;
    t.A = a->A;
    return clipped_sum(d, &t, a->dW, a->tokens, d->s->model.V);
}

/* A frozen projection with an adapter: hs and dh from x and dy, then the adapter's two halves. */
static int lora_hook(DpSgd *d, int k, const GradHookArgs *a) {
    LoraAdapter *l = &d->lora[k];
    const int B = a->B, T = a->T, N = B * T, r = l->r;
    char name[96];
    float *hs = alloc_act(d, (size_t)N * r, "lora", l->name, ".hs");
    float *dh = alloc_act(d, (size_t)N * r, "lora", l->name, ".dh");
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
            rc = clipped_sum(d, &tb, l->dB, NULL, 0) || clipped_sum(d, &ta, l->dA, NULL, 0) ? -1 : 0;
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
    if (!(d->tied_u = alloc_tag(d, (size_t)B * T * C, "ghost", a->name, ".tied_u"))) return -1;
    if (d->gpu) {                                /* D's block rows, of dlogits' type (kcuda_tied_rows) */
        const int R = kcuda_tied_rows(B, T, d->dt);
        float *rows = alloc_tag(d, kcuda_tied_cross_floats(B, T, R, d->dt), "ghost", a->name, ".tied.tile");
        if (!rows) return -1;
        if (d->cuda && d->computes)
            DP_GPU(dp_tied_cross_u_cuda_dt(d->tied_u, rows, d->s->model.tokens, a->G, a->A, B, T, C, V, R, d->dt, &p->io));
        kbuf_free(d->kb, rows);
        return 0;
    }
    const int nt = d->kb->nthreads < 1 ? 1 : d->kb->nthreads;
    const int R = d->cfg.norm == DP_NORM_GHOST ? T : d->cfg.flash_tile;
    float *gather = alloc_tag(d, dp_tied_cross_floats(T, R, nt), "ghost", a->name, ".tied.tile");
    Widen wd;
    if (!gather || widen_open(d, &wd, T, C, V)) { kbuf_free(d->kb, gather); return -1; }
    if (d->computes && wd.g)
        for (int b = 0; b < B; b++) {
            widen_sample(d, &wd, a->A, a->G, b, T, C, V);
            dp_tied_cross_u(d->tied_u + (size_t)b * T * C, gather, d->s->model.tokens + (size_t)b * T, wd.g, wd.a,
                            1, T, C, V, R, nt, &p->io);
        }
    else if (d->computes) dp_tied_cross_u(d->tied_u, gather, d->s->model.tokens, a->G, a->A, B, T, C, V, R, nt, &p->io);
    widen_close(d, &wd);
    kbuf_free(d->kb, gather);
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
            if (d->cuda) DP_GPU(dp_psg_norms_cuda(d->norm2, h->psg, B, (size_t)V * C));
            else dp_psg_norms(d->norm2, h->psg, B, (size_t)V * C);
        }
        p->io.read = (uint64_t)B * T * (C + 1) * 4 + (uint64_t)B * V * C * 8; p->io.written = (uint64_t)B * V * C * 4;
        p->used = DP_NORM_DIRECT;
        if (d->cfg.clip != DP_CLIP_BK) { kbuf_free(d->kb, h->psg); h->psg = NULL; }
        return 0;
    }
    Widen wd;
    if (widen_open(d, &wd, T, 0, C)) return -1;
    if (d->computes && d->cuda) {
        DP_GPU(dp_embedding_norms_cuda_dt(d->norm2, a->tokens, a->G, B, T, C, dt, &p->io));
        DP_GPU(dp_tied_cross_dot_cuda_dt(d->norm2, a->G, d->tied_u, B, T, C, dt, &p->io));
    } else if (d->computes && wd.g)
        for (int b = 0; b < B; b++) {
            widen_sample(d, &wd, NULL, a->G, b, T, 0, C);
            dp_embedding_norms(d->norm2 + b, a->tokens + (size_t)b * T, wd.g, 1, T, C, &p->io);
            dp_tied_cross_dot(d->norm2 + b, wd.g, d->tied_u + (size_t)b * T * C, 1, T, C, &p->io);
        }
    else if (d->computes) {
        dp_embedding_norms(d->norm2, a->tokens, a->G, B, T, C, &p->io);
        dp_tied_cross_dot(d->norm2, a->G, d->tied_u, B, T, C, &p->io);
    }
    widen_close(d, &wd);
    kbuf_free(d->kb, d->tied_u); d->tied_u = NULL;
    p->used = DP_NORM_GHOST;
    if (d->cfg.clip == DP_CLIP_BK) {
        if (!(p->G = alloc_written(d, (size_t)B * T * C * KDT_SIZE(d->dt), "bk", a->name, ".G"))) return -1;
        if (copy_ex(d->kb, dt, p->G, a->G, (size_t)B * T * C)) return -1;
    }
    return 0;
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
    const int run = d->computes;
    if (a->kind == HOOK_RMSNORM) {
        p->kind = a->kind; p->B = B; p->T = T; p->d_in = din; p->d_out = dout;
        /* B x C is small: always direct (kept for the clipped sum under bk) */
        Widen wd;
        if (widen_open(d, &wd, T, din, dout)) return -1;
        if (!(p->psg = alloc_tag(d, (size_t)B * dout, "per_sample_grads", a->name, ""))) { widen_close(d, &wd); return -1; }
        if (run) rmsnorm_norms(d, d->norm2, p->psg, a, &wd);
        widen_close(d, &wd);
        p->io.read = (uint64_t)B * T * (2 * dout + 1) * 4; p->io.written = (uint64_t)B * (dout + 1) * 4;
        p->used = DP_NORM_DIRECT;
        if (!bk) { kbuf_free(d->kb, p->psg); p->psg = NULL; }
        return GRAD_HOOK_SKIP_DW;
    }
    if (a->kind == HOOK_EMBEDDING) {
        const int V = d->s->model.V;
        const KDtype dt = a->dt;
        p->kind = a->kind; p->B = B; p->T = T; p->d_in = din; p->d_out = dout;
        Widen wd;
        if (widen_open(d, &wd, T, 0, dout)) return -1;
        if (d->cfg.norm == DP_NORM_DIRECT) {
            if (!(p->psg = alloc_tag(d, (size_t)B * V * dout, "per_sample_grads", a->name, ""))) { widen_close(d, &wd); return -1; }
            if (run && d->cuda) {
                /* no scatter-into-psg twin on the GPU: each sample's rows by the backend's embedding
                   backward (its scratch, if any, is the target's and so in the plan), the norms by
                   token equality (the same sum: ‖scatter(g_b)‖² = Σ_{t,s} [tok_t = tok_s] g_t·g_s) */
                if (fill_buffer(d->kb, p->psg, 0.0f, (size_t)B * V * dout)) return -1;
                for (int b = 0; b < B; b++)
                    if (embedding_backward_ex(d->kb, dt, p->psg + (size_t)b * V * dout, a->tokens + (size_t)b * T,
                                              kact_at(a->G, (size_t)b * T * dout, dt), T, dout, V)) return -1;
                DP_GPU(dp_embedding_norms_cuda_dt(d->norm2, a->tokens, a->G, B, T, dout, dt, NULL));
            } else if (run && wd.g)
                for (int b = 0; b < B; b++) {
                    widen_sample(d, &wd, NULL, a->G, b, T, 0, dout);
                    dp_embedding_norms_direct(d->norm2 + b, p->psg + (size_t)b * V * dout, a->tokens + (size_t)b * T, wd.g, 1, T, dout, V);
                }
            else if (run) dp_embedding_norms_direct(d->norm2, p->psg, a->tokens, a->G, B, T, dout, V);
            /* the CPU kernel writes only the tokens' rows; the GPU path fills the slices whole */
            p->io.read = (uint64_t)B * T * (dout + 1) * 4;
            p->io.written = d->cuda ? (uint64_t)B * V * dout * 4 : (uint64_t)B * T * dout * 4;
            p->used = DP_NORM_DIRECT;
            if (!bk) { kbuf_free(d->kb, p->psg); p->psg = NULL; }
            widen_close(d, &wd);
        } else {
            if (run && d->cuda) DP_GPU(dp_embedding_norms_cuda_dt(d->norm2, a->tokens, a->G, B, T, dout, dt, NULL));
            else if (run && wd.g)
                for (int b = 0; b < B; b++) {
                    widen_sample(d, &wd, NULL, a->G, b, T, 0, dout);
                    dp_embedding_norms(d->norm2 + b, a->tokens + (size_t)b * T, wd.g, 1, T, dout, NULL);
                }
            else if (run) dp_embedding_norms(d->norm2, a->tokens, a->G, B, T, dout, NULL);
            widen_close(d, &wd);
            p->io.read = (uint64_t)B * T * (dout + 1) * 4; p->io.written = (uint64_t)B * 4;
            p->used = DP_NORM_GHOST;
            if (bk) {
                if (!(p->G = alloc_written(d, (size_t)B * T * dout * KDT_SIZE(d->dt), "bk", a->name, ".G"))) return -1;
                if (copy_ex(d->kb, dt, p->G, a->G, (size_t)B * T * dout)) return -1;
            }
        }
        return GRAD_HOOK_SKIP_DW;
    }
    d->keep_bits = 0;
    if (linear_norm(d, p, a->name, a->A, a->G, B, T, din, dout, NULL, NULL, a->dW)) return -1;
    return GRAD_HOOK_SKIP_DW | d->keep_bits;
}

/* ---- one physical batch -------------------------------------------------------------------------- */

static void free_state(DpSgd *d, DpParamState *p) {
    kbuf_free(d->kb, p->psg); p->psg = NULL;
    p->psg_first = NULL;                         /* dW itself: not ours */
    if (!p->G_borrowed) kbuf_free(d->kb, p->G);
    p->G = NULL; p->G_borrowed = 0;
    kbuf_free(d->kb, p->A_owned); p->A_owned = NULL;
    p->A = NULL;
}

static void free_kept(DpSgd *d) {
    for (int i = 0; d->ps && i <= d->n_params; i++) free_state(d, &d->ps[i]);   /* n_params: a tied lm_head */
    kbuf_free(d->kb, d->tied_u); d->tied_u = NULL;
    for (int k = 0; d->lps && k < 2 * d->n_lora; k++) free_state(d, &d->lps[k]);
}

static float *slot_grad(DpSgd *d, int i) {
    LlamaModel *m = &d->s->model;
    return *llama_tensor(&m->dw, &m->params[i]);
}

static void print_choice(DpSgd *d) {
    LlamaModel *m = &d->s->model;
    uint64_t io = 0;
    int n_linear = 0, n_kept = 0;
    for (int i = 0; i < d->n_params; i++) {
        DpParamState *p = &d->ps[i];
        if (p->used < 0) continue;
        const char *name = m->params[i].name;
        const char *how = p->kind == HOOK_RMSNORM ? "direct" : p->kind == HOOK_EMBEDDING
                          ? (p->used == DP_NORM_DIRECT ? "direct" : "token-equality")
                          : p->kept ? "direct-kept" : p->used == DP_NORM_MIXED ? "direct-streamed" : dp_norm_name((DpNorm)p->used);
        char key[128];
        snprintf(key, sizeof key, "dp.layer.%s", name);
        dpmem_meta(key, how);
        snprintf(key, sizeof key, "dp.io.%s", name);
        dpmem_meta_int(key, (long long)(p->io.read + p->io.written));
        io += p->io.read + p->io.written;
        if (p->kind == HOOK_LINEAR) { n_linear++; n_kept += p->kept; }
        if (d->cfg.norm == DP_NORM_MIXED && p->kind == HOOK_LINEAR && d->s->cfg->verbose && !(d->s->cfg->quiet || d->cfg.quiet_dp)) {
            /* the costs the choice compared (dp_mixed.c), in GFLOP-equivalents (flops + 270 * bytes) */
            const int es = d->dt == KDT_BF16 ? 2 : 4, kept = p->kept && p->B == 1;
            const double dc = dp_cost_flop_equivalent(dp_linear_cost(kept ? DP_WAY_DIRECT_KEPT : DP_WAY_DIRECT, p->B, p->T,
                                                                      p->d_in, p->d_out, es)) / 1e9;
            const double gc = dp_cost_flop_equivalent(dp_linear_cost(kept ? DP_WAY_GRAM_COPY_G : DP_WAY_GRAM, p->B, p->T,
                                                                      p->d_in, p->d_out, es)) / 1e9;
            printf("DP-SGD mixed: %-34s %5dx%-5d T=%d: %s (cost: direct %.3g, flash %.3g GFLOP-eq)\n", name, p->d_out,
                   p->d_in, p->T, p->kept ? "direct, kept for book-keeping" : p->used == DP_NORM_FLASH ? "flash" : "direct",
                   dc, gc);
        }
    }
    if (n_kept && d->cfg.norm != DP_NORM_MIXED && !(d->s->cfg->quiet || d->cfg.quiet_dp))
        printf("DP-SGD %s: %d of %d linear layers (d_in <= T) keep their per-sample gradients for book-keeping "
               "and take their norms from them; %s for the others\n", dp_norm_name(d->cfg.norm), n_kept, n_linear,
               dp_norm_name(d->cfg.norm));
    int n_mixed = 0, n_mixed_direct = 0, n_lora_kept = 0, n_lora_flash = 0, n_lora_direct = 0;
    for (int i = 0; i < d->n_params && d->cfg.norm == DP_NORM_MIXED; i++)
        if (d->ps[i].used >= 0 && d->ps[i].kind == HOOK_LINEAR) { n_mixed++; n_mixed_direct += d->ps[i].kept || d->ps[i].used != DP_NORM_FLASH; }
    for (int k = 0; k < 2 * d->n_lora; k++) {
        DpParamState *p = &d->lps[k];
        if (p->used < 0) continue;
        if (p->kept) n_lora_kept++; else if (p->used == DP_NORM_FLASH) n_lora_flash++; else n_lora_direct++;
        char key[160];
        snprintf(key, sizeof key, "dp.layer.%s.lora_%c", d->lora[k / 2].name, k % 2 ? 'B' : 'A');
        dpmem_meta(key, p->kept ? "direct-kept" : p->used == DP_NORM_MIXED ? "direct-streamed" : dp_norm_name((DpNorm)p->used));
        io += p->io.read + p->io.written;
        if ((d->cfg.norm == DP_NORM_MIXED || p->kept) && d->s->cfg->verbose && !(d->s->cfg->quiet || d->cfg.quiet_dp))
            printf("DP-SGD %s: %-27s.lora_%c %5dx%-5d T=%d: %s\n", dp_norm_name(d->cfg.norm), d->lora[k / 2].name, k % 2 ? 'B' : 'A',
                   p->d_out, p->d_in, p->T, p->kept ? "direct, from the kept per-sample gradients" : p->used == DP_NORM_FLASH ? "flash" : "direct");
    }
    /* one line for all layers unless --verbose (a 3b LoRA plan printed 112 before its answer) */
    if (!d->s->cfg->verbose && !(d->s->cfg->quiet || d->cfg.quiet_dp)) {
        if (n_mixed) printf("DP-SGD mixed: %d linear layers: %d direct (the cheaper at these shapes, or d_in <= T: kept for book-keeping), "
                            "%d flash (--verbose: each layer)\n", n_mixed, n_mixed_direct, n_mixed - n_mixed_direct);
        if (n_lora_kept + n_lora_flash + n_lora_direct && (d->cfg.norm == DP_NORM_MIXED || n_lora_kept))
            printf("DP-SGD %s: %d LoRA adapter matrices: %d direct from their kept per-sample gradients, %d flash, %d direct "
                   "(--verbose: each)\n", dp_norm_name(d->cfg.norm), n_lora_kept + n_lora_flash + n_lora_direct, n_lora_kept,
                   n_lora_flash, n_lora_direct);
    }
    d->io_step = io * (uint64_t)d->s->cfg->grad_accum;
    dpmem_meta_int("dp.norm_io_bytes_per_step", (long long)d->io_step);
    d->printed_choice = 1;
}

/* --log-sample-norms: samples first.. of this step's logical batch (this rank's share) into the log,
   at most 24 (norm, clip factor) pairs per META dp.sample_norms event (tools/read/steplog.h). */
static void log_sample_norms(DpSgd *d, long first, const float *n2, const float *c, int n) {
    const long limit = d->cfg.log_sample_norms;
    for (int i0 = 0; i0 < n && first + i0 < limit; i0 += 24) {
        char rec[1024];
        int k = snprintf(rec, sizeof rec, "%d %ld", d->s->step + 1, first + i0);
        for (int i = i0; i < n && i < i0 + 24 && first + i < limit; i++)
            k += snprintf(rec + k, sizeof rec - (size_t)k, " %.9g %.9g", sqrt(fmax(n2[i], 0)), c[i]);
        dpmem_meta("dp.sample_norms", rec);
    }
}

/* The factors c on the host (d->c_host), read back once per physical batch: the statistics, the GPU's
   book-keeping GEMMs and two-pass's second backward all take them from there. */
static int read_factors(DpSgd *d, int B) {
    return d->computes && kbuf_download(d->kb, d->c_host, d->c, (size_t)B * sizeof(float)) ? -1 : 0;
}

/* The summary's statistics from norm2 (on the GPU: read back, in chunks) and c_host. */
static int collect_stats(DpSgd *d, int B) {
    if (!d->computes) return 0;
    float n2[256];
    const float *c;
    const long first = d->s ? (long)d->s->micro * d->physical_batch : 0;   /* in the step's logical batch */
    for (int b0 = 0; b0 < B; b0 += 256) {
        const int n = B - b0 < 256 ? B - b0 : 256;
        if (kbuf_download(d->kb, n2, d->norm2 + b0, (size_t)n * sizeof(float))) return -1;
        c = d->c_host + b0;
        for (int i = 0; i < n; i++) {
            d->norm_sum += sqrt(fmax(n2[i], 0));
            d->clipped_frac_sum += c[i] < 1.0f;
            d->dropped_samples += c[i] == 0.0f;   /* a norm that is not finite: c_b = 0, the sample adds nothing */
            d->norm_count++;
        }
        if (d->s && first + b0 < d->cfg.log_sample_norms) log_sample_norms(d, first + b0, n2, c, n);
    }
    return 0;
}

/* Under bf16 the factors keep a margin (DP_BF16_CLIP_MARGIN, dp_kernels.h): c_b·‖g_b‖ ≤ C also when
   the measured norm is a little low. fp32 keeps Opacus's factor, bit for bit as before. */
static void clip_factors(DpSgd *d, int B) {
    if (!d->computes) return;
    const float C = (float)d->cfg.max_grad_norm;
    if (d->dt == KDT_BF16) {
        if (d->cuda) DP_GPU(dp_clip_factors_safe_cuda(d->c, d->norm2, B, C, DP_BF16_CLIP_MARGIN));
        else dp_clip_factors_safe(d->c, d->norm2, B, C, DP_BF16_CLIP_MARGIN);
    } else if (d->cuda) DP_GPU(dp_clip_factors_cuda(d->c, d->norm2, B, C));
    else dp_clip_factors(d->c, d->norm2, B, C);
}

/* The rows of this step: each of the dataset's rows with probability q, from (seed, step, row); this
   rank's share of them. */
static void poisson_draw(DpSgd *d, TrainState *s) {
    const uint32_t q32 = (uint32_t)fmin(4294967295.0, d->sample_rate * 4294967296.0);
    d->n_rows = 0;
    /* with several ranks, rank r draws the rows i = r mod world: together they draw what one process would */
    for (long i = g_comm.rank; i < d->dataset_size; i += g_comm.world) {
        philox4x32_ctr_t c = {{ (uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)s->step, 0x504F4953u /* "POIS" */ }};
        philox4x32_key_t k = {{ (uint32_t)d->seed, (uint32_t)(d->seed >> 32) }};
        if (philox4x32(c, k).v[0] >= q32) continue;
        if (d->n_rows == d->cap_rows) { d->truncated++; continue; }
        d->rows[d->n_rows++] = i;
    }
    d->sampled_total += d->n_rows;
}

/* Tokens of rows first .. first+real-1 into the model, padding rows after them (mask 0). */
static int poisson_upload(DpSgd *d, TrainState *s, long first, int real) {
    LlamaModel *m = &s->model;
    const int B = m->B, T = m->T;
    int *in = d->host_batch, *tg = d->host_batch + (size_t)B * T;
    for (int b = 0; b < B; b++) {
        if (b < real) data_row(&s->data, (size_t)d->rows[first + b], in + (size_t)b * T, tg + (size_t)b * T, T);   /* the row drawn */
        else for (int t = 0; t < T; t++) { in[b * T + t] = 0; tg[b * T + t] = 0; }
    }
    float mask[64];
    if (kbuf_upload(d->kb, m->tokens, in, (size_t)B * T * sizeof(int)) ||
        kbuf_upload(d->kb, m->targets, tg, (size_t)B * T * sizeof(int)))
        return -1;
    for (int b0 = 0; b0 < B; b0 += 64) {
        int n = B - b0 < 64 ? B - b0 : 64;
        for (int i = 0; i < n; i++) mask[i] = b0 + i < real ? 1.0f : 0.0f;
        if (kbuf_upload(d->kb, d->mask + b0, mask, (size_t)n * sizeof(float))) return -1;
    }
    return 0;
}

/* Whether ghost's two-pass may keep the activations through its first backward without raising the
   peak: the peak of that backward is at lm_head's hook (every activation live, and its two B·T×T
   Grams); kept, the activations stay live at every later hook too, each with Grams of the same size,
   and at every attention backward, whose scratch must then be no larger than the Grams. (Not with
   tied embeddings, whose u lives from lm_head's hook on beside the later Grams, nor LoRA, whose
   first hook is not lm_head's; tests/test_dp_train and the plans check the peaks.) */
static int again_fits(const DpSgd *d, const LlamaModel *m) {
    const KShape sh = { .B = m->B, .T = m->T, .NH = m->NH, .NKV = m->NKV, .HS = m->HS };
    const size_t grams = dp_linear_ghost_floats(m->B, m->T) * sizeof(float);
    return d->kb->target->scratch_bytes(d->kb, KOP_ATTENTION_BACKWARD, &sh) <= grams;
}

/* A physical batch of one sequence: its gradient is its per-sample gradient; the clip is one scale. */
static int shortcut_clip(DpSgd *d, TrainState *s) {
    LlamaModel *m = &s->model;
    double n2 = 0;
    for (int i = 0; i < m->n_params; i++) {
        float *g = *llama_tensor(&m->dw, &m->params[i]);
        double x = 0;
        if (g && reduce_sumsq(d->kb, g, m->params[i].numel, &x)) return -1;
        n2 += x;
    }
    /* one sample: the factor on the host (the same function), then stored where the stats read it */
    float n2f = (float)n2, c0 = 1.0f;
    if (d->dt == KDT_BF16) dp_clip_factors_safe(&c0, &n2f, 1, (float)d->cfg.max_grad_norm, DP_BF16_CLIP_MARGIN);
    else dp_clip_factors(&c0, &n2f, 1, (float)d->cfg.max_grad_norm);
    if (d->computes && (kbuf_upload(d->kb, d->norm2, &n2f, sizeof n2f) || kbuf_upload(d->kb, d->c, &c0, sizeof c0)))
        return -1;
    d->c_host[0] = c0;
    for (int i = 0; i < m->n_params; i++) {
        float *g = *llama_tensor(&m->dw, &m->params[i]);
        if (!g || !d->computes || c0 == 1.0f) continue;
        /* c = 0 (a norm that is not finite): exactly zero, not 0 · NaN */
        if (c0 == 0.0f ? fill_buffer(d->kb, g, 0.0f, m->params[i].numel) : scale_inplace(d->kb, g, c0, m->params[i].numel)) return -1;
    }
    return collect_stats(d, 1);
}

static int physical_batch_rows(DpSgd *d, TrainState *s, int real);

int dp_sgd_physical_batch(void *user, TrainState *s) {
    DpSgd *d = user;
    const int B = s->model.B;
    int real = B;                                /* rows of this physical batch that are data */
    if (!d->cfg.seed_given && !d->seed_shared) {  /* one noise stream for the job: rank 0's drawn seed (no rank has
                                                     --noise-seed: train.c compared the configurations) */
        if (g_comm.world > 1 && comm_broadcast(&g_comm, &d->seed, sizeof d->seed, 0, "the noise seed's broadcast")) return -1;
        d->seed_shared = 1;
    }
    if (d->cfg.poisson) {
        if (s->micro == 0) poisson_draw(d, s);
        long first = (long)s->micro * B;
        real = d->n_rows - first < B ? (int)(d->n_rows - first) : B;
        if (real <= 0) {
            d->empty_batches++;
            /* this step drew fewer rows: nothing to do (--zero 2: the units' reduce-scatters still run, of zeros, as on
               every rank); --zero 3 gathers each unit's weights at every forward and backward, on every rank at once:
               the whole physical batch runs on padding rows of weight 0 (exactly zero gradients), its loss left out */
            if (s->cfg->zero < 3) return grad_reduce_idle(&s->dist);
            const double loss_sum = s->loss_sum;
            const long loss_n = s->loss_n;
            int rc = poisson_upload(d, s, first, 0) || physical_batch_rows(d, s, 0);
            s->loss_sum = loss_sum; s->loss_n = loss_n;
            return rc ? -1 : 0;
        }
        if (poisson_upload(d, s, first, real)) return -1;
    }
    return physical_batch_rows(d, s, real);
}

/* The forward again on the same rows and weights (two-pass's second pass): the step's loss counts them once,
   so that the job's loss weighs every rank by its rows whether or not it ran a forward again. */
static int forward_again(TrainState *s) {
    const double loss_sum = s->loss_sum;
    const long loss_n = s->loss_n;
    if (train_forward(s)) return -1;
    s->loss_sum = loss_sum; s->loss_n = loss_n;
    return 0;
}

/* The physical batch in the model (its first `real` rows data, the rest padding of loss weight 0): forward,
   per-sample norms, clipping, the clipped sum. */
static int physical_batch_rows(DpSgd *d, TrainState *s, int real) {
    LlamaModel *m = &s->model;
    const int B = m->B;
    const float per_sample_scale = 1.0f / llama_loss_positions(m);   /* g_b = ∇ (mean over the sequence's loss terms: T, classify 1) */
    s->data_rows = real;                         /* the loss the loop logs is the data rows' */
    if (train_forward(s)) return -1;
    if (d->shortcut) {
        /* the gradient is clipped after the backward: reduced after it (grad_reduce_step), not unit by unit */
        const GradHooks plain = { .dw_elsewhere = 1 };
        if (train_backward_scaled(s, &plain, per_sample_scale)) return -1;
        const uint64_t t0 = dpmem_now_ns();
        int rc;
        { DPMEM_SCOPE("clip"); rc = shortcut_clip(d, s); }
        train_phase_add(s, TRAIN_PH_CLIP, t0);
        return rc;
    }
    const int bk = d->cfg.clip == DP_CLIP_BK;
    d->retain = bk && d->cfg.norm != DP_NORM_DIRECT && d->n_lora == 0;   /* LoRA adapters keep psg */
    /* bk keeps A and G: only the A's the hooks ask for (GRAD_HOOK_KEEP_*: the inputs of layers whose
       G is copied, lm_head's dlogits), with or without checkpointing; every other activation is freed
       as the backward passes it, as in the vanilla backward. Retaining them all (retain_saved) held
       the whole forward's activations beside the kept per-sample gradients: 1b T=4096 bf16 B=1+1
       flash+bk peaked at 1.138x vanilla's, 3.1 GB of that per-sample gradients on top of 5.6 GB of
       activations no hook needed. */
    /* ghost two-pass (fp32, no checkpointing, no LoRA), where it costs no memory: the first backward
       leaves the activations (and lm_head's output gradient) in place, so the second is a backward
       again with no second forward (see again_fits) */
    const int may_again = !bk && !d->clip_in_hooks && !d->ckpt && d->n_lora == 0 && !d->tied && d->cfg.norm == DP_NORM_GHOST;
    int again = may_again && again_fits(d, m);
    GradHooks h = { .user = d, .weight_grad = dp_sgd_weight_grad, .loss_weights = d->cfg.poisson ? d->mask : NULL,
                    .retain_saved = 0, .frozen_too = d->n_lora > 0, .dw_elsewhere = 1, .keep_activations = again };
    d->pass = 1;
    if (fill_buffer(d->kb, d->norm2, 0.0f, (size_t)B)) return -1;
    if (train_backward_scaled(s, &h, per_sample_scale)) { free_kept(d); return -1; }
    const uint64_t t_clip = dpmem_now_ns();
    const double ar0 = s->phase_s[TRAIN_PH_ALLREDUCE];   /* the units' reductions below are allreduce's, not clip's */
    {
        DPMEM_SCOPE("clip");
        clip_factors(d, B);
        if (read_factors(d, B) || collect_stats(d, real)) { free_kept(d); return -1; }
        if (!d->printed_choice) print_choice(d);
        if (bk) {
            /* unit by unit in the backward's order (llama.h's gradient units: the reduction of each as it is
               formed, --zero 2's full-size buffers one unit at a time; every rank the same order) */
            int bad = 0;
            const int L = m->L, units = llama_grad_units(m);
            for (int k = 0; k < units && !bad; k++) {
                const int u = k == 0 ? llama_unit_head(m) : k <= L ? L - k : llama_unit_embed(m);
                bad = llama_unit_event(m, u, 0);
                for (int i = 0; i < d->n_params && !bad; i++)
                    if (llama_grad_unit(m, i) == u) bad = clipped_sum(d, &d->ps[i], slot_grad(d, i), m->tokens, m->V);
                if (d->tied && u == llama_unit_embed(m) && !bad)   /* the same dW, after the embedding's (as before) */
                    bad = clipped_sum(d, &d->ps[d->n_params], m->dw.lm_head, m->tokens, m->V);
                if (!bad) bad = llama_unit_event(m, u, 1);
            }
            for (int k = 0; k < d->n_lora && !bad; k++)
                bad = clipped_sum(d, &d->lps[2 * k], d->lora[k].dA, NULL, 0) || clipped_sum(d, &d->lps[2 * k + 1], d->lora[k].dB, NULL, 0);
            if (bad) { free_kept(d); llama_release_saved(m); return -1; }
        }
        free_kept(d);                            /* before the release: borrowed buffers go with it */
        llama_release_saved(m);
    }
    train_phase_add(s, TRAIN_PH_CLIP, t_clip);
    s->phase_s[TRAIN_PH_CLIP] -= s->phase_s[TRAIN_PH_ALLREDUCE] - ar0;
    /* a sample dropped (c_b = 0: its norm is not finite) must add exactly nothing: a backward weighted
       by c_b would give 0 · NaN = NaN for it and for the sum; the clipped sums in the hooks skip it */
    int dropped = 0;
    for (int b = 0; !bk && d->computes && b < B; b++) dropped |= d->c_host[b] == 0.0f;
    /* --zero 3 over several ranks: every forward gathers each unit's weights on every rank at once, so the ranks
       agree on whether the second pass runs one. `again` runs none; a rank runs one where it has a drop (below) or
       where again_fits says no (its scratch: the CPU's threads, the device's; --threads may differ by rank). One
       all-reduce of both flags, where `again` may hold on some rank: on any rank either, and every rank runs its
       forward again (a rank that had `again`: the second backward with again = 0, which gives `again`'s bits).
       Otherwise that forward's gathers would meet the other ranks' backward ones (mismatched sizes: the job died
       in MPI, or hung until DPMEM_COMM_TIMEOUT). Without may_again every rank runs the forward anyway. */
    if (may_again && d->computes && llama_params_sharded(m) && g_comm.world > 1) {
        double any[2] = { dropped, !again };
        if (comm_allreduce_double(&g_comm, any, 2, "whether the second pass runs a forward (a dropped sample, again_fits)")) return -1;
        if (any[0] > 0 || any[1] > 0) again = 0;
    }
    d->pass2_sums = d->clip_in_hooks || dropped;
    if (!bk && d->pass2_sums) {
        /* two-pass under bf16 (or with a dropped sample): the second backward as the first (a forward
           again: it frees what `again` kept), the clipped sums in the hooks */
        if (forward_again(s)) return -1;
        GradHooks h2 = { .user = d, .weight_grad = dp_sgd_weight_grad, .loss_weights = d->cfg.poisson ? d->mask : NULL,
                         .retain_saved = 0, .frozen_too = d->n_lora > 0 };
        d->pass = 2;
        int rc = train_backward_scaled(s, &h2, per_sample_scale);
        d->pass = 1;
        if (rc) return -1;
    } else if (!bk) {
        /* two-pass (fp32): the second backward weights each sample's loss by c_b, applied to lm_head's
           output gradient of the first pass's weights (the Poisson mask), each sample's rows scaled by
           c_b. With `again` (ghost, where it costs no memory) the first backward left every activation
           and that gradient in place, so there is no second forward: one forward and two backwards, as
           Opacus's ghost clipping (retain_graph); otherwise (checkpointing, the other norms) the
           forward runs again. Both give the same bits (tests/test_comm_zero_drop: --zero 3 turns `again` off above
           where another rank runs the forward, and saves the unsharded run's file). The factors from the host (c_host). */
        if (!again && forward_again(s)) return -1;
        GradHooks h2 = { .user = d, .weight_grad = d->n_lora ? dp_sgd_weight_grad : NULL,
                         .loss_weights = d->cfg.poisson ? d->mask : NULL, .frozen_too = d->n_lora > 0 };
        d->pass = 2;
        int rc = train_backward_rescaled(s, &h2, per_sample_scale, d->c_host, again);
        d->pass = 1;
        if (rc) return -1;
        d->backward_again += again;
    }
    return 0;
}

/* ---- once per logical batch ---------------------------------------------------------------------- */

/* One adapter's step: unmerge from W (merged form; unmerged: W unused), update, re-merge, its gradients zeroed. */
static int lora_update(DpSgd *d, TrainState *s, LoraAdapter *l, float *W, int adam) {
    const TrainConfig *c = s->cfg;
    const size_t na = (size_t)l->r * l->IC, nb = (size_t)l->OC * l->r;
    if (!d->unmerged && lora_merge(l, d->kb, W, -1.0f)) return -1;
    if (adam) {
        if (adamw_update(d->kb, l->A, l->dA, l->mA, l->vA, na, s->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay, s->step + 1) ||
            adamw_update(d->kb, l->B, l->dB, l->mB, l->vB, nb, s->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay, s->step + 1))
            return -1;
    } else if (sgd_update(d->kb, l->A, l->dA, na, s->lr, c->weight_decay) || sgd_update(d->kb, l->B, l->dB, nb, s->lr, c->weight_decay))
        return -1;
    if (!d->unmerged && lora_merge(l, d->kb, W, 1.0f)) return -1;
    return fill_buffer(d->kb, l->dA, 0.0f, na) || fill_buffer(d->kb, l->dB, 0.0f, nb) ? -1 : 0;
}

/* The adapters' optimizer step (the loop's only updates model tensors). --zero 3 holds this rank's slice of
   a merged base alone: the weight is gathered whole for the merges (shard_gather_tensor: the same GEMMs on
   the same values as an unsharded rank's, so the same bits), this rank's slice of the result kept. */
static int lora_step(DpSgd *d, TrainState *s) {
    DPMEM_SCOPE("optimizer_step");
    const int adam = !strcmp(s->cfg->optimizer, "adamw");
    LlamaModel *m = &s->model;
    for (int k = 0; k < d->n_lora; k++) {
        LoraAdapter *l = &d->lora[k];
        const ParamInfo *p = &m->params[l->param_index];
        if (d->unmerged || !llama_base_sharded(m, p)) {
            if (lora_update(d, s, l, *llama_tensor(&m->w, p), adam)) return -1;
            continue;
        }
        float *W = shard_gather_tensor(&s->dist, l->param_index);
        size_t lo, len;
        llama_slice(p->numel, m->shard_world, m->shard_rank, &lo, &len);
        const int rc = !W || lora_update(d, s, l, W, adam) || (len && copy_buffer(d->kb, *llama_tensor(&m->wsh, p), W + lo, len));
        kbuf_free(d->kb, W);
        if (rc) return -1;
    }
    return 0;
}

/* g = (g + N(0, σ²C²)) / L with the noise stream of kernels/noise.h (the same values on both devices). */
static void privatize(DpSgd *d, float *g, size_t n, uint64_t step, uint64_t offset) {
    if (!d->computes) return;
    if (d->cuda) DP_GPU(noise_privatize_cuda(g, n, d->sigma, d->cfg.max_grad_norm, d->logical_batch, d->seed, step, offset));
    else noise_privatize(g, n, d->sigma, d->cfg.max_grad_norm, d->logical_batch, d->seed, step, offset);
}

int dp_sgd_before_update(void *user, TrainState *s) {
    DpSgd *d = user;
    if (s->step == s->cfg->steps - 1 && d->computes) {
        /* the summary's per-sample norm statistics are the job's: every rank's sums and counts, at the last step */
        double v[3] = { d->norm_sum, d->clipped_frac_sum, (double)d->norm_count };
        if (dist_sum_host(&s->dist, v, 3, "the per-sample norms' statistics")) return -1;
        d->norm_sum = v[0]; d->clipped_frac_sum = v[1]; d->norm_count = (long)v[2];
    }
    if (d->n_lora && g_comm.world > 1) {
        /* the adapters' clipped sums, added across ranks as the loop did for the model's gradients */
        float **bufs = malloc(2 * (size_t)d->n_lora * sizeof *bufs);
        size_t *ns = malloc(2 * (size_t)d->n_lora * sizeof *ns);
        if (!bufs || !ns) { free(bufs); free(ns); return fail(d, "%s", "out of host memory (all-reduce)"); }
        for (int k = 0; k < d->n_lora; k++) {
            bufs[2 * k] = d->lora[k].dA; ns[2 * k] = (size_t)d->lora[k].r * d->lora[k].IC;
            bufs[2 * k + 1] = d->lora[k].dB; ns[2 * k + 1] = (size_t)d->lora[k].OC * d->lora[k].r;
        }
        int rc = dist_allreduce(&s->dist, bufs, ns, 2 * d->n_lora, "the LoRA gradient all-reduce");
        free(bufs); free(ns);
        if (rc) return -1;
    }
    const uint64_t t_noise = dpmem_now_ns();
    {
        DPMEM_SCOPE("noise");
        LlamaModel *m = &s->model;
        uint64_t offset = 0;
        for (int i = 0; i < m->n_params; i++) {
            const ParamInfo *p = &m->params[i];
            if (!p->trainable) continue;
            const ShardView v = shard_view(&s->dist, i);   /* --zero: only this rank's slice (its noise, from the same global indices) */
            if (v.g) privatize(d, v.g, v.n, (uint64_t)s->step, offset + v.lo);
            offset += p->numel;
        }
        for (int k = 0; k < d->n_lora; k++) {
            LoraAdapter *l = &d->lora[k];
            privatize(d, l->dA, (size_t)l->r * l->IC, (uint64_t)s->step, offset);
            privatize(d, l->dB, (size_t)l->OC * l->r, (uint64_t)s->step, offset + (size_t)l->r * l->IC);
            offset += lora_param_count(l);
        }
    }
    train_phase_add(s, TRAIN_PH_NOISE, t_noise);
    const uint64_t t_opt = dpmem_now_ns();   /* the adapters' update: the optimizer's phase */
    if (d->n_lora && lora_step(d, s)) return -1;
    if (d->n_lora) train_phase_add(s, TRAIN_PH_OPTIMIZER, t_opt);
    if (accountant_step(&d->acc, d->sigma, d->sample_rate)) return fail(d, "%s", "accountant: too many (sigma, q) groups");
    d->steps_done++;
    return 0;
}

void dp_sgd_destroy(void *user, TrainState *s) {
    DpSgd *d = user;
    if (d->kb) {
        free_kept(d);
        for (int k = d->n_lora - 1; k >= 0; k--) lora_free(&d->lora[k], d->kb);
        kbuf_free(d->kb, d->mask); d->mask = NULL;
        kbuf_free(d->kb, d->scratch_norm2); d->scratch_norm2 = NULL;
        kbuf_free(d->kb, d->norm2); d->norm2 = NULL;
        kbuf_free(d->kb, d->c); d->c = NULL;
    }
    if (d->steps_done > 0) {
        double alpha;
        double eps = dp_sgd_epsilon(d, &alpha);
        char buf[64];
        const long uses = dp_sgd_row_uses(d, d->steps_done);
        double alpha_p, eps_p = d->cfg.poisson ? eps : dp_sgd_epsilon_if_poisson(d, &alpha_p);
        snprintf(buf, sizeof buf, "%.9g", eps); dpmem_meta("dp.epsilon", buf);
        snprintf(buf, sizeof buf, "%.9g", alpha); dpmem_meta("dp.best_alpha", buf);
        dpmem_meta("dp.epsilon_sampling", d->cfg.poisson ? "poisson" : "sequential");
        dpmem_meta_int("dp.dropped_samples", d->dropped_samples);   /* this rank's */
        if (!d->cfg.poisson) {
            dpmem_meta_int("dp.row_uses", uses);
            snprintf(buf, sizeof buf, "%.9g", eps_p); dpmem_meta("dp.epsilon_if_poisson", buf);
        }
        dpmem_meta_int("dp.steps", d->steps_done);
        if (!s || !(s->cfg->quiet || d->cfg.quiet_dp)) {
            if (d->cfg.poisson)
                printf("DP-SGD: epsilon = %.4f at delta = %g after %ld steps (Poisson sampling; sigma %.4g, sample rate %.4g, RDP order %g)",
                       eps, d->cfg.delta, d->steps_done, d->sigma, d->sample_rate, alpha);
            else
                printf("DP-SGD: epsilon = %.4f at delta = %g after %ld steps (batches in order: each row in at most %ld of them, "
                       "no sampling amplification; sigma %.4g, RDP order %g; with --poisson, sample rate %.4g: %.4f)",
                       eps, d->cfg.delta, d->steps_done, uses, d->sigma, alpha, d->sample_rate, eps_p);
            if (d->norm_count)
                printf("; mean per-sample norm %.4g, %.0f%% of samples clipped",
                       d->norm_sum / d->norm_count, 100.0 * d->clipped_frac_sum / d->norm_count);
            if (d->dropped_samples)
                printf("; %ld sample%s dropped%s (a per-sample norm not finite: it adds nothing)", d->dropped_samples,
                       d->dropped_samples == 1 ? "" : "s", g_comm.world > 1 ? " on this rank" : "");
            if (d->io_step) {   /* in the binary units of every other size the trainers print */
                const double b = (double)d->io_step;
                if (b >= 1073741824.0) printf("; norm IO %.2f GiB/step", b / 1073741824.0);
                else if (b >= 1048576.0) printf("; norm IO %.2f MiB/step", b / 1048576.0);
                else printf("; norm IO %.2f KiB/step", b / 1024.0);
            }
            printf("\n");
        }
    }
    if (d->cfg.poisson) {
        dpmem_meta_int("dp.poisson_truncated", d->truncated);
        dpmem_meta_int("dp.poisson_empty_batches", d->empty_batches);
        if (d->truncated && (!s || !(s->cfg->quiet || d->cfg.quiet_dp)))
            printf("DP-SGD: Poisson sampling drew more rows than a step holds %ld times (dropped)\n", d->truncated);
    }
    free(d->rows); d->rows = NULL;
    free(d->host_batch); d->host_batch = NULL;
    free(d->ps); d->ps = NULL;
    free(d->c_host); d->c_host = NULL;
    free(d->lps); d->lps = NULL;
    if (d->unmerged && s && s->model.lora == d->unmerged) s->model.lora = NULL;
    free(d->unmerged); d->unmerged = NULL;
    free(d->lora); d->lora = NULL;
    free(d->lora_of); d->lora_of = NULL;
    d->n_lora = 0;
}
