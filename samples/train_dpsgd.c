/* train_dpsgd.c — Opacus's default ("hooks") DP-SGD: every sample's gradient materialized (B x |θ|,
   tagged per_sample_grads/...), clipped and summed.

   The shared loop (train.c) with the DP-SGD strategy (dp_sgd.c); defaults: --norm direct. Every
   combination of --norm direct|ghost|flash|mixed and --clip twopass|bk works here, so methods can
   be compared on one binary; `--help` lists the flags (model, data, DP). Prints ε at the end and
   logs it (META dp.epsilon). Not here: the methods themselves (dp_sgd.c, kernels/cpu/dp_*.c).

     build/train_dpsgd --model tiny --steps 20 --batch-size 8 --max-physical-batch-size 4 \
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
    cfg.run_name = "train_dpsgd";
    dp_config_defaults(&dp, DP_NORM_DIRECT, DP_CLIP_BK);
    int r = config_parse(&cfg, argc, argv, dp_config_extra, &dp, DP_CONFIG_USAGE);
    if (r != 0) return r > 0 ? 0 : 1;
    if (dp_sgd_prepare(&d, &st, &dp, &cfg, "direct") != 0) return 1;
    return train_run(&cfg, &st);
}
