/* dp_config.c — parsing and checking the DP-SGD flags (see dp_config.h). Every value is parsed
   strictly: trailing garbage, out-of-range numbers and unknown method names are one-line errors. */
#include "dp_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *NORMS[] = { "direct", "ghost", "flash", "mixed" };
static const char *CLIPS[] = { "twopass", "bk" };
static const char *TARGETS[] = { "q", "k", "v", "o", "gate", "up", "down" };

const char *dp_norm_name(DpNorm n) { return (unsigned)n < 4 ? NORMS[n] : "?"; }
const char *dp_clip_name(DpClip c) { return (unsigned)c < 2 ? CLIPS[c] : "?"; }

void dp_config_defaults(DpConfig *c, DpNorm norm, DpClip clip) {
    memset(c, 0, sizeof *c);
    c->enabled = 1;
    c->norm = norm; c->clip = clip;
    c->max_grad_norm = 1.0; c->noise_multiplier = 1.0; c->delta = 1e-5;
    c->flash_tile = 128;
    c->lora_targets = LORA_Q | LORA_V;
}

const char DP_CONFIG_USAGE[] =
    "DP-SGD:\n"
    "  --norm direct|ghost|flash|mixed   per-sample gradient norms\n"
    "  --clip twopass|bk                 clipped gradient: second backward, or book-keeping\n"
    "  --max-grad-norm C                 clipping norm (1.0)\n"
    "  --noise-multiplier S              noise std / C (1.0)\n"
    "  --target-epsilon E                choose sigma so that the run ends at epsilon E\n"
    "  --delta D                         delta (1e-5)\n"
    "  --max-physical-batch-size P       physical batch (logical batch: --batch-size)\n"
    "  --poisson                         Poisson sampling at rate batch / dataset size\n"
    "  --dataset-size N                  rows for the sample rate (default: the data's rows, each T+1 tokens\n"
    "                                    starting every T tokens, as every trainer reads them; synthetic 65536)\n"
    "  --log-sample-norms N              log each step's per-sample norms and clip factors, its first N\n"
    "                                    samples (0: off, at most 4096; META dp.sample_norms; dpmem-report\n"
    "                                    draws their histogram)\n"
    "  --noise-seed N                    noise and Poisson seed, reproducible: the epsilon printed holds only while\n"
    "                                    N is secret (default: 64 bits from getrandom(), never printed or logged;\n"
    "                                    --secure-seed says so explicitly)\n"
    "  --secure-noise                    the noise and Poisson's draws from ChaCha20 (256-bit key from getrandom()),\n"
    "                                    the gradient and the noise on one grid of 2^-28 sigma*C (no floating-point\n"
    "                                    attack); default: Philox (statistical, 64-bit key)\n"
    "  --adjacency zero-out|replace-one  the adjacency of the epsilon printed first and of --target-epsilon, batches in\n"
    "                                    order: zero-out (a row replaced by one that adds nothing, sensitivity C; the\n"
    "                                    default) or replace-one (a row's contents changed, 2C); both are printed.\n"
    "                                    --poisson: add/remove (Opacus's), replace-one is refused\n"
    "  --flash-tile R                    time block of flash norms (128)\n"
    "  --lora-rank r --lora-alpha a      LoRA adapters (rank 0: off; alpha default 2r)\n"
    "  --lora-targets q,k,v,o,gate,up,down  projections with adapters (q,v)\n";

static int num(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end; errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "error: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int whole(const char *flag, const char *s, double lo, double hi, double *out) {
    if (num(flag, s, lo, hi, out)) return -1;
    if (*out != floor(*out)) { fprintf(stderr, "error: %s expects a whole number, got '%s'\n", flag, s); return -1; }
    return 0;
}

static int pick(const char *flag, const char *s, const char **names, int n) {
    for (int k = 0; k < n; k++) if (!strcmp(s, names[k])) return k;
    fprintf(stderr, "error: %s: unknown value '%s' (one of", flag, s);
    for (int k = 0; k < n; k++) fprintf(stderr, " %s", names[k]);
    fprintf(stderr, ")\n");
    return -1;
}

static int targets(const char *s, unsigned *out) {
    unsigned t = 0;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        int k;
        for (k = 0; k < 7; k++) if (strlen(TARGETS[k]) == len && !strncmp(p, TARGETS[k], len)) break;
        if (k == 7 || len == 0) {
            fprintf(stderr, "error: --lora-targets: unknown projection '%.*s' (use q,k,v,o,gate,up,down)\n", (int)len, p);
            return -1;
        }
        t |= 1u << k;
        p += len;
        if (*p == ',') { p++; if (!*p) { fprintf(stderr, "error: --lora-targets: trailing comma in '%s'\n", s); return -1; } }
    }
    if (!t) { fprintf(stderr, "error: --lora-targets: empty list\n"); return -1; }
    *out = t;
    return 0;
}

const char *dp_lora_targets_string(unsigned t, char *buf, int n) {
    int len = 0;
    buf[0] = 0;
    for (int k = 0; k < 7; k++)
        if (t & (1u << k)) len += snprintf(buf + len, len < n ? (size_t)(n - len) : 0, "%s%s", len ? "," : "", TARGETS[k]);
    return buf;
}

int dp_config_flag(DpConfig *c, int argc, char **argv, int *i) {
    const char *f = argv[*i];
    if (!strcmp(f, "--poisson")) { c->poisson = 1; return 1; }
    if (!strcmp(f, "--secure-seed")) { c->secure_seed = 1; return 1; }
    if (!strcmp(f, "--secure-noise")) { c->secure_noise = 1; return 1; }
    static const char *valued[] = { "--norm", "--clip", "--max-grad-norm", "--noise-multiplier", "--target-epsilon",
                                    "--delta", "--max-physical-batch-size", "--noise-seed", "--flash-tile", "--lora-rank",
                                    "--lora-alpha", "--lora-targets", "--dataset-size", "--log-sample-norms", "--adjacency" };
    static const char *ADJ[] = { "zero-out", "replace-one" };
    int k;
    for (k = 0; k < 15; k++) if (!strcmp(f, valued[k])) break;
    if (k == 15) return 0;
    if (*i + 1 >= argc) { fprintf(stderr, "error: %s needs a value\n", f); return -1; }
    const char *v = argv[++*i];
    double x;
    int r;
    switch (k) {
    case 0: if ((r = pick(f, v, NORMS, 4)) < 0) return -1; c->norm = (DpNorm)r; break;
    case 1: if ((r = pick(f, v, CLIPS, 2)) < 0) return -1; c->clip = (DpClip)r; break;
    case 2: if (num(f, v, 1e-12, 1e12, &c->max_grad_norm)) return -1; break;
    case 3: if (num(f, v, 0, 1e6, &c->noise_multiplier)) return -1; c->sigma_given = 1; break;
    case 4: if (num(f, v, 1e-6, 1e6, &c->target_epsilon)) return -1; break;
    case 5: if (num(f, v, 1e-300, 1, &c->delta) || c->delta >= 1) {
                if (c->delta >= 1) fprintf(stderr, "error: --delta must be below 1\n");
                return -1;
            } break;
    case 6: if (whole(f, v, 1, 1 << 20, &x)) return -1; c->max_physical_batch = (int)x; break;
    case 7: {
        char *end; errno = 0;
        unsigned long long sd = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-') { fprintf(stderr, "error: --noise-seed expects a whole number >= 0, got '%s'\n", v); return -1; }
        c->seed = sd; c->seed_given = 1; break;
    }
    case 8: if (whole(f, v, 1, 1 << 16, &x)) return -1; c->flash_tile = (int)x; break;
    case 9: if (whole(f, v, 0, 1 << 16, &x)) return -1; c->lora_rank = (int)x; break;   /* 0: off */
    case 10: if (num(f, v, 1e-6, 1e6, &c->lora_alpha)) return -1; break;
    case 11: if (targets(v, &c->lora_targets)) return -1; break;
    case 12: if (whole(f, v, 1, 1e15, &x)) return -1; c->dataset_size = (long)x; break;
    case 13: if (whole(f, v, 0, DP_MAX_LOGGED_NORMS, &x)) return -1; c->log_sample_norms = (int)x; break;
    case 14: if ((r = pick(f, v, ADJ, 2)) < 0) return -1; c->replace_one = r; break;
    }
    c->enabled = 1;
    return 1;
}

int dp_config_extra(void *user, const char *flag, const char *value) {
    char *argv[2] = { (char *)flag, (char *)value };
    int i = 0, argc = value ? 2 : 1;
    int r = dp_config_flag((DpConfig *)user, argc, argv, &i);
    return r <= 0 ? r : 1 + i;
}

int dp_config_check(const DpConfig *c) {
    if (c->target_epsilon > 0 && c->sigma_given) {
        fprintf(stderr, "error: give --noise-multiplier or --target-epsilon, not both\n");
        return -1;
    }
    if (c->secure_seed && c->seed_given) {
        fprintf(stderr, "error: give --noise-seed or --secure-seed, not both\n");
        return -1;
    }
    if (c->replace_one && c->poisson) {
        fprintf(stderr, "error: --adjacency replace-one is accounted only for batches in order; --poisson's epsilon is add/remove\n");
        return -1;
    }
    if (c->lora_alpha > 0 && c->lora_rank == 0) {
        fprintf(stderr, "error: --lora-alpha needs --lora-rank > 0\n");
        return -1;
    }
    return 0;
}
