/* train.c — the one training loop (see train.h): backend choice, log and META, model creation,
   steps with fixed scope names, the optimizer and its schedule, --check-finite, the progress line
   and the closing summary. Not here: the model (llama.c) or any per-sample DP logic. */
#include "train.h"
#include "checkpoint.h"
#include "eval.h"
#include "dpmem.h"
#include "common/io_guard.h"
#include "mfu.h"
#include "plan_time.h"
#include "common/timestats.h"
#ifdef TRAIN_HAVE_CUDA_PLAN
#include "cuda/kernels_cuda.h"
#endif
#include "cpu/blas_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRY(x) do { if ((x) != 0) return -1; } while (0)

static const char *const PHASE_NAMES[TRAIN_PH_N] = { "data", "forward", "loss", "backward", "clip", "noise", "optimizer_step",
                                                      "zero_grad", "allreduce" };
enum { PH_DATA = TRAIN_PH_DATA, PH_FORWARD = TRAIN_PH_FORWARD, PH_LOSS = TRAIN_PH_LOSS, PH_BACKWARD = TRAIN_PH_BACKWARD,
       PH_CLIP = TRAIN_PH_CLIP, PH_OPTIMIZER = TRAIN_PH_OPTIMIZER, PH_ZERO_GRAD = TRAIN_PH_ZERO_GRAD, PH_ALLREDUCE = TRAIN_PH_ALLREDUCE };
void train_phase_add(TrainState *s, TrainPhase ph, uint64_t t0) { s->phase_s[ph] += (double)(dpmem_now_ns() - t0) * 1e-9; }
#define phase_add(s, ph, t0) train_phase_add((s), (TrainPhase)(ph), (t0))

/* Per-step times are kept for the summary's statistics: at most this many steps (the first ones). */
#define TRAIN_MAX_TIMED_STEPS 100000

/* The seconds since t0 into phase ph, less what the ranks' collectives inside it added to their own phase
   (--zero 3's weight gathers in the forward, the reduction unit by unit in the backward): each second in
   one row of the table. */
static void phase_add_less_comm(TrainState *s, int ph, uint64_t t0, double comm0) {
    s->phase_s[ph] += (double)(dpmem_now_ns() - t0) * 1e-9 - (s->phase_s[PH_ALLREDUCE] - comm0);
}

int train_forward(TrainState *s) {
    uint64_t t0 = dpmem_now_ns();
    double comm0 = s->phase_s[PH_ALLREDUCE];
    { DPMEM_SCOPE("forward"); TRY(llama_forward(&s->model)); }
    phase_add_less_comm(s, PH_FORWARD, t0, comm0);
    t0 = dpmem_now_ns();
    comm0 = s->phase_s[PH_ALLREDUCE];
    const int B = s->model.B, rows = s->data_rows > 0 && s->data_rows < B ? s->data_rows : B;
    {
        DPMEM_SCOPE("loss");
        TRY(llama_loss(&s->model, &s->loss));
        if (rows < B && kbackend_computes(s->kb)) {   /* padded: the mean over the rows that are data */
            double sum = 0;
            const int per = llama_loss_positions(&s->model);
            TRY(reduce_sum(s->kb, s->model.acts.losses, (size_t)rows * per, &sum));
            s->loss = sum / ((double)rows * per);
        }
    }
    phase_add_less_comm(s, PH_LOSS, t0, comm0);
    s->loss_sum += s->loss * rows;   /* the step's loss: the mean over all its rows */
    s->loss_n += rows;
    return 0;
}

int train_check_finite(TrainState *s, int grads, const char *phase) {
    if (!s->cfg->check_finite || !kbackend_computes(s->kb)) return 0;
    LlamaModel *m = &s->model;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        /* NULL: frozen (no grads), or a frozen weight kept in bf16 alone (llama.h), which nothing writes
           after the checkpoint's load has checked it finite */
        const float *x = *llama_tensor(grads ? &m->dw : &m->w, p);
        size_t n = p->numel, lo = 0;
        /* this rank's slice: the others check theirs (a frozen base's in fp32: merged LoRA writes it; in bf16 never written) */
        if (!grads && (llama_master_sharded(m, p) || (llama_base_sharded(m, p) && llama_slice_dt(m, p) == KDT_F32))) {
            x = *llama_tensor(&m->wsh, p);
            llama_slice(p->numel, m->shard_world, m->shard_rank, &lo, &n);
        }
        if (grads && grad_reduce_active(&s->dist) == 2) {   /* --zero 2: the slices (the full-size buffers are gone) */
            TRY(grad_reduce_finish(&s->dist));
            const ShardView v = shard_view(&s->dist, i);
            x = v.g;
            n = v.n;
        }
        if (!x || n == 0) continue;
        size_t bad = 0;
        TRY(count_nonfinite(s->kb, x, n, &bad));
        if (bad) {
            char msg[192];
            snprintf(msg, sizeof msg, "non-finite values in %s/%s at step %d after %s", grads ? "grads" : "params",
                     p->name, s->step + 1, phase);
            dpmem_warn(msg, bad);
            fprintf(stderr, "error: %s (%zu of %zu values are NaN or Inf)\n", msg, bad, n);
            s->nonfinite = 1;
            return -1;
        }
    }
    return 0;
}

int train_backward_scaled(TrainState *s, const GradHooks *hooks, float loss_scale) {
    uint64_t t0 = dpmem_now_ns();
    /* a DP hook's per-sample norms run inside: they count as clip; the reduction unit by unit, as allreduce */
    const double clip0 = s->phase_s[PH_CLIP] + s->phase_s[PH_ALLREDUCE];
    { DPMEM_SCOPE("backward"); TRY(llama_backward(&s->model, hooks, loss_scale)); }
    phase_add_less_comm(s, PH_BACKWARD, t0, clip0 - s->phase_s[PH_CLIP]);
    return train_check_finite(s, 1, "backward");
}

int train_backward(TrainState *s, const GradHooks *hooks) { return train_backward_scaled(s, hooks, s->loss_scale); }

int train_backward_rescaled(TrainState *s, const GradHooks *hooks, float loss_scale, const float *sample_scale, int again) {
    uint64_t t0 = dpmem_now_ns();
    const double clip0 = s->phase_s[PH_CLIP] + s->phase_s[PH_ALLREDUCE];   /* as in train_backward_scaled */
    { DPMEM_SCOPE("backward"); TRY(llama_backward_rescaled(&s->model, hooks, loss_scale, sample_scale, again)); }
    phase_add_less_comm(s, PH_BACKWARD, t0, clip0 - s->phase_s[PH_CLIP]);
    return train_check_finite(s, 1, "backward");
}

static float lr_at(const TrainConfig *c, int step) {
    if (c->warmup_steps > 0 && step < c->warmup_steps) return c->lr * (float)(step + 1) / (float)c->warmup_steps;
    int decay = c->steps - c->warmup_steps;
    if (decay <= 1) return c->lr;
    float frac = (float)(step - c->warmup_steps) / (float)(decay - 1);
    return c->lr * (0.1f + 0.9f * 0.5f * (1.0f + cosf((float)M_PI * frac)));
}

static int optimizer_step(TrainState *s, const TrainStrategy *st) {
    const TrainConfig *c = s->cfg;
    LlamaModel *m = &s->model;
    int adam = strcmp(c->optimizer, "adamw") == 0;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        if (!p->trainable) continue;
        float wd = p->rows > 1 ? c->weight_decay : 0.0f;   /* no decay on norm weights */
        const ShardView v = shard_view(&s->dist, i);   /* --zero: this rank's slice, with its own m and v (shard.h) */
        const size_t lo = v.lo, n = v.n;
        if (n == 0) continue;
        /* a sharded master (llama.h: llama_master_sharded) is the slice itself */
        const int sliced = llama_master_sharded(m, p);
        float *w = sliced ? *llama_tensor(&m->wsh, p) : *llama_tensor(&m->w, p) + lo;
        const int done = st->update ? st->update(st->user, s, i, w, v.g, v.m, v.v, n, wd) : 0;   /* DP: noise + AdamW */
        if (done < 0) return -1;
        if (!done && adam) TRY(adamw_update(s->kb, w, v.g, v.m, v.v, n, s->lr, c->beta1, c->beta2, c->adam_eps, wd, s->step + 1));
        else if (!done) TRY(sgd_update(s->kb, w, v.g, n, s->lr, wd));
        /* its bf16 copy's slice rounded from it here (the forward rounds whole masters only), the same RNE */
        if (sliced && *llama_tensor(&m->w16, p)) TRY(narrow_buffer(s->kb, kact_at(*llama_tensor(&m->w16, p), lo, KDT_BF16), w, n));
        /* (--zero 3 keeps no whole copy: each gather rounds the slices afresh, shard.c) */
    }
    return 0;
}

static int next_batch(TrainState *s) {
    DPMEM_SCOPE("data");
    uint64_t t0 = dpmem_now_ns();
    int N = s->cfg->batch_size * s->cfg->seq_len;
    /* several ranks: each step's rows are the ranks' shares in rank order; this rank skips the others' */
    const long share = (long)s->cfg->batch_size * s->cfg->grad_accum;
    if (s->micro == 0) data_skip(&s->data, share * g_comm.rank, s->cfg->seq_len);
    data_next(&s->data, s->batch_host, s->batch_host + N, s->cfg->batch_size, s->cfg->seq_len);
    if (s->micro == s->cfg->grad_accum - 1) data_skip(&s->data, share * (g_comm.world - 1 - g_comm.rank), s->cfg->seq_len);
    TRY(kbuf_upload(s->kb, s->model.tokens, s->batch_host, (size_t)N * sizeof(int)));
    TRY(kbuf_upload(s->kb, s->model.targets, s->batch_host + N, (size_t)N * sizeof(int)));
    phase_add(s, PH_DATA, t0);
    return 0;
}

static void human_bytes(char *buf, size_t n, double bytes) {
    const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int i = 0;
    while (bytes >= 1024 && i < 4) { bytes /= 1024; i++; }
    snprintf(buf, n, "%.1f %s", bytes, u[i]);
}

/* MFU at the median step (samples/llama/mfu.h): printed and logged where a peak is known (the GPU's from the
   table, or --peak-tflops), a line saying why not on a GPU without one. */
static void print_mfu(const TrainState *s, double median_ms) {
    const TrainConfig *c = s->cfg;
    const char *dev = train_device_name ? train_device_name() : NULL;
    const char *gemm = train_device_gemm ? train_device_gemm(c) : NULL, *source = NULL;
    double peak = c->peak_tflops;
    if (peak > 0) source = "--peak-tflops";
    else if (dev && gemm) peak = mfu_peak_tflops(dev, gemm, &source);
    if (!(peak > 0) || !(median_ms > 0)) {
        if (dev) printf("MFU: no peak known for '%s' with %s GEMMs (samples/llama/mfu.h's table): give --peak-tflops X\n", dev, gemm ? gemm : "?");
        return;
    }
    const LlamaConfig *m = &c->model;
    const double per_token = mfu_flops_per_token(m, c->seq_len), tokens = (double)c->batch_size * c->seq_len * c->grad_accum;
    const double flops = per_token * tokens, mfu = flops / (median_ms * 1e-3) / (peak * 1e12);
    char what[160];
    if (dev) snprintf(what, sizeof what, "%s, %s GEMMs", dev, gemm ? gemm : "?");
    else snprintf(what, sizeof what, "%s", s->kb->ops->name);
    printf("MFU: %.1f %% at the median step: %.4g FLOP / %.2f ms / %.4g TFLOP/s (%s; peak: %s)\n", 100 * mfu, flops, median_ms,
           peak, what, source);
    printf("  FLOP per step = (6 N + 6 L NH HS T) x tokens = (6 x %.6g + 6 x %d x %d x %d x %d) x %.0f; N: the weights in GEMMs "
           "(blocks' linear layers and lm_head once; no embedding lookup, no norms); causal attention (samples/llama/mfu.h)\n",
           mfu_matmul_params(m), m->n_layers, m->n_heads, m->dim / m->n_heads, c->seq_len, tokens);
    char v[64];
    snprintf(v, sizeof v, "%.6g", mfu);
    dpmem_meta("mfu", v);
    snprintf(v, sizeof v, "%.6g", per_token);
    dpmem_meta("mfu.flops_per_token", v);
    snprintf(v, sizeof v, "%.6g", peak);
    dpmem_meta("mfu.peak_tflops", v);
    dpmem_meta("mfu.peak_source", source);
}

/* Several ranks: the median of the phase "allreduce" over the timed steps, as the table prints it, into the log
   (META timing.allreduce_ms: dpmem-report's ranks table shows this figure, not a scope's), by every rank. */
static void log_comm_median(double (*row)[TRAIN_PH_N + 1], int n_rows, int warmup) {
    const int timed = n_rows > warmup ? n_rows - warmup : 0;
    double *v = timed && g_comm.world > 1 ? malloc((size_t)timed * sizeof *v) : NULL;
    if (!v) return;
    for (int k = 0; k < timed; k++) v[k] = row[warmup + k][TRAIN_PH_ALLREDUCE] * 1e3;
    char ms[40];
    snprintf(ms, sizeof ms, "%.9g", timestats_of(v, (size_t)timed).median);
    dpmem_meta("timing.allreduce_ms", ms);
    free(v);
}

/* The closing lines: steps and throughput at the median step, the loss (first and last, said what they
   are), the per-phase table over the timed steps (median, min, quartiles, max), the MFU, the peak.
   row[k]: step k's seconds per phase, then its total (the first n_rows steps); warmup: steps left
   out; gpu: the rows are GPU times (TrainGpuTime), else the host's. */
static void print_summary(const TrainState *s, int steps, double secs, double (*row)[TRAIN_PH_N + 1], int n_rows, int warmup,
                          double first_loss, double last_loss, int gpu) {
    const TrainConfig *c = s->cfg;
    const double tokens_per_step = (double)c->batch_size * c->seq_len * c->grad_accum * g_comm.world;   /* the job's */
    char hb[32];
    const int timed = n_rows > warmup ? n_rows - warmup : 0;
    double *v = timed ? malloc((size_t)timed * sizeof *v) : NULL;
    TimeStats st = { 0 };
    if (v) {
        for (int k = 0; k < timed; k++) v[k] = row[warmup + k][TRAIN_PH_N] * 1e3;
        st = timestats_of(v, (size_t)timed);
    }
    char range[96];
    if (timed == 1) snprintf(range, sizeof range, "step %d; %d warm-up step%s left out", warmup + 1, warmup, warmup == 1 ? "" : "s");
    else snprintf(range, sizeof range, "steps %d..%d; %d warm-up step%s left out", warmup + 1, n_rows, warmup, warmup == 1 ? "" : "s");
    if (!kbackend_computes(s->kb)) {
        printf("done: planned %d steps (plan backend for %s: nothing computed, so no loss and no measured time)\n", steps, s->kb->target->name);
        plan_time_report(s, steps);
    }
    else if (v)
        printf("done: %d steps in %.2f s | median step %.2f ms%s (%s) | %.0f tokens/s at the median\n", steps, secs, st.median,
               gpu ? " of GPU time" : "", range, tokens_per_step / (st.median * 1e-3));
    else printf("done: %d steps in %.2f s | no step left to time after %d warm-up step%s (--timing-warmup)\n", steps, secs, warmup,
                warmup == 1 ? "" : "s");
    if (kbackend_computes(s->kb) && steps > 0)
        printf("loss: %.6f (step 1) -> %.6f (step %d): each the mean over that step's batch, before that step's update "
               "(every step's, at full precision: META train.loss in the log)\n", first_loss, last_loss, steps);
    if (v && kbackend_computes(s->kb) && !c->quiet) {   /* --quiet: the run's results, no tables */
        if (gpu) printf("GPU time per step (ms; CUDA events around each scope, dpmem_cuda.h) over %s (--timing-warmup); backward "
                        "without the per-sample norm work inside it (in clip):\n", range);
        else if (s->kb->space != DPMEM_HOST)
            printf("host time per step (ms; the GPU's is off, DPMEM_CUDA_TIMING=0: the host runs ahead of the GPU and waits where it "
                   "reads a result back) over %s (--timing-warmup); backward without the per-sample norm work inside it (in clip):\n", range);
        else printf("time per step (ms) over %s (--timing-warmup); backward without the per-sample norm work inside it (in clip):\n", range);
        printf("  %-16s %10s %10s %10s %10s %10s\n", "phase", "median", "min", "q1", "q3", "max");
        printf("  %-16s %10.3f %10.3f %10.3f %10.3f %10.3f\n", "step", st.median, st.min, st.q1, st.q3, st.max);
        for (int ph = 0; ph <= TRAIN_PH_N; ph++) {   /* ph == TRAIN_PH_N: the rest of the step */
            if (ph == TRAIN_PH_ALLREDUCE && g_comm.world <= 1) continue;
            for (int k = 0; k < timed; k++) {
                const double *r = row[warmup + k];
                double known = 0;
                for (int j = 0; j < TRAIN_PH_N; j++) known += r[j];
                v[k] = (ph < TRAIN_PH_N ? r[ph] : r[TRAIN_PH_N] - known) * 1e3;
            }
            TimeStats t = timestats_of(v, (size_t)timed);
            printf("  %-16s %10.3f %10.3f %10.3f %10.3f %10.3f%s\n", ph < TRAIN_PH_N ? PHASE_NAMES[ph] : "other", t.median, t.min, t.q1,
                   t.q3, t.max, ph < TRAIN_PH_N ? "" : gpu ? "  (GPU time in no phase: other work, idle gaps)"
                                                           : "  (the strategy's own work outside these phases, checks)");
        }
    }
    if (v && kbackend_computes(s->kb) && !c->quiet) print_mfu(s, st.median);
    free(v);
    size_t peak = dpmem_peak_bytes(NULL);
    human_bytes(hb, sizeof hb, (double)peak);
    if (g_comm.world > 1) printf("rank 0 of %d%s (each rank's memory is its own; every rank logs to its own file):\n",
                                 g_comm.world, g_comm.planned ? ", planned" : "");
    printf("peak tagged memory: %zu bytes (%s)%s\n", peak, hb, c->quiet ? "" : "; at the peak:");
    for (int i = 0; !c->quiet && i < dpmem_category_count(); i++) {
        const char *cat = dpmem_category_name(i);
        size_t at = dpmem_bytes_at_peak(cat);
        human_bytes(hb, sizeof hb, (double)at);
        printf("  %-18s %16zu  %10s\n", cat, at, hb);
    }
}

/* Why a trainer has no CUDA backend: the build's reason (mk/trainer.mk writes it into the trainers
   linked without it); absent in other programs. */
extern const char *const train_cuda_missing_why __attribute__((weak));
/* Set by samples/llama/train_cuda.c in programs linked with the CUDA backend (see train.h). */
int (*train_cuda_backend_init)(KBackend *b) = NULL;
int (*train_cuda_available)(void) = NULL;

void train_prefer_passive_omp(char **argv) {
    int set_omp = !getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "passive", 1) == 0;
    int set_blas = blas_core_prefer();
    if (!set_omp && !set_blas) return;
    execv("/proc/self/exe", argv);   /* returns only on failure: then go on as we are */
    if (set_blas) blas_core_unprefer();   /* not loaded with it: the header must not say it is */
}

/* 90% of MemAvailable from /proc/meminfo, else of physical memory, else 0 (no limit). */
static size_t available_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (size_t)(kb * 1024 / 10 * 9);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 10 * 9 : 0;
}

static int choose_backend(KBackend *kb, const TrainConfig *c) {
    const char *dev = c->device;
    if (!strcmp(dev, "auto")) dev = train_cuda_available && train_cuda_available() ? "cuda" : "cpu";
    if (!strcmp(dev, "cuda")) {
        if (!train_cuda_backend_init) {
            fprintf(stderr, "error: this binary was built without the CUDA backend: %s. Use --device cpu or --device plan "
                    "--plan-for cuda\n", &train_cuda_missing_why ? train_cuda_missing_why : "its link left it out");
            return -1;
        }
        if (train_cuda_backend_init(kb) != 0) { fprintf(stderr, "error: %s\n", kbackend_error(kb)); return -1; }
    } else if (!strcmp(dev, "plan") && !strcmp(c->plan_for, "cuda")) {
#ifdef TRAIN_HAVE_CUDA_PLAN
        if (kbackend_cuda_plan_init(kb) != 0) { fprintf(stderr, "error: %s\n", kbackend_error(kb)); return -1; }
#else
        fprintf(stderr, "error: this build has no CUDA plan target (kernels/cuda/scratch_cuda.c); use --plan-for cpu\n");
        return -1;
#endif
    } else if (!strcmp(dev, "plan")) {
        kbackend_plan_init(kb, &kops_cpu, c->threads);
    } else {
        kbackend_cpu_init(kb, c->threads);
    }
    kb->mem_limit = (size_t)c->mem_limit;
    /* On the CPU the limit defaults to 90% of the memory available now (MemAvailable; the rest for the
       kernel and the untagged heap): a config that cannot fit fails with a clear out-of-memory error
       instead of being killed by the OOM killer once its pages are touched. */
    if (kb->kind == KB_CPU && kb->mem_limit == 0) kb->mem_limit = available_memory();
    return 0;
}

/* Before anything is written: no output of the run (the log, --save's files) may be one of its
   inputs (--data, the --init-from checkpoint's files) or another output. Saving over the --init-from
   directory itself stays allowed: the checkpoint is read whole before --save replaces its files, each
   written aside and renamed into place. The weight files are those ckpt_check opened; log_file is
   the --log this process writes (this rank's, under MPI). */
static int check_paths(const TrainConfig *c, const CkptWeights *w, const char *log_file) {
    char save_files[4][4200], init_files[3][4200];
    IoPath init[3 + 64], io[8 + 3 + 64];
    int n_init = 0, n = 0;
    static const char *const init_names[3] = { "config.json", "model.safetensors.index.json", "tokenizer.json" };
    for (int i = 0; c->init_from && i < 3; i++) {
        snprintf(init_files[i], sizeof init_files[i], "%s/%s", c->init_from, init_names[i]);
        init[n_init++] = (IoPath){ init_files[i], "--init-from's", 0 };
    }
    for (int i = 0; w && i < w->n_files && i < 64; i++) init[n_init++] = (IoPath){ w->files[i].path, "--init-from's", 0 };
    const char *log = c->log_path ? log_file : getenv("DPMEM_LOG");   /* log_file: this rank's */
    IoPath log_path = { log && *log ? log : NULL, c->log_path ? "--log" : "DPMEM_LOG", 1 };
    int over_base = 0;
    if (c->save_dir && c->init_from) {
        char a[4096], b[4096];
        over_base = realpath(c->save_dir, a) && realpath(c->init_from, b) && strcmp(a, b) == 0;
    }
    io[n++] = (IoPath){ c->data_path, "--data", 0 };
    io[n++] = log_path;
    static const char *const save_names[4] = { "config.json", "model.safetensors", "adapter/adapter_model.safetensors",
                                               "adapter/adapter_config.json" };
    for (int i = 0; c->save_dir && i < 4; i++) {
        snprintf(save_files[i], sizeof save_files[i], "%s/%s", c->save_dir, save_names[i]);
        io[n++] = (IoPath){ save_files[i], "--save's", 1 };
    }
    for (int i = 0; !over_base && i < n_init; i++) io[n++] = init[i];
    char err[9000];
    int rc = io_check_outputs(io, n, err, sizeof err);
    if (rc == 0 && over_base) {   /* --save over the base: only the log must stay off the checkpoint */
        init[n_init++] = log_path;
        rc = io_check_outputs(init, n_init, err, sizeof err);
    }
    if (rc) fprintf(stderr, "error: %s\n", err);
    return rc;
}

static int error_code(const TrainState *s) {
    if (s->nonfinite) return 4;
    if (strncmp(s->kb->err, "out of memory", 13) == 0) return 3;
    return 1;
}

/* The process's exit code, after leaving the MPI job: a rank that failed ends every rank (they would
   otherwise wait for it in the next all-reduce), a rank that succeeded finalizes. */
static int train_end(int rc) {
    if (g_comm.mpi && g_comm.world > 1 && rc != 0) {
        fprintf(stderr, "error: rank %d of %d failed (exit %d): ending the job\n", g_comm.rank, g_comm.world, rc);
        comm_abort(&g_comm, rc);
    }
    comm_finalize(&g_comm);
    return rc;
}

/* One optimizer step (scope "step", train.h): the physical batches, the reduction over the ranks (s->loss
   becomes the job's), the strategy's before_update, the update (and --zero's gathers), zero_grad. 0, or -1. */
static int run_step(TrainState *s, const TrainStrategy *st) {
    const TrainConfig *c = s->cfg;
    DPMEM_SCOPE("step");
    s->lr = lr_at(c, s->step);
    s->loss_sum = 0; s->loss_n = 0;
    for (s->micro = 0; s->micro < c->grad_accum; s->micro++) {
        s->dist.micro = s->micro;
        TRY(next_batch(s));
        if (st->physical_batch) TRY(st->physical_batch(st->user, s));
        else if (train_forward(s) != 0 || train_backward(s, NULL) != 0) return -1;
    }
    if (s->loss_n) s->loss = s->loss_sum / (double)s->loss_n;   /* the step's loss: the mean over its rows */
    TRY(grad_reduce_step(&s->dist, &s->loss, s->loss_n));   /* (several ranks: s->loss becomes the job's mean) */
    if (kbackend_computes(s->kb)) {
        char rec[64];
        snprintf(rec, sizeof rec, "%d %.17g", s->step + 1, s->loss);
        dpmem_meta("train.loss", rec);
    }
    if (st->before_update) TRY(st->before_update(st->user, s));
    uint64_t tp = dpmem_now_ns();
    { DPMEM_SCOPE("optimizer_step"); TRY(optimizer_step(s, st)); }
    phase_add(s, PH_OPTIMIZER, tp);
    TRY(shard_allgather_params(&s->dist));   /* --zero: every rank's updated slices to every rank */
    TRY(train_check_finite(s, 0, "optimizer_step"));
    tp = dpmem_now_ns();
    { DPMEM_SCOPE("zero_grad"); TRY(llama_zero_grad(&s->model)); TRY(grad_reduce_zero(&s->dist)); }
    phase_add(s, PH_ZERO_GRAD, tp);
    return 0;
}

/* The run's META header (after config_log): the memory limit, the ranks, the method, the backend, the BLAS core. */
static void log_header(const TrainConfig *c, const TrainStrategy *st, const KBackend *kb, const char *blas_from) {
    dpmem_meta_int("config.mem_limit", (long long)kb->mem_limit);   /* in force: the flag's, or the default's */
    dpmem_meta("config.mem_limit_from", c->mem_limit ? "--mem-limit" : kb->mem_limit ? "90% of MemAvailable" : "none");
    dpmem_meta_int("comm.rank", g_comm.rank);
    dpmem_meta_int("comm.world_size", g_comm.world);
    dpmem_meta("comm.backend", g_comm.planned ? "planned" : g_comm.world > 1 && kb->space != 0 ? "nccl" : g_comm.backend);
    dpmem_meta("config.method", st->name);
    dpmem_meta("config.backend", kb->kind == KB_PLAN ? "plan" : kb->ops->name);
    dpmem_meta_int("config.threads", kb->nthreads);
    dpmem_meta("blas.core", blas_core_name());
    dpmem_meta("blas.core_from", blas_from);
}

/* --save (scope "checkpoint_save"): every rank holds the same model, but for sharded masters (shard.h): every
   rank sends its slices, tensor by tensor, rank 0 writes. 0, or -1 after a line on stderr. */
static int save_model(TrainState *s, const TrainStrategy *st) {
    const TrainConfig *c = s->cfg;
    const int gathered = shard_masters(&s->dist);
    if (!c->save_dir || (g_comm.rank != 0 && !gathered)) return 0;
    char err[CKPT_ERR];
    SafeTensorsDtype dt = !strcmp(c->save_dtype, "bf16") ? ST_BF16 : !strcmp(c->save_dtype, "f16") ? ST_F16 : ST_F32;
    if ((gathered ? shard_save(&s->dist, c->save_dir, dt, c->init_from, err, sizeof err)
                  : ckpt_save(&s->model, c->save_dir, dt, c->init_from, err, sizeof err)) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    if (g_comm.rank == 0 && !c->quiet && kbackend_computes(s->kb))
        printf("saved: %s/config.json, %s/model.safetensors (%s)\n", c->save_dir, c->save_dir, c->save_dtype);
    if (g_comm.rank == 0 && st->save && st->save(st->user, s, c->save_dir) != 0) return -1;
    return 0;
}

/* A hash of the --init-from checkpoint's weights, as 16 hex digits: every tensor's name, dtype, shape and bytes, by
   name (not the files' layout or metadata), read from the mapping ckpt_check opened. Four lanes of
   multiply-xor over 8-byte words keep it at memory speed (16 GB: seconds). */
static void weights_hash(const CkptWeights *w, char hex[24]) {
    uint64_t lane[4] = { 1469598103934665603ull, 2, 3, 4 };
    const uint64_t P = 1099511628211ull;
    for (size_t e = 0; e < w->n_index; e++) {
        const SafeTensor *t = w->index[e].tensor;
        for (const char *c = t->name; *c; c++) lane[0] = (lane[0] ^ (unsigned char)*c) * P;
        lane[1] = (lane[1] ^ (uint64_t)t->dtype) * P;
        for (int k = 0; k < t->ndim; k++) lane[2] = (lane[2] ^ (uint64_t)t->shape[k]) * P;
        const unsigned char *b = t->data;
        size_t i = 0;
        for (; i + 32 <= t->nbytes; i += 32)
            for (int k = 0; k < 4; k++) {
                uint64_t x;
                memcpy(&x, b + i + 8 * k, 8);
                lane[k] = (lane[k] ^ x) * P;
            }
        for (; i < t->nbytes; i++) lane[3] = (lane[3] ^ b[i]) * P;
    }
    snprintf(hex, 24, "%016llx", (unsigned long long)(lane[0] ^ (lane[1] * 3) ^ (lane[2] * 5) ^ (lane[3] * 7)));
}

/* --print-params: the model's parameter table (the strategy's frozen ones marked), nothing trained. 0, or 1. */
static int print_params(const TrainConfig *c, const TrainStrategy *st) {
    LlamaModel m;
    if (llama_describe(&m, &c->model, c->batch_size, c->seq_len) != 0) return 1;
    for (int i = 0; st->frozen && i < m.n_params; i++) m.params[i].trainable = !st->frozen(st->user, &m.params[i]);
    llama_print_params(&m, stdout);
    llama_free(&m);
    return 0;
}

/* The resolved configuration of this rank against the others' (comm_check_fields): 0 when they agree. Beside the
   settings, every option that makes a collective (--save where every rank gathers the model: shard.h) and the
   starting weights (init_hash: --init-from's; a rank spliced from two checkpoints would train a model of neither). */
static int ranks_agree(const TrainConfig *c, const TrainStrategy *st, const TrainState *s, const KBackend *kb, const char *init_hash) {
    ConfigFields *f = calloc(1, sizeof *f);
    if (!f) { fprintf(stderr, "error: out of host memory (the configuration check)\n"); return -1; }
    config_fields(c, f);
    config_field(f, "the method", "%s", st->name);
    config_field(f, "the backend", "%s", kb->kind == KB_PLAN ? "plan" : kb->ops->name);
    config_field(f, "the model's parameters (bytes)", "%zu", s->model.bytes_params);
    config_field(f, "DPMEM_COMM_BUCKET_MB", "%zu MiB", s->dist.set.bucket_floats * sizeof(float) >> 20);
    config_field(f, "DPMEM_COMM_OVERLAP", "%d", s->dist.set.overlap);
    config_field(f, "DPMEM_ZERO3_PREFETCH", "%d", s->dist.set.zero3_prefetch);
    config_field(f, "--save", "%s", !shard_masters(&s->dist) ? "-" : c->save_dir ? "given (here every rank gathers the model)"
                                                                                 : "not given (here every rank gathers the model)");
    config_field(f, "--init-from's weights (hash)", "%s", init_hash);
    if (st->fields) st->fields(st->user, s, f);
    const char *names[CONFIG_FIELDS_MAX], *values[CONFIG_FIELDS_MAX];
    for (int i = 0; i < f->n; i++) { names[i] = f->name[i]; values[i] = f->value[i]; }
    int rc = comm_check_fields(&g_comm, names, values, f->n);
    free(f);
    return rc;
}

int train_run(const TrainConfig *cfg, const TrainStrategy *strategy) {
    static const TrainStrategy vanilla = { .name = "vanilla" };
    const TrainStrategy *st = strategy ? strategy : &vanilla;
    const TrainConfig *c = cfg;
    if (g_comm.world > 1 && !g_comm.planned) {   /* --print-params on some ranks: the others would wait for them */
        const char *name = "--print-params", *value = c->print_params ? "1" : "0";
        if (comm_check_fields(&g_comm, &name, &value, 1)) return train_end(1);
    }
    if (c->print_params) return train_end(print_params(c, st));
    /* Before anything is written or allocated: the checkpoint against the model (a config.json that
       lies about its shapes fails now, not after the model's gigabytes), and the outputs against the
       inputs. */
    CkptWeights w;
    memset(&w, 0, sizeof w);
    char init_hash[24] = "-";
    if (c->init_from && ckpt_has_weights(c->init_from)) {   /* (a plan may come from config.json alone) */
        char err[CKPT_ERR];
        if (ckpt_check(&c->model, c->init_from, &w, err, sizeof err) != 0) { fprintf(stderr, "error: %s\n", err); return train_end(1); }
        if (g_comm.world > 1 && !g_comm.planned) weights_hash(&w, init_hash);
    }
    char rank_log[4096];
    const char *log_path = c->log_path;
    if (log_path && g_comm.world > 1 && !g_comm.planned) {   /* run.log -> run.rank3.log */
        comm_rank_path(rank_log, sizeof rank_log, log_path, g_comm.rank);
        log_path = rank_log;
    }
    int paths_bad = check_paths(c, c->init_from ? &w : NULL, log_path);
    ckpt_weights_close(&w);
    if (paths_bad) return train_end(1);
    /* The log first: the backend's own buffers (the cuBLAS workspace) belong in it too. */
    if (log_path && dpmem_open(log_path) != 0) return train_end(1);
    KBackend kb;
    if (choose_backend(&kb, c) != 0) { dpmem_close(); return train_end(1); }
    plan_time_begin(&kb);   /* a plan: each op's cost too (plan_time.h) */
    kb.trace = st->trace; kb.trace_user = st->trace_user;
    const size_t backend_own = kb.live;   /* what the backend allocated for itself (cuBLAS workspace) */
    config_log(c);
    char blas_from[160];
    blas_core_source(blas_from, sizeof blas_from);
    log_header(c, st, &kb, blas_from);

    TrainState s;
    memset(&s, 0, sizeof s);
    s.cfg = c; s.kb = &kb;
    dist_init(&s.dist, &kb, &s.model, c->zero, c->grad_accum, &s.phase_s[TRAIN_PH_ALLREDUCE]);
    s.calls_update = st->update != NULL;   /* (before init: a strategy fuses its work into the update only when asked) */
    /* the mean over the job's batch: each rank's share, summed over the ranks by the all-reduce */
    const float positions = c->model.task == LLAMA_TASK_CLASSIFY ? 1.0f : (float)c->seq_len;   /* llama_loss_positions */
    s.loss_scale = 1.0f / ((float)c->batch_size * positions * (float)c->grad_accum * (float)g_comm.world);
    int rc = 1, strategy_ready = 0, steps_done = 0, gpu_time = 0;
    TrainGpuTime gt;
    memset(&gt, 0, sizeof gt);
    TrainEval ev = { 0 };   /* --eval-data (eval.h) */
    double first_loss = 0.0, last_loss = 0.0, secs = 0.0;
    /* timing: the first steps are warm-up (never all of them: one step is timed as it is) */
    const int warmup = c->steps > 0 ? (c->timing_warmup < c->steps ? c->timing_warmup : c->steps - 1) : 0;
    const int n_rows = c->steps < TRAIN_MAX_TIMED_STEPS ? c->steps : TRAIN_MAX_TIMED_STEPS;
    double (*row)[TRAIN_PH_N + 1] = n_rows > 0 ? calloc((size_t)n_rows, sizeof *row) : NULL;
    if (n_rows > 0 && !row) { fprintf(stderr, "error: out of host memory for the step times\n"); goto out; }
    dpmem_meta_int("timing.warmup_steps", warmup);
    /* On a GPU the table's times are the GPU's (train.h: TrainGpuTime), when the kit times scopes there */
    if (train_gpu_timer_start && kbackend_computes(&kb) && n_rows > 0) {
        if (train_gpu_time_init(&gt, n_rows, PHASE_NAMES) != 0) goto out;
        gpu_time = train_gpu_timer_start(&gt) == 0;
        if (!gpu_time) train_gpu_time_free(&gt);
    }
    if (kbackend_computes(&kb)) dpmem_meta("timing.source", gpu_time ? "gpu" : "host");
    const size_t N = (size_t)c->batch_size * c->seq_len;
    {
        DPMEM_SCOPE("data");
        if (data_open_task(&s.data, c->data_path, c->model.vocab_size, c->seq_len, (uint64_t)c->seed,
                           c->model.task == LLAMA_TASK_CLASSIFY ? c->model.num_labels : 0, c->model.pad_id) != 0) goto out;
        s.batch_host = malloc(2 * N * sizeof(int));
        if (!s.batch_host) { fprintf(stderr, "error: out of host memory for the batch\n"); goto out; }
        DPMEM_TAG_ALLOC(s.batch_host, 2 * N * sizeof(int), "input/batch_host");
        if (train_eval_open(&ev, &s, strategy != NULL) != 0) goto out;
    }
    if (c->init_from && kbackend_computes(&kb) && !ckpt_has_weights(c->init_from)) {
        /* before building: a 1B model's buffers are tens of GB to allocate and zero for nothing */
        fprintf(stderr, "error: %s: neither model.safetensors nor model.safetensors.index.json is there "
                "(only --device plan works from config.json alone)\n", c->init_from);
        goto out;
    }
    {
        DPMEM_SCOPE("model_creation");
        /* (--zero: the model gets no optimizer state; shard_init gives each rank its slices'; under bf16
           each rank's slices of the GEMM weights' fp32 masters, shard.h; --zero 2: no gradient buffers
           either, grad_reduce.c allocates each unit's for its backward) */
        LlamaConfig mc = c->model;
        mc.grads_by_unit = c->zero >= 2;
        mc.params_by_unit = c->zero >= 3;
        if (llama_build_sharded(&s.model, &kb, &mc, c->batch_size, c->seq_len, c->zero ? "sgd" : c->optimizer,
                                (unsigned long long)c->seed, st->frozen, st->user, c->zero ? g_comm.world : 0, g_comm.rank) != 0 ||
            shard_init(&s.dist, !strcmp(c->optimizer, "adamw")) != 0) goto fail;
        if (st->init && st->init(st->user, &s) != 0) goto fail;
        strategy_ready = 1;
        /* every rank must run the same configuration before the first step: shapes, precision,
           checkpointing, optimizer, seeds, the strategy's DP settings (a rank with other flags would
           sum gradients of another network; --heads 8 against 4 has the same size) */
        if (g_comm.world > 1 && ranks_agree(c, st, &s, &kb, init_hash)) { rc = 1; goto out; }
        if (dist_bucket_prepare(&s.dist) != 0 || grad_reduce_init(&s.dist) != 0) goto fail;
    }
    dpmem_snapshot("after_model_creation");
    if (c->init_from) { /* its own phase, scope "checkpoint_load" */
        char err[CKPT_ERR];
        if (ckpt_load_allowing(&s.model, c->init_from, c->allow_nonfinite, err, sizeof err) != 0) { fprintf(stderr, "error: %s\n", err); goto out; }
        if (!kbackend_computes(&kb) && !ckpt_has_weights(c->init_from)) {
            /* the checkpoint's files would be mapped (file-backed pages, tagged checkpoint/mmap:...) */
            if (!c->quiet)
                printf("note: planned from %s/config.json alone (no weights there, none read): the plan leaves out the "
                       "mapped checkpoint files (%.2f GiB at bf16)\n", c->init_from, (double)s.model.bytes_params / 2 / (1 << 30));
            dpmem_meta_int("config.init_from_config_only", 1);
        }
    }
    char blas[224] = "";   /* the CPU backend's GEMM kernels: which OpenBLAS core, and who chose it */
    if (kb.kind == KB_CPU) snprintf(blas, sizeof blas, " (OpenBLAS core %s, %s)", blas_core_name(), blas_from);
    if (!c->quiet)
        printf("%s: %s model (V=%d C=%d L=%d NH=%d NKV=%d F=%d), %zu parameters, B=%d T=%d x%d, %s, %s backend%s%s%s, data: %s\n",
               c->run_name, c->model.preset, c->model.vocab_size, c->model.dim, c->model.n_layers, c->model.n_heads,
               c->model.n_kv_heads, c->model.ffn_dim, s.model.bytes_params / 4, c->batch_size, c->seq_len, c->grad_accum,
               c->optimizer, kb.kind == KB_PLAN ? "plan" : kb.ops->name, kb.kind == KB_PLAN ? " for " : "",
               kb.kind == KB_PLAN ? kb.target->name : "", blas, s.data.desc);
    uint64_t t0 = dpmem_now_ns(), last_print = t0;
    for (s.step = 0; s.step < c->steps; s.step++) {
        uint64_t t_step = dpmem_now_ns();
        double ph0[TRAIN_PH_N];
        memcpy(ph0, s.phase_s, sizeof ph0);
        if (run_step(&s, st) != 0) goto fail;
        if (s.step == 0) first_loss = s.loss;
        last_loss = s.loss;
        if (s.step < n_rows) {
            for (int ph = 0; ph < TRAIN_PH_N; ph++) row[s.step][ph] = s.phase_s[ph] - ph0[ph];
            row[s.step][TRAIN_PH_N] = (double)(dpmem_now_ns() - t_step) * 1e-9;
        }
        if (s.step == 0) dpmem_snapshot("after_step_1");
        steps_done = s.step + 1;
        if (train_eval_after_step(&ev, &s, steps_done) != 0) goto fail;
        uint64_t now = dpmem_now_ns();
        if (!c->quiet && now - last_print > 2000000000ull && steps_done < c->steps) {
            double el = (double)(now - t0) * 1e-9;
            printf("step %d/%d | loss %.4f | lr %.2e | %.2f steps/s | %.0f tokens/s\n", steps_done, c->steps, s.loss,
                   s.lr, steps_done / el, (double)steps_done * N * c->grad_accum / el);
            fflush(stdout);
            last_print = now;
        }
    }
    if (gpu_time) train_gpu_timer_flush();   /* the GPU's last work done, every scope's time delivered */
    secs = (double)(dpmem_now_ns() - t0) * 1e-9;
    dpmem_snapshot("end");
    /* (sharded masters: the hash of the gathered model, shard.h) */
    if (shard_check_ranks_agree(&s.dist, c->quiet) != 0) goto fail;
    {
        const int shown = steps_done < n_rows ? steps_done : n_rows;
        const int use_gpu = gpu_time && gt.n >= shown;   /* (a step without its GPU time: the host's table) */
        if (gpu_time && !use_gpu)
            fprintf(stderr, "note: GPU times of %d of %d steps came back: the table shows host times\n", gt.n, shown);
        if (kbackend_computes(&kb)) log_comm_median(use_gpu ? gt.rows : row, shown, warmup);
        if (c->quiet < 2) print_summary(&s, steps_done, secs, use_gpu ? gt.rows : row, shown, warmup, first_loss, last_loss, use_gpu);
    }
    if (save_model(&s, st) != 0) goto out;
    rc = 0;
    goto out;
fail:
    if (s.nonfinite) {}   /* already said, naming the tensor */
    else if (kb.err[0]) fprintf(stderr, "error: %s\n", kb.err);
    else fprintf(stderr, "error: the %s strategy failed at step %d\n", st->name, s.step + 1);
    rc = error_code(&s);
out:
    if (gpu_time) {   /* before gt goes: nothing may reach it afterwards */
        train_gpu_timer_flush();
        train_gpu_timer_start(NULL);
        train_gpu_time_free(&gt);
    }
    if (strategy_ready && st->destroy) st->destroy(st->user, &s);
    grad_reduce_free(&s.dist);
    dist_bucket_free(&s.dist);
    shard_free(&s.dist);
    llama_free(&s.model);
    if (rc == 0 && kb.live != backend_own) {
        fprintf(stderr, "error: %zu bytes still allocated on the backend at exit (a leak in the trainer)\n", kb.live - backend_own);
        rc = 1;
    }
    plan_time_end(&kb);
    kbackend_destroy(&kb);
    if (s.batch_host) { DPMEM_TAG_FREE(s.batch_host); free(s.batch_host); }
    free(row);
    data_close(&s.data);
    train_eval_close(&ev);
    if (log_path) dpmem_close();
    return train_end(rc);
}
