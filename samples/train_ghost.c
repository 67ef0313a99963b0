/* train_ghost.c — Opacus's ghost clipping: per-sample norms from the two T x T Gram matrices of every
   linear layer (materialized, tagged ghost/...), then a second backward with per-sample loss weights
   c_b.

   The shared loop (train.c) with the DP-SGD strategy (dp_sgd.c); defaults: --norm ghost --clip
   twopass. Every combination of --norm direct|ghost|flash|mixed and --clip twopass|bk works here, so
   methods can be compared on one binary; `--help` lists the flags (model, data, DP). Prints ε at the
   end and logs it (META dp.epsilon). Not here: the methods themselves (dp_sgd.c, kernels/cpu/dp_*.c).

     build/train_ghost --model tiny --steps 20 --batch-size 8 --max-physical-batch-size 4 \
         --max-grad-norm 1 --target-epsilon 8 --log run.log */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp_sgd.h"

int main(int argc, char **argv) {
    train_prefer_passive_omp(argv);
    TrainConfig cfg;
    DpConfig dp;
    DpSgd d;
    TrainStrategy st;
    config_defaults(&cfg);
    cfg.run_name = "train_ghost";
    dp_config_defaults(&dp, DP_NORM_GHOST, DP_CLIP_TWOPASS);
    int r = config_parse(&cfg, argc, argv, dp_config_extra, &dp, DP_CONFIG_USAGE);
    if (r != 0) return r > 0 ? 0 : 1;
    if (dp_sgd_prepare(&d, &st, &dp, &cfg, "ghost") != 0) return 1;
    return train_run(&cfg, &st);
}
