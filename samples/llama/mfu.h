/* mfu.h — model FLOPs utilisation (MFU): the FLOPs one training step of the model needs, by a fixed
   formula, over the step's time and the device's dense peak.

   FLOPs per token (forward + backward = 3 × forward; a multiply-add is 2 FLOPs):
       6·N  +  6·L·NH·HS·T
   N = the parameters that multiply activations in a GEMM: every linear layer of every block and
       lm_head (a tied matrix once, as lm_head); the embedding lookup (no multiplication) and the norm
       weights (element-wise) are left out. Each such weight costs 2 FLOPs per token forward, 4 backward.
   6·L·NH·HS·T = causal attention's QKᵀ and AV: 2·2·NH·HS FLOPs per (query, key) pair forward, about
       T/2 keys per query under the causal mask, times 3 for the backward: PaLM's 12·L·H·Q·T (Chowdhery
       et al. 2022, appendix B: non-causal) halved, as FlashAttention counts causal attention.
   What it leaves out on purpose: activation checkpointing's recomputation (MFU, not hardware FLOPs
   utilisation), DP's per-sample norm work (the DP methods' extra cost shows as a lower MFU), and
   frozen weights' skipped gradients (LoRA counts the full model).

   Peaks (TFLOP/s, dense, no sparsity) by device name and GEMM precision, from NVIDIA's datasheets,
   whose tensor-core figures are "with sparsity": dense is half. H100 SXM5 (the name says "HBM3" or
   "SXM"): BF16 1,979/2 = 989, TF32 989/2 = 494, FP32 67 (NVIDIA H100 Tensor Core GPU datasheet);
   H100 PCIe: 1,513/2 = 756, 756/2 = 378, 51 (same datasheet); H200 (SXM): the H100 SXM's (NVIDIA H200
   datasheet); A100 (40 and 80 GB, SXM and PCIe): BF16 312, TF32 156, FP32 19.5 (NVIDIA A100 datasheet,
   dense figures). Any other device (H100/H200 NVL included): no MFU unless --peak-tflops gives one.
   Not here: timing (train.c) or the device's name (samples/llama/train_cuda.c). */
#ifndef MFU_H
#define MFU_H

#include "config.h"

/* N of the formula above. */
double mfu_matmul_params(const LlamaConfig *c);
/* 6·N + 6·L·NH·HS·T at sequence length T. */
double mfu_flops_per_token(const LlamaConfig *c, int T);
/* The attention term alone, 6·L·NH·HS·T. */
double mfu_attention_flops_per_token(const LlamaConfig *c, int T);

/* The dense peak of a device (its CUDA name) for GEMMs in `gemm` ("bf16", "tf32" or "fp32"), in TFLOP/s,
   and where the figure comes from (*source, may be NULL); 0 (and source NULL) when not in the table. */
double mfu_peak_tflops(const char *device_name, const char *gemm, const char **source);

#endif
