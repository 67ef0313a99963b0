/* train_vanilla.c — the non-DP LLaMA trainer: the shared loop (train.c) with the plain strategy.

     build/train_vanilla                                   tiny model, synthetic tokens, 20 steps
     build/train_vanilla --data tokens.bin --steps 300 --lr 1e-3 --log run.log
     build/train_vanilla --model small --seq-len 512 --check-finite --mem-limit 4G
     build/train_vanilla --device plan --model 3b --seq-len 16384 --log plan.log
         (the exact tagged memory timeline of that run, computed in a fraction of a second: nothing is
          allocated for real or computed; --plan-for cuda predicts the GPU backend's allocations)
     build/train_vanilla --print-params --model 1b        every tensor, totals by group

   Exit codes: 0 ok, 1 bad flags/data/internal error, 3 out of memory (--mem-limit or the device),
   4 NaN/Inf found by --check-finite. `--help` lists every flag.
   Not here: anything DP (train_dpsgd, train_ghost, train_flash use the same loop with a strategy). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "llama/train.h"

int main(int argc, char **argv) {
    train_prefer_passive_omp(argv);
    TrainConfig cfg;
    config_defaults(&cfg);
    cfg.run_name = "train_vanilla";
    int r = config_parse(&cfg, argc, argv, NULL, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 1;
    return train_run(&cfg, NULL);
}
