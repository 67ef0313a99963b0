/* dp_config.h — the DP-SGD settings of a training run and their command-line flags.

   The flags (every DP sample takes all of them; defaults in brackets):
     --norm direct|ghost|flash|mixed      how per-sample gradient norms are computed  [per sample]
     --clip twopass|bk                    how the clipped gradient is formed          [per sample]
     --max-grad-norm C                    clipping norm                               [1.0]
     --noise-multiplier S                 σ: noise std = σ·C                          [1.0]
     --target-epsilon E                   find σ for ε = E after the whole run (replaces σ)
     --delta D                            δ                                           [1e-5]
     --max-physical-batch-size P          physical batch; logical = --batch-size      [= batch]
     --poisson                            Poisson sampling at rate batch/dataset size
     --dataset-size N                     rows for the sample rate  [data rows (data.h); synthetic 65536]
     --log-sample-norms N                 log the first N per-sample norms and clip factors of each step [0]
     --noise-seed N / --secure-seed       noise and Poisson seed, reproducible / from getrandom() [getrandom()]
     --secure-noise                       the noise and Poisson draws from ChaCha20 (256-bit key), on a grid
                                          (kernels/secure_noise.h)                    [Philox]
     --adjacency zero-out|replace-one     the adjacency of the headline ε and of --target-epsilon, batches
                                          in order (--poisson: add/remove)            [zero-out]
     --flash-tile R                       time block of the flash norms               [64]
     --lora-rank r, --lora-alpha a        LoRA adapters of rank r (0: off), scale a/r [0, 2r]
     --lora-targets q,k,v,o,gate,up,down  projections that get adapters               [q,v]
   Not here: the trainer's own flags (--batch-size, --seq-len, --steps, ...): dp_config_flag
   leaves them to the caller. */
#ifndef DP_CONFIG_H
#define DP_CONFIG_H

#include <stdint.h>

typedef enum { DP_NORM_DIRECT = 0, DP_NORM_GHOST, DP_NORM_FLASH, DP_NORM_MIXED } DpNorm;
typedef enum { DP_CLIP_TWOPASS = 0, DP_CLIP_BK } DpClip;

/* LoRA target projections, as bits. */
enum { LORA_Q = 1, LORA_K = 2, LORA_V = 4, LORA_O = 8, LORA_GATE = 16, LORA_UP = 32, LORA_DOWN = 64 };

typedef struct {
    int    enabled;                  /* 0: vanilla training (no DP flags given and not a DP sample) */
    DpNorm norm;
    DpClip clip;
    double max_grad_norm;
    double noise_multiplier;         /* σ; resolved from target_epsilon when that is > 0 */
    int    sigma_given;              /* --noise-multiplier was on the command line */
    double target_epsilon;           /* 0: not given */
    double delta;
    int    max_physical_batch;       /* 0: the logical batch */
    int    poisson;
    long   dataset_size;             /* 0: from the data (rows of T+1 tokens), synthetic 65536 */
    uint64_t seed;                   /* --noise-seed (without it: drawn from getrandom() by dp_sgd_init) */
    int    seed_given;
    int    secure_seed;              /* --secure-seed: the default (getrandom()), said explicitly */
    int    secure_noise;             /* --secure-noise: ChaCha20 noise on the grid (kernels/secure_noise.h) */
    int    replace_one;              /* --adjacency replace-one: the headline ε and --target-epsilon under it */
    int    flash_tile;
    int    lora_rank;                /* 0: no LoRA */
    double lora_alpha;               /* 0: not given (2·rank) */
    unsigned lora_targets;
    int    quiet_dp;                 /* no DP lines on stdout (benchmarks) */
    int    log_sample_norms;         /* per step, the first N samples' norms and clip factors into the log */
} DpConfig;

#define DP_MAX_LOGGED_NORMS 4096

/* Defaults for a sample that does `norm` + `clip` (the sample's own method). */
void dp_config_defaults(DpConfig *c, DpNorm norm, DpClip clip);

/* If argv[*i] is a DP flag, consumes it (and its value, advancing *i) and returns 1; returns 0 for
   a flag that is not DP's; -1 with a one-line message on stderr for a bad value. */
int  dp_config_flag(DpConfig *c, int argc, char **argv, int *i);

/* The same as a config.h ConfigExtraFn (user = the DpConfig): 2 when flag took value, 1 for a
   switch, 0 when not a DP flag, -1 on a bad value (message printed). */
int  dp_config_extra(void *user, const char *flag, const char *value);
extern const char DP_CONFIG_USAGE[];

/* Checks the combination (after all flags): 0, or -1 with a one-line message. */
int  dp_config_check(const DpConfig *c);

const char *dp_norm_name(DpNorm n);
const char *dp_clip_name(DpClip c);
/* "q,v" style list of the targets into buf. */
const char *dp_lora_targets_string(unsigned targets, char *buf, int n);


#endif
