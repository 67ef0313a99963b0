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
   device pointers (dp_device.c's dp_run: the one place that chooses); the host reads back only B
   floats per physical batch (the norms and clip factors, for the summary's statistics). A plan for the CUDA target allocates what that path allocates: the
   same tags and sizes (flash's ghost/<param>.tile and the tied gather's .tied.tile sized by the GPU's
   block rows, kcuda_flash_rows and kcuda_tied_rows, where the CPU's come from --flash-tile).
   Built with DP_HAVE_CUDA where the program links the CUDA backend (mk/dp.mk); without it a CUDA
   backend cannot exist in the process, and the GPU calls are never reached.
   This file is the strategy's glue (prepare, init, the physical batch, the noise, destroy). Not here:
   the hook's norms (dp_norms.c), the clip and the clipped sums (dp_clip.c), LoRA's adapters (dp_lora.c,
   lora.c), what is printed and logged (dp_report.c), where a kernel runs (dp_device.c): dp_sgd_impl.h;
   the kernels (kernels/cpu/dp_*.c, kernels/cuda), the loop (train.c). */
#include "dp_sgd_impl.h"
#include "poisson_capacity.h"
#include "llama/comm.h"
#include "dpmem.h"
#include "noise.h"
#include "plan/cost.h"
#include "cuda/kernels_cuda.h"   /* plain C: the GPU twins' declarations and KCUDA_MAX_B */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The accountant's noise multipliers (d->sigma_acc): σ / factor of each adjacency; with --secure-noise the
   gradient's rounding to the grid adds Λ√d to the sensitivity (kernels/secure_noise.h), d the noised
   coordinates, and a σ from --target-epsilon is raised so that the accountant's still meets the target:
   σ_acc(σ) ≥ σ / (a + σ·2⁻²⁸√d) (Λ ≤ σC·2⁻²⁸), which equals the mechanism's σ_m at σ = a·σ_m / (1 − σ_m·2⁻²⁸√d). */
static int sigma_for_accountant(DpSgd *d, TrainState *s) {
    double a[2] = { 1.0, 2.0 };
    if (!d->cfg.secure_noise) {
        for (int k = 0; k < 2; k++) d->sigma_acc[k] = d->sigma / a[k];
        return 0;
    }
    double n = (double)dp_sgd_lora_params(d);
    for (int i = 0; i < s->model.n_params; i++) n += s->model.params[i].trainable ? (double)s->model.params[i].numel : 0.0;
    if (d->cfg.target_epsilon > 0) {
        const double f = accountant_adjacency_factor(dp_sgd_adjacency(d)), sm = d->sigma / f, x = sm * 0x1p-28 * sqrt(n);
        if (!(x < 0.5)) {
            snprintf(d->kb->err, sizeof d->kb->err, "--secure-noise: the grid of %d parameters needs too much noise for --target-epsilon %g",
                     (int)n, d->cfg.target_epsilon);
            return -1;
        }
        d->sigma = f * sm / (1 - x);
    }
    for (int k = 0; k < 2; k++) d->sigma_acc[k] = secure_noise_sigma_for_accountant(d->sigma, d->cfg.max_grad_norm, a[k], n);
    return 0;
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
    /* --poisson: room for the rows a step may draw, the odds of more below 1e-9 for the job (poisson_capacity.h) */
    cfg->grad_accum = dp->poisson ? (int)((dp_poisson_capacity(L, cfg->steps, g_comm.world) + P - 1) / P) : L / P;
    st->name = d->method;   /* the method that runs, whatever the binary's name */
    st->user = d;
    st->init = dp_sgd_init;
    st->physical_batch = dp_sgd_physical_batch;
    st->before_update = dp_sgd_before_update;
    st->update = dp_sgd_update;
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
    config_field(f, "--secure-noise", "%d", d->cfg.secure_noise);
    config_field(f, "--adjacency", "%s", d->cfg.replace_one ? "replace-one" : "zero-out");
    config_field(f, "--dataset-size", "%ld", d->dataset_size);
    /* the seed itself only when given (--noise-seed); a drawn one is secret (rank 0's, broadcast at the first batch) */
    config_field(f, "--noise-seed", "%llu", d->cfg.seed_given ? (unsigned long long)d->seed : 0ull);
    config_field(f, "the noise seed's source", "%s", d->cfg.seed_given ? "--noise-seed" : "getrandom");
    config_field(f, "--lora-rank", "%d", d->cfg.lora_rank);
    config_field(f, "--lora-alpha", "%.17g", d->cfg.lora_alpha);
    config_field(f, "--lora-targets", "%s", dp_lora_targets_string(d->cfg.lora_targets, t, sizeof t));
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
    if (s->kb->cost && !d->gpu) s->kb->cost->bench_dp = dp_plan_bench;   /* the CPU profile times the DP kernels themselves */
    LlamaModel *m = &s->model;
    d->dt = m->dt;
    d->ckpt = m->ckpt;
    d->clip_in_hooks = m->dt == KDT_BF16;
    d->tied = m->cfg.tie_embeddings && d->cfg.lora_rank == 0;   /* with LoRA the tied matrix is frozen */
    const int B = m->B;
#ifndef DP_HAVE_CUDA
    if (d->cuda) return dp_fail(d, "%s", "this program was built without the DP CUDA kernels (no nvcc at build time, or SAN=1); use --device cpu");
#endif
    if (d->gpu && B > KCUDA_MAX_B) {
        snprintf(d->kb->err, sizeof d->kb->err, "the CUDA DP kernels take at most %d samples per physical batch, not %d "
                 "(give --max-physical-batch-size)", KCUDA_MAX_B, B);
        return -1;
    }
    d->n_params = m->n_params;
    d->ps = calloc((size_t)m->n_params + 1, sizeof *d->ps);
    if (!d->ps) return dp_fail(d, "%s", "out of host memory (DP state)");
    for (int i = 0; i <= m->n_params; i++) d->ps[i].used = -1;
    if (!(d->norm2 = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/per_sample_norm2")) ||
        !(d->c = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/clip_factors")) ||
        !(d->scratch_norm2 = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/scratch")))
        return -1;
    if (!(d->c_host = calloc((size_t)B, sizeof(float)))) return dp_fail(d, "%s", "out of host memory (clip factors)");
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
        /* that is the mechanism's multiplier: under replace-one (sensitivity 2C) the noise's is twice it */
        d->sigma *= accountant_adjacency_factor(dp_sgd_adjacency(d));
    }
    /* The noise's (and Poisson's) seed: a given one (--noise-seed, reproducible: the ε holds only while
       it is secret), else 64 bits from getrandom() that nothing prints or logs (noise.h: whoever
       knows the seed can subtract the noise and knows the batches). */
    if (d->cfg.seed_given) d->seed = d->cfg.seed;
    else {
        int ok = 0;
        d->seed = noise_secure_seed(&ok);
        if (!ok) return dp_fail(d, "%s", "the noise seed: getrandom() failed (give --noise-seed N to run with a known seed)");
    }
    /* --secure-noise: ChaCha20's 256-bit key (kernels/secure_noise.h), drawn, or the given seed's */
    if (d->cfg.secure_noise && d->cfg.seed_given) secure_noise_key_from_seed(&d->key, d->cfg.seed);
    else if (d->cfg.secure_noise && !secure_noise_key_random(&d->key))
        return dp_fail(d, "%s", "the secure noise's key: getrandom() failed (give --noise-seed N to run with a known key)");
    accountant_init(&d->acc);
    if (d->cfg.lora_rank > 0 && dp_lora_setup(d, s)) return -1;
    if (sigma_for_accountant(d, s)) return -1;
    if (dp_fused_setup(d, s)) return -1;
    /* (not under --zero 2: the shortcut scales the whole gradient after the backward, which --zero 2 never holds) */
    d->shortcut = (B == 1 && s->cfg->grad_accum == 1 && d->n_lora == 0 && !d->cfg.poisson && s->cfg->zero < 2);
    if (d->cfg.poisson) {
        d->cap_rows = (long)B * s->cfg->grad_accum;
        d->rows = malloc((size_t)d->cap_rows * sizeof *d->rows);
        d->host_batch = malloc(2 * (size_t)B * m->T * sizeof *d->host_batch);
        if (!d->rows || !d->host_batch) return dp_fail(d, "%s", "out of host memory (Poisson rows)");
        if (!(d->mask = kbuf_alloc(d->kb, (size_t)B * sizeof(float), "norms/sample_mask"))) return -1;
    }
    dp_report_setup(d, s);
    return 0;
}

/* ---- one physical batch -------------------------------------------------------------------------- */

/* The rows of this step: each of the dataset's rows with probability q, from (seed, step, row); this
   rank's share of them. */
static void poisson_draw(DpSgd *d, TrainState *s) {
    const uint32_t q32 = (uint32_t)fmin(4294967295.0, d->sample_rate * 4294967296.0);
    const uint64_t q64 = secure_noise_q64(d->sample_rate);
    d->n_rows = 0;
    /* with several ranks, rank r draws the rows i = r mod world: together they draw what one process would */
    for (long i = g_comm.rank; i < d->dataset_size; i += g_comm.world) {
        if (d->cfg.secure_noise) {   /* ChaCha20's "POIS" stream, 64-bit threshold */
            if (!secure_noise_poisson_take(&d->key, (uint64_t)s->step, (uint64_t)i, q64)) continue;
        } else {
            philox4x32_ctr_t c = {{ (uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)s->step, 0x504F4953u /* "POIS" */ }};
            philox4x32_key_t k = {{ (uint32_t)d->seed, (uint32_t)(d->seed >> 32) }};
            if (philox4x32(c, k).v[0] >= q32) continue;
        }
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

static int physical_batch_rows(DpSgd *d, TrainState *s, int real);

int dp_sgd_physical_batch(void *user, TrainState *s) {
    DpSgd *d = user;
    const int B = s->model.B;
    int real = B;                                /* rows of this physical batch that are data */
    if (!d->cfg.seed_given && !d->seed_shared) {  /* one noise stream for the job: rank 0's drawn seed (no rank has
                                                     --noise-seed: train.c compared the configurations) */
        if (g_comm.world > 1 && comm_broadcast(&g_comm, &d->seed, sizeof d->seed, 0, "the noise seed's broadcast")) return -1;
        if (g_comm.world > 1 && d->cfg.secure_noise && comm_broadcast(&g_comm, &d->key, sizeof d->key, 0, "the secure noise key's broadcast"))
            return -1;
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
        { DPMEM_SCOPE("clip"); rc = dp_shortcut_clip(d, s); }
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
    if (train_backward_scaled(s, &h, per_sample_scale)) { dp_free_kept(d); return -1; }
    const uint64_t t_clip = dpmem_now_ns();
    const double ar0 = s->phase_s[TRAIN_PH_ALLREDUCE];   /* the units' reductions below are allreduce's, not clip's */
    {
        DPMEM_SCOPE("clip");
        dp_compute_factors(d, B);
        if (dp_read_factors(d, B) || dp_collect_stats(d, real)) { dp_free_kept(d); return -1; }
        if (!d->printed_choice) dp_report_choice(d);
        if (bk && dp_clip_units(d)) { dp_free_kept(d); llama_release_saved(m); return -1; }
        dp_free_kept(d);                            /* before the release: borrowed buffers go with it */
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

/* g = (g + N(0, σ²C²)) / L with the noise stream of kernels/noise.h, or --secure-noise's of
   kernels/secure_noise.h (dp_device.c; the same values on both devices). */
static void privatize(DpSgd *d, float *g, size_t n, uint64_t step, uint64_t offset) {
    const DpKernel k = { .op = DPK_NOISE, .dw = g, .per = n, .step = step, .offset = offset };
    if (d->computes) dp_run(d, NULL, &k);
    else kcost_op(d->kb->cost, KCO_NOISE, 4, n, 1, 0);   /* the plan's time: Philox + Box-Muller */
}

int dp_sgd_before_update(void *user, TrainState *s) {
    DpSgd *d = user;
    if (s->step == s->cfg->steps - 1 && d->computes) {
        /* the summary's per-sample norm statistics are the job's: every rank's sums and counts, at the last step */
        double v[3] = { d->norm_sum, d->clipped_frac_sum, (double)d->norm_count };
        if (dist_sum_host(&s->dist, v, 3, "the per-sample norms' statistics")) return -1;
        d->norm_sum = v[0]; d->clipped_frac_sum = v[1]; d->norm_count = (long)v[2];
    }
    if (d->n_lora && g_comm.world > 1 && dp_lora_allreduce(d, s)) return -1;
    const uint64_t t_noise = dpmem_now_ns();
    {
        DPMEM_SCOPE("noise");
        LlamaModel *m = &s->model;
        /* d->fused: the optimizer's pass adds it (dp_fused.c), tensor by tensor; the noise row keeps this loop only */
        for (int i = 0; !d->fused && i < m->n_params; i++) {
            if (!m->params[i].trainable) continue;
            const ShardView v = shard_view(&s->dist, i);   /* --zero: only this rank's slice (its noise, from the same global indices) */
            if (v.g) privatize(d, v.g, v.n, (uint64_t)s->step, d->flat[i] + v.lo);
        }
        for (int k = 0; !d->fused && k < d->n_lora; k++) {
            LoraAdapter *l = &d->lora[k];
            const uint64_t offset = d->flat[m->n_params + k];
            privatize(d, l->dA, (size_t)l->r * l->IC, (uint64_t)s->step, offset);
            privatize(d, l->dB, (size_t)l->OC * l->r, (uint64_t)s->step, offset + (size_t)l->r * l->IC);
        }
    }
    train_phase_add(s, TRAIN_PH_NOISE, t_noise);
    const uint64_t t_opt = dpmem_now_ns();   /* the adapters' update: the optimizer's phase */
    if (d->n_lora && dp_lora_step(d, s)) return -1;
    if (d->n_lora) train_phase_add(s, TRAIN_PH_OPTIMIZER, t_opt);
    if (accountant_step(&d->acc, d->sigma_acc[0], d->sample_rate)) return dp_fail(d, "%s", "accountant: too many (sigma, q) groups");
    d->steps_done++;
    return 0;
}

void dp_sgd_destroy(void *user, TrainState *s) {
    DpSgd *d = user;
    if (d->kb) {
        dp_free_kept(d);
        for (int k = d->n_lora - 1; k >= 0; k--) lora_free(&d->lora[k], d->kb);
        kbuf_free(d->kb, d->mask); d->mask = NULL;
        kbuf_free(d->kb, d->scratch_norm2); d->scratch_norm2 = NULL;
        kbuf_free(d->kb, d->norm2); d->norm2 = NULL;
        kbuf_free(d->kb, d->c); d->c = NULL;
    }
    dp_report_summary(d, s);
    free(d->rows); d->rows = NULL;
    free(d->host_batch); d->host_batch = NULL;
    free(d->ps); d->ps = NULL;
    free(d->flat); d->flat = NULL;
    free(d->c_host); d->c_host = NULL;
    free(d->lps); d->lps = NULL;
    if (d->unmerged && s && s->model.lora == d->unmerged) s->model.lora = NULL;
    free(d->unmerged); d->unmerged = NULL;
    free(d->lora); d->lora = NULL;
    free(d->lora_of); d->lora_of = NULL;
    d->n_lora = 0;
}
