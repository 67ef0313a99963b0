/* train_dp.c — the three DP-SGD sample programs, one row each in the table below: the shared loop
   (llama/train.c) with the DP-SGD strategy (dp/dp_sgd.c) and that row's defaults.

     train_dpsgd  Opacus's default ("hooks") DP-SGD: every sample's gradient materialized (B x |θ|,
                  tagged per_sample_grads/...), clipped and summed.          --norm direct --clip bk
     train_ghost  Opacus's ghost clipping: per-sample norms from the two T x T Gram matrices of every
                  linear layer (materialized, tagged ghost/...), then a second backward with
                  per-sample loss weights c_b.                                --norm ghost --clip twopass
     train_flash  tiled ("flash") ghost norms, no T x T buffer, and book-keeping: the clipped
                  gradient formed per layer from the one backward, no second backward (or --norm
                  mixed).                                                     --norm flash --clip bk

   Every combination of --norm direct|ghost|flash|mixed and --clip twopass|bk works in each, so
   methods can be compared on one binary; `--help` lists the flags (model, data, DP). Prints ε at the
   end, as the run's sampling supports it (batches in order: no amplification; --poisson: subsampled),
   and logs it (META dp.epsilon); the noise seed is drawn from getrandom() unless --noise-seed gives one. Each program is this file built with -DDP_SAMPLE="<its name>"
   (mk/dp.mk). Not here: the methods themselves (dp/dp_sgd.c, kernels/cpu/dp_*.c), LoRA (train_lora.c).

     build/train_flash --model tiny --steps 20 --batch-size 8 --max-physical-batch-size 4 \
         --max-grad-norm 1 --target-epsilon 8 --log run.log */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"

#include <stdio.h>
#include <string.h>

#ifndef DP_SAMPLE
#error "build with -DDP_SAMPLE=\"train_dpsgd\" (or train_ghost, train_flash): mk/dp.mk"
#endif

static const struct {
    const char *program;    /* the binary, and the run's name in its log */
    DpNorm norm;
    DpClip clip;
    const char *method;     /* dp_sgd_prepare's name for the method */
} SAMPLES[] = {
    {"train_dpsgd", DP_NORM_DIRECT, DP_CLIP_BK,      "direct"},
    {"train_ghost", DP_NORM_GHOST,  DP_CLIP_TWOPASS, "ghost"},
    {"train_flash", DP_NORM_FLASH,  DP_CLIP_BK,      "flash"},
};

int main(int argc, char **argv) {
    int s = -1;
    for (int i = 0; i < (int)(sizeof SAMPLES / sizeof SAMPLES[0]); i++)
        if (strcmp(SAMPLES[i].program, DP_SAMPLE) == 0) s = i;
    if (s < 0) { fprintf(stderr, "error: %s is not a DP sample of train_dp.c's table\n", DP_SAMPLE); return 1; }
    train_prefer_passive_omp(argv);
    TrainConfig cfg;
    DpConfig dp;
    DpSgd d;
    TrainStrategy st;
    config_defaults(&cfg);
    cfg.run_name = SAMPLES[s].program;
    dp_config_defaults(&dp, SAMPLES[s].norm, SAMPLES[s].clip);
    int r = config_parse(&cfg, argc, argv, dp_config_extra, &dp, DP_CONFIG_USAGE);
    if (r != 0) return r > 0 ? 0 : 1;
    if (dp_sgd_prepare(&d, &st, &dp, &cfg, SAMPLES[s].method) != 0) return 1;
    return train_run(&cfg, &st);
}
