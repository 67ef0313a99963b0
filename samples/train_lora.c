/* train_lora.c — DP fine-tuning of LoRA adapters: the base model frozen (no gradients, no optimizer
   state, no per-sample anything for it), adapters of rank --lora-rank (default 8) with scale
   --lora-alpha / r on --lora-targets (default q,v), DP-SGD on the adapters with the cheapest
   method by default (mixed norms + book-keeping; any --norm / --clip works).

     build/train_lora --model small --seq-len 512 --batch-size 8 --lora-rank 8 --target-epsilon 3
     build/train_lora --model tiny --print-params       # base frozen, adapters trainable

   The memory breakdown shows the saving: grads and optimizer hold only the adapters. Not here:
   the adapters' math (lora.c) or DP (dp_sgd.c). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"

#include <stdio.h>

static int is_target(const ParamInfo *p, unsigned t) {
    switch (p->which) {
    case W_Q_PROJ: return !!(t & LORA_Q);      case W_K_PROJ: return !!(t & LORA_K);
    case W_V_PROJ: return !!(t & LORA_V);      case W_O_PROJ: return !!(t & LORA_O);
    case W_GATE_PROJ: return !!(t & LORA_GATE); case W_UP_PROJ: return !!(t & LORA_UP);
    case W_DOWN_PROJ: return !!(t & LORA_DOWN); default: return 0;
    }
}

/* --print-params: the loop printed the (frozen) base; the adapters follow. */
static int print_adapters(const TrainConfig *cfg, const DpConfig *dp) {
    LlamaModel m;
    if (llama_describe(&m, &cfg->model, cfg->batch_size, cfg->seq_len) != 0) return 1;
    size_t n = 0, base = 0;
    for (int i = 0; i < m.n_params; i++) {   /* as the trainer builds it: a frozen GEMM weight bf16 alone under bf16 */
        m.params[i].trainable = !dp_sgd_frozen(NULL, &m.params[i]);
        if (!m.params[i].trainable) base += m.params[i].numel * (llama_bf16_only(&m, &m.params[i]) ? 2 : 4);
    }
    printf("\n%-52s %-14s %-6s %14s %9s\n", "LoRA adapter", "shape", "dtype", "bytes", "trainable");
    for (int i = 0; i < m.n_params; i++) {
        const ParamInfo *p = &m.params[i];
        if (!is_target(p, dp->lora_targets)) continue;
        char name[96], shape[32];
        snprintf(name, sizeof name, "%s.lora_A.weight", p->name);
        snprintf(shape, sizeof shape, "(%d, %d)", dp->lora_rank, p->cols);
        printf("%-52s %-14s %-6s %14zu %9s\n", name, shape, "fp32", (size_t)dp->lora_rank * p->cols * 4, "yes");
        snprintf(name, sizeof name, "%s.lora_B.weight", p->name);
        snprintf(shape, sizeof shape, "(%d, %d)", p->rows, dp->lora_rank);
        printf("%-52s %-14s %-6s %14zu %9s\n", name, shape, "fp32", (size_t)p->rows * dp->lora_rank * 4, "yes");
        n += (size_t)dp->lora_rank * ((size_t)p->cols + p->rows);
    }
    printf("LoRA trainable %zu parameters (%zu bytes); frozen base %zu parameters (%zu bytes)\n",
           n, n * 4, m.bytes_params / 4, base);
    llama_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    train_prefer_passive_omp(argv);
    TrainConfig cfg;
    DpConfig dp;
    DpSgd d;
    TrainStrategy st;
    config_defaults(&cfg);
    cfg.run_name = "train_lora";
    dp_config_defaults(&dp, DP_NORM_MIXED, DP_CLIP_BK);
    dp.lora_rank = -1;                                    /* -1: not given */
    int r = config_parse(&cfg, argc, argv, dp_config_extra, &dp, DP_CONFIG_USAGE);
    if (r != 0) return r > 0 ? 0 : 1;
    if (dp.lora_rank == 0) { fprintf(stderr, "error: train_lora needs --lora-rank > 0\n"); return 1; }
    if (dp.lora_rank < 0) dp.lora_rank = 8;
    if (dp_sgd_prepare(&d, &st, &dp, &cfg, "lora") != 0) return 1;
    r = train_run(&cfg, &st);
    if (r == 0 && cfg.print_params) r = print_adapters(&cfg, &dp);
    return r;
}
