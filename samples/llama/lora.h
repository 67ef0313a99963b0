/* lora.h — LoRA adapters (Hu et al. 2021) on frozen linear layers, on any kernels.h backend.

   y = x W₀ᵀ + s·(x Aᵀ) Bᵀ,   A (r, IC) random init, B (OC, r) zero init, s = alpha / r.
   MERGED form: the model's weight holds W = W₀ + s·B·A, so the model's forward and its input
   gradients (dx = dy W) need no change; the adapters' gradients come from the layer's input x and
   output gradient dy, which the backward hands to the weight-gradient hook:
       hs = s·x Aᵀ (N, r),  dh = s·dy B (N, r);   dB = dyᵀ hs,  dA = dhᵀ x.
   So each adapter is an ordinary linear layer for DP's per-sample norms:
       B: input hs, output gradient dy;   A: input x, output gradient dh.
   UNMERGED form (bf16, the model's --precision): the frozen base is kept in bf16 only (no fp32
   master: it never changes; PEFT keeps it so), and s·B·A cannot be merged into it (a bf16 weight
   would round the update away). The model then adds the adapter beside the base GEMM:
       forward  y += s·(x Aᵀ) Bᵀ   (lora_forward_add),   backward  dx += s·(dy B) A   (lora_backward_input_add),
   and the adapters' gradients come through the hook exactly as in merged form.
   Merged form (fp32): after an optimizer step of A, B the weight is re-merged: W −= s·B_old·A_old, W += s·B·A.
   Cost: 2·OC·IC·r flops per adapter and step for the merges; in float the subtraction leaves
   W₀ within a few ulp per step (W₀ itself is never stored twice: no extra copy of the base).

   Memory tags: lora/<name>.lora_A|lora_B (the adapters), grads/<name>.lora_A|B, optimizer/
   <name>.lora_A|B.exp_avg|exp_avg_sq; the frozen W has no grads and no optimizer state.
   bf16 (the model's --precision): the adapters stay fp32 (masters, merged into the fp32 W); x, dy,
   hs and dh are bf16, and the side products use bf16 copies of A and B (lora/<name>.lora_A.bf16,
   .lora_B.bf16, refreshed from the masters at each use, as autocast casts at each use).

   Not here: which projections get adapters (dp/dp_sgd.c, from --lora-targets), DP (dp_sgd.c). */
#ifndef LORA_H
#define LORA_H

#include "kernels.h"

typedef struct {
    char name[64];                   /* the base weight's name, "layers.0.self_attn.q_proj" */
    int param_index;                 /* into LlamaModel.params */
    int IC, OC, r;
    float scale;                     /* alpha / r */
    KDtype dt;                       /* of x, dy, hs, dh (the model's activations) */
    float *A, *B;                    /* (r, IC), (OC, r) */
    float *A16, *B16;                /* bf16 copies for the side products (bf16 only) */
    float *dA, *dB;                  /* gradients, same shapes */
    float *mA, *vA, *mB, *vB;        /* Adam state (NULL with SGD) */
} LoraAdapter;

/* Allocates A, B, dA, dB (and m, v when adam) and initialises A ~ U(-1/√IC, 1/√IC) from seed (the
   bound of PyTorch's kaiming-uniform default that peft uses), B = 0. 0, or -1 (kbackend_error). */
int  lora_build(LoraAdapter *l, KBackend *kb, const char *name, int param_index, int IC, int OC, int r,
                float alpha, int adam, unsigned long long seed, KDtype dt);
void lora_free(LoraAdapter *l, KBackend *kb);
size_t lora_param_count(const LoraAdapter *l);      /* r·IC + OC·r */

/* W (OC, IC) += sign · s · B A. */
int  lora_merge(LoraAdapter *l, KBackend *kb, float *W, float sign);
/* hs (N, r) = s·x Aᵀ and dh (N, r) = s·dy B (either may be NULL); x, dy, hs, dh of type l->dt. */
int  lora_side(LoraAdapter *l, KBackend *kb, float *hs, float *dh, const float *x, const float *dy, int N);
/* Unmerged form: y (N, OC) += s·(x Aᵀ) Bᵀ and dx (N, IC) += s·(dy B) A, x, y, dy, dx of type l->dt,
   through an (N, r) scratch buffer (workspace/lora.<name>.side, freed before returning). */
int  lora_forward_add(LoraAdapter *l, KBackend *kb, float *y, const float *x, int N);
int  lora_backward_input_add(LoraAdapter *l, KBackend *kb, float *dx, const float *dy, int N);
/* dB += dyᵀ hs, dA += dhᵀ x. */
int  lora_accumulate(LoraAdapter *l, KBackend *kb, const float *x, const float *dy, const float *hs,
                     const float *dh, int N);

#endif
