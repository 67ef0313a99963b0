/* train_vanilla.c — the non-DP LLaMA trainer: the shared loop (train.c) with the plain strategy.
   `build/train_vanilla --help` lists the flags; `--device plan --model 3b --seq-len 16384` gives the
   exact tagged memory timeline of a run without running it. Not here: anything DP (train_dp*). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "train.h"

int main(int argc, char **argv) {
    TrainConfig cfg;
    config_defaults(&cfg);
    cfg.run_name = "train_vanilla";
    int r = config_parse(&cfg, argc, argv, NULL, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 1;
    return train_run(&cfg, NULL);
}
