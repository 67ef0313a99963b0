/* mfu.c — the MFU's FLOP formula and peak table (see mfu.h for both, with their sources). */
#include "mfu.h"

#include <stddef.h>
#include <string.h>

double mfu_matmul_params(const LlamaConfig *c) {
    const double C = c->dim, HS = (double)c->dim / c->n_heads, QD = HS * c->n_heads, KD = HS * c->n_kv_heads,
                 F = c->ffn_dim;
    const double block = QD * C + 2 * KD * C + C * QD + 3 * F * C;   /* q, k, v, o; gate, up, down */
    const double head = c->task == LLAMA_TASK_CLASSIFY ? (double)c->num_labels : (double)c->vocab_size;
    return c->n_layers * block + head * C;   /* + lm_head (tied or not: once), or classify's score (K x C, every position) */
}

double mfu_attention_flops_per_token(const LlamaConfig *c, int T) {
    const double HS = (double)c->dim / c->n_heads;
    return 6.0 * c->n_layers * c->n_heads * HS * T;
}

double mfu_flops_per_token(const LlamaConfig *c, int T) {
    return 6.0 * mfu_matmul_params(c) + mfu_attention_flops_per_token(c, T);
}

/* A device whose name contains `need` (and `also`, when given) and not `reject`. First match wins. */
static const struct {
    const char *need, *also, *reject;
    double bf16, tf32, fp32;
    const char *source;
} PEAKS[] = {
    { "H100", "PCIe", NULL, 756, 378, 51,
      "NVIDIA H100 datasheet, PCIe: BF16 1513 and TF32 756 TFLOP/s with sparsity, halved; FP32 51" },
    { "H100", "HBM3", "NVL", 989, 494, 67,
      "NVIDIA H100 datasheet, SXM: BF16 1979 and TF32 989 TFLOP/s with sparsity, halved; FP32 67" },
    { "H100", "SXM", "NVL", 989, 494, 67,
      "NVIDIA H100 datasheet, SXM: BF16 1979 and TF32 989 TFLOP/s with sparsity, halved; FP32 67" },
    { "H200", NULL, "NVL", 989, 494, 67,
      "NVIDIA H200 datasheet, SXM: BF16 1979 and TF32 989 TFLOP/s with sparsity, halved; FP32 67" },
    { "A100", NULL, NULL, 312, 156, 19.5,
      "NVIDIA A100 datasheet: BF16 312, TF32 156 (dense), FP32 19.5 TFLOP/s" },
};

double mfu_peak_tflops(const char *device_name, const char *gemm, const char **source) {
    if (source) *source = NULL;
    if (!device_name || !gemm) return 0;
    for (size_t i = 0; i < sizeof PEAKS / sizeof *PEAKS; i++) {
        if (!strstr(device_name, PEAKS[i].need)) continue;
        if (PEAKS[i].also && !strstr(device_name, PEAKS[i].also)) continue;
        if (PEAKS[i].reject && strstr(device_name, PEAKS[i].reject)) continue;
        const double p = !strcmp(gemm, "bf16") ? PEAKS[i].bf16 : !strcmp(gemm, "tf32") ? PEAKS[i].tf32
                       : !strcmp(gemm, "fp32") ? PEAKS[i].fp32 : 0;
        if (p > 0 && source) *source = PEAKS[i].source;
        return p;
    }
    return 0;
}
