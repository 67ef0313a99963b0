/* dp_report.c — what the DP-SGD strategy prints and logs (dp_sgd_impl.h): the banner and META dp.* of
   its settings, each layer's method and norm IO, the per-sample statistics (--log-sample-norms), ε
   by the run's sampling, and the summary. The figures printed are logged too (META dp.*); --quiet silences
   the banner and per-layer lines (ε stays: what the run is for), DpConfig.quiet_dp (the benchmarks')
   all of it; the printing only. */
#include "dp_sgd_impl.h"
#include "llama/comm.h"
#include "dpmem.h"

#include <math.h>
#include <stdio.h>

long dp_sgd_row_uses(const DpSgd *d, long steps) {
    const long double used = (long double)steps * d->logical_batch;   /* rows read in order, around again */
    return (long)ceill(used / d->dataset_size);
}

AccountantAdjacency dp_sgd_adjacency(const DpSgd *d) {
    return d->cfg.poisson ? ACCOUNTANT_ADD_REMOVE : d->cfg.replace_one ? ACCOUNTANT_REPLACE_ONE : ACCOUNTANT_ZERO_OUT;
}

double dp_sgd_epsilon_under(const DpSgd *d, int replace_one, double *alpha) {
    if (d->steps_done == 0) { if (alpha) *alpha = 0; return 0; }
    return accountant_epsilon_for(d->sigma_acc[replace_one != 0], 1.0, dp_sgd_row_uses(d, d->steps_done), d->cfg.delta, alpha);
}

double dp_sgd_epsilon(const DpSgd *d, double *alpha) {
    if (d->steps_done == 0) { if (alpha) *alpha = 0; return 0; }
    if (d->cfg.poisson) return accountant_epsilon(&d->acc, d->cfg.delta, alpha);   /* the steps at sigma_acc[0] */
    return dp_sgd_epsilon_under(d, d->cfg.replace_one, alpha);
}

double dp_sgd_epsilon_if_poisson(const DpSgd *d, double *alpha) {
    if (d->steps_done == 0) { if (alpha) *alpha = 0; return 0; }
    return accountant_epsilon(&d->acc, d->cfg.delta, alpha);
}

/* The σ, q and sampling the run resolved, and the settings that decide its bits (the seed: only
   whether it was given). */
void dp_report_setup(DpSgd *d, TrainState *s) {
    const int B = s->model.B;
    const long rows = d->dataset_size;
    if (!dp_quiet(d, s)) {
        if (g_comm.world > 1)
            printf("DP-SGD: %d ranks, each with %d of the logical batch's %d samples (%s); the clipped sums are added "
                   "across ranks before the noise, %s\n", g_comm.world, d->logical_batch / g_comm.world, d->logical_batch,
                   d->cfg.poisson ? "Poisson: rank r draws the rows i with i mod N = r" : "rank r: its consecutive share of each step's rows",
                   s->cfg->zero ? "which the rank holding each coordinate's slice adds once (--zero)"
                                : "which every rank adds alike (one Philox stream)");
        char from[96] = "";
        if (d->cfg.target_epsilon > 0)
            snprintf(from, sizeof from, " (from --target-epsilon under %s adjacency)", accountant_adjacency_name(dp_sgd_adjacency(d)));
        printf("DP-SGD: %s norms, %s clipping, C=%g, sigma=%.6g%s, delta=%g, logical batch %d (physical %d x %d), "
               "sample rate %.6g (%ld rows)%s\n",
               dp_norm_name(d->cfg.norm), d->cfg.norm == DP_NORM_DIRECT && d->cfg.clip == DP_CLIP_BK ? "per-sample-sum" : dp_clip_name(d->cfg.clip),
               d->cfg.max_grad_norm, d->sigma, from,
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
        printf("DP-SGD: noise: %s\n", d->cfg.secure_noise ? "ChaCha20 (256-bit key) on a grid of 2^-28 sigma*C (--secure-noise)"
                                                         : "Philox4x32-10 (a statistical generator; --secure-noise: ChaCha20 on a grid)");
        printf("DP-SGD: not covered by epsilon (computed on the private data without noise): the training loss, the "
               "per-sample norms' mean and share clipped, the count of samples dropped%s, the step times (docs/DP_METHODS.md, "
               "Timing)\n", d->cfg.log_sample_norms ? ", the logged per-sample norms" : "");
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
    dpmem_meta("dp.noise", d->cfg.secure_noise ? "chacha20-grid" : "philox");
    dpmem_meta("dp.update", d->fused ? "fused" : "separate");   /* noise inside AdamW's pass, or a pass of its own (dp_fused.c) */
    dpmem_meta_int("dp.shortcut_batch1", d->shortcut);
    dpmem_meta_int("dp.tied_embeddings", d->tied);
}

void dp_report_choice(DpSgd *d) {
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
        if (d->cfg.norm == DP_NORM_MIXED && p->kind == HOOK_LINEAR && d->s->cfg->verbose && !dp_quiet(d, d->s)) {
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
    if (n_kept && d->cfg.norm != DP_NORM_MIXED && !dp_quiet(d, d->s))
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
        if ((d->cfg.norm == DP_NORM_MIXED || p->kept) && d->s->cfg->verbose && !dp_quiet(d, d->s))
            printf("DP-SGD %s: %-27s.lora_%c %5dx%-5d T=%d: %s\n", dp_norm_name(d->cfg.norm), d->lora[k / 2].name, k % 2 ? 'B' : 'A',
                   p->d_out, p->d_in, p->T, p->kept ? "direct, from the kept per-sample gradients" : p->used == DP_NORM_FLASH ? "flash" : "direct");
    }
    /* one line for all layers unless --verbose (a 3b LoRA plan printed 112 before its answer) */
    if (!d->s->cfg->verbose && !dp_quiet(d, d->s)) {
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

int dp_collect_stats(DpSgd *d, int B) {
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

/* ε by the run's sampling (dp_sgd_epsilon), the statistics, the Poisson counts. */
void dp_report_summary(DpSgd *d, const TrainState *s) {
    if (d->steps_done > 0) {
        double alpha;
        double eps = dp_sgd_epsilon(d, &alpha);
        char buf[64];
        const long uses = dp_sgd_row_uses(d, d->steps_done);
        double alpha_p, eps_p = d->cfg.poisson ? eps : dp_sgd_epsilon_if_poisson(d, &alpha_p);
        /* runs in order: the other adjacency's figure, printed and logged beside the headline */
        const AccountantAdjacency adj = dp_sgd_adjacency(d),
                                  other = d->cfg.replace_one ? ACCOUNTANT_ZERO_OUT : ACCOUNTANT_REPLACE_ONE;
        const double eps_other = d->cfg.poisson ? 0 : dp_sgd_epsilon_under(d, !d->cfg.replace_one, NULL);
        snprintf(buf, sizeof buf, "%.9g", eps); dpmem_meta("dp.epsilon", buf);
        dpmem_meta("dp.adjacency", accountant_adjacency_name(adj));
        snprintf(buf, sizeof buf, "%.9g", alpha); dpmem_meta("dp.best_alpha", buf);
        dpmem_meta("dp.epsilon_sampling", d->cfg.poisson ? "poisson" : "sequential");
        dpmem_meta_int("dp.dropped_samples", d->dropped_samples);   /* this rank's */
        if (!d->cfg.poisson) {
            dpmem_meta_int("dp.row_uses", uses);
            snprintf(buf, sizeof buf, "%.9g", d->cfg.replace_one ? eps_other : eps); dpmem_meta("dp.epsilon_zero_out", buf);
            snprintf(buf, sizeof buf, "%.9g", d->cfg.replace_one ? eps : eps_other); dpmem_meta("dp.epsilon_replace_one", buf);
            snprintf(buf, sizeof buf, "%.9g", eps_p); dpmem_meta("dp.epsilon_if_poisson", buf);
        }
        dpmem_meta_int("dp.steps", d->steps_done);
        if (!dp_quiet_result(d, s)) {
            printf("DP-SGD: epsilon = %.4f at delta = %g after %ld steps under %s adjacency (%s)", eps, d->cfg.delta, d->steps_done,
                   accountant_adjacency_name(adj), accountant_adjacency_words(adj));
            if (d->cfg.poisson)
                printf(" (Poisson sampling; sigma %.4g, sample rate %.4g, RDP order %g)", d->sigma, d->sample_rate, alpha);
            else
                printf("; %s adjacency (%s): epsilon %.4f (batches in order: each row in at most %ld of them, no sampling "
                       "amplification; sigma %.4g, RDP order %g; add/remove under Poisson sampling, with --poisson, sample rate %.4g: %.4f)",
                       accountant_adjacency_name(other), accountant_adjacency_words(other), eps_other, uses, d->sigma, alpha,
                       d->sample_rate, eps_p);
            printf("; noise %s", d->cfg.secure_noise ? "ChaCha20 on a grid (--secure-noise)" : "Philox (statistical; --secure-noise: ChaCha20)");
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
        if (d->truncated && !dp_quiet_result(d, s))
            printf("DP-SGD: Poisson sampling drew more rows than a step holds %ld times (dropped)\n", d->truncated);
    }
}
