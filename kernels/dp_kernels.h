/* dp_kernels.h — the per-sample gradient norm and clipping kernels of DP-SGD, on plain arrays.

   For each trainable tensor, these compute each sample's squared gradient norm ‖g_b‖² (ADDED into
   norm2[b], so that one vector sums the layers: flat clipping) and the clipped gradient
   Σ_b c_b g_b (ADDED into the gradient), from what one backward pass leaves behind:
     linear layer y = x Wᵀ, W [OC, IC]:  a [B, T, IC] its inputs, g [B, T, OC] the loss gradient w.r.t. y;
                                       the per-sample gradient is g_bᵀ a_b [OC, IC].
     embedding E [V, C]:               tokens [B, T], g [B, T, C] the gradient w.r.t. the looked-up rows.
     RMSNorm weight w [C]:             g_b[i] = Σ_t dout[b,t,i] · inp[b,t,i] · rstd[b,t]
                                       (the rmsnorm of kernels.h: out = inp · rstd · w).
   Four ways to get the norms of a linear layer (docs/DP_METHODS.md compares them):
     direct  per-sample gradients materialized, psg [B, OC, IC] (Opacus "hooks"): 2·B·T·IC·OC flops.
     ghost   the Gram identity ‖g_bᵀa_b‖² = Σ_{t,s} (a_t·a_s)(g_t·g_s), with both T×T Gram matrices
             of every sample materialized, gram [2, B, T, T] (as Opacus's ghost clipping).
     flash   the same sum over R×R tiles of time blocks, j ≤ i only (off-diagonal tiles count twice):
             one tile pair per thread, [2, R, R] each; no T×T buffer.
     mixed   per layer, whichever of flash and direct adds less at the run's shapes (flops and bytes:
             dp_mixed_uses_gram, dp_mixed.c).
   Scratch is the caller's (the trainer allocates it through kbuf_alloc under the `per_sample_grads`,
   `ghost` tags). Every function that reads the big operands accounts its memory traffic in a DpIO
   when one is given: the bytes a GPU kernel would move to and from global memory (A, G, the Gram
   matrices, the norms), not the cache traffic of this CPU code; flash's tiles are on-chip in that
   kernel (the CUDA backend's flash, Gram block rows by cuBLAS, counts its own larger figure).

   Dimension letters: B samples (one sequence each, the privacy unit), T time steps, IC inputs, OC
   outputs, C width, V vocabulary, R tile size. Row-major fp32; sums of squares accumulate in double.
   bf16 activations (--precision bf16): the GPU twins read them (the `_dt` entries of
   kernels/cuda/kernels_cuda.h); on the CPU the trainer widens one sample's A and G at a time and
   calls these fp32 kernels with B = 1 (samples/dp/dp_device.c). Either way the products and sums are fp32
   or double over exactly the bf16 values, and the per-sample gradients, norms, factors and clipped
   sums stay fp32.
   Not here: the second backward of two-pass clipping and the noise (kernels/noise.h), GPU versions
   (kernels/cuda, to be checked against these). */
#ifndef DP_KERNELS_H
#define DP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct { uint64_t read, written; } DpIO;   /* bytes from and to (global) memory */

/* ---- linear layers ---------------------------------------------------------------------------- */
/* psg[b] = g_bᵀ a_b, [B, OC, IC]; norm2[b] += ‖psg[b]‖². */
void dp_linear_norms_direct(float *norm2, float *psg, const float *a, const float *g,
                            int B, int T, int IC, int OC, DpIO *io);
/* The same with sample 0's gradient at `first` [OC, IC] and samples 1..B-1 at `rest` [B-1, OC, IC]
   (book-keeping writes sample 0 straight into the layer's still-empty dW: one slice less to keep). */
void dp_linear_norms_direct_split(float *norm2, float *first, float *rest, const float *a, const float *g,
                                  int B, int T, int IC, int OC, DpIO *io);
/* gram [2, B, T, T]: a_b a_bᵀ then g_b g_bᵀ for every b; norm2[b] += ⟨aaᵀ, ggᵀ⟩. */
void dp_linear_norms_ghost(float *norm2, float *gram, const float *a, const float *g,
                           int B, int T, int IC, int OC, DpIO *io);
/* norm2[b] += Σ_{j≤i} w_ij ⟨a_i a_jᵀ, g_i g_jᵀ⟩ over time blocks of R (w = 1 on the diagonal, 2 off
   it), on nt threads. R ≥ 1; R ≥ T is the ghost sum with one tile. scratch: B·⌈T/R⌉ row sums
   (double) and one tile pair [2, R, R] per thread (dp_linear_flash_floats); the result does not
   depend on nt. */
void dp_linear_norms_flash(float *norm2, float *scratch, const float *a, const float *g,
                           int B, int T, int IC, int OC, int R, int nt, DpIO *io);
/* Mixed's per-layer choice (dp_mixed.c): what each way to a linear layer's norms adds to the step over
   its weight-gradient GEMM, at B samples of T rows, elem_bytes an activation element (4 fp32, 2 bf16). */
typedef enum {
    DP_WAY_DIRECT_KEPT,   /* per-sample gradients kept for book-keeping: their GEMM is the weight gradient's */
    DP_WAY_DIRECT,        /* per-sample gradients formed for the norm only (streamed) */
    DP_WAY_GRAM,          /* flash's Gram block rows */
    DP_WAY_GRAM_COPY_G    /* the same where direct would be kept: G copied for the book-keeping GEMM too */
} DpWay;
typedef struct { double flops, bytes; } DpCost;
enum { DP_COST_FLOPS_PER_BYTE = 270 };   /* H100: ~700 TFLOP/s bf16 GEMMs, ~2.6 TB/s */
DpCost dp_linear_cost(DpWay way, int B, int T, int IC, int OC, int elem_bytes);
double dp_cost_flop_equivalent(DpCost c);   /* flops + DP_COST_FLOPS_PER_BYTE · bytes */
/* 1 when the Gram path costs less than direct; kept: direct's per-sample gradients would be kept for
   book-keeping (physical batch 1), so its GEMM is not extra work. The same on every device. */
int  dp_mixed_uses_gram(int B, int T, int IC, int OC, int kept, int elem_bytes);
/* Scratch floats of each method (what the caller allocates). */
size_t dp_linear_direct_floats(int B, int IC, int OC);
size_t dp_linear_ghost_floats(int B, int T);
size_t dp_linear_flash_floats(int B, int T, int R, int nt);

/* Book-keeping: dw [OC, IC] += Σ_b c_b g_bᵀ a_b (one GEMM per sample, alpha = c_b; no second backward). */
void dp_linear_clipped_grad_bk(float *dw, const float *a, const float *g, const float *c,
                               int B, int T, int IC, int OC);

/* ---- embedding -------------------------------------------------------------------------------- */
/* norm2[b] += Σ_{t,s} [tok_t = tok_s] g_t·g_s: no V-sized buffer. */
void dp_embedding_norms(float *norm2, const int *tokens, const float *g, int B, int T, int C, DpIO *io);
/* Direct: psg [B, V, C] gets each sample's gradient, its scattered rows; norm2[b] += ‖psg[b]‖².
   Only the rows of the sample's tokens are written (zeroed, then summed into): the others are zero
   in the gradient and are left as they are, neither written nor read (nor, in fresh memory, ever
   faulted in). Their sum: dp_embedding_clipped_sum_direct. */
void dp_embedding_norms_direct(float *norm2, float *psg, const int *tokens, const float *g,
                               int B, int T, int C, int V);
/* grad [V, C] += Σ_b c_b psg[b] over the rows of sample b's tokens (each once, samples in order):
   dp_clipped_sum of dp_embedding_norms_direct's psg without reading its untouched rows. */
void dp_embedding_clipped_sum_direct(float *grad, const float *psg, const int *tokens, const float *c,
                                     int B, int T, int C, int V);
/* Book-keeping: dwte [V, C] += Σ_b c_b Σ_t onehot(tok_bt) g_bt. */
void dp_embedding_clipped_grad_bk(float *dwte, const int *tokens, const float *g, const float *c,
                                  int B, int T, int C);

/* ---- tied embeddings (lm_head = embed_tokens; dp_norms_tied.c) --------------------------------- */
/* The cross term 2⟨e_b, h_b⟩ of the tied matrix's per-sample norm ‖e_b + h_b‖², in two halves:
   at lm_head's gradient, u [B, T, C] with u_bt = Σ_s dlogits_bs[tok_bt] · a_bs (dlogits [B, T, V],
   a [B, T, C] lm_head's input), the T×T gather in R×R tiles, one per thread (scratch:
   dp_tied_cross_floats; R ≥ T: whole); at the embedding's gradient, norm2[b] += 2 Σ_t g_bt · u_bt. */
void dp_tied_cross_u(float *u, float *scratch, const int *tokens, const float *dlogits, const float *a,
                     int B, int T, int C, int V, int R, int nt, DpIO *io);
size_t dp_tied_cross_floats(int T, int R, int nt);
void dp_tied_cross_dot(float *norm2, const float *g, const float *u, int B, int T, int C, DpIO *io);
/* norm2[b] += ‖psg[b]‖² for psg [B, P] (the direct route: e_b + h_b formed, then measured). */
void dp_psg_norms(float *norm2, const float *psg, int B, size_t P);

/* ---- RMSNorm weight --------------------------------------------------------------------------- */
/* psg [B, C] = Σ_t dout · inp · rstd; norm2[b] += ‖psg[b]‖². */
void dp_rmsnorm_norms_direct(float *norm2, float *psg, const float *dout, const float *inp,
                             const float *rstd, int B, int T, int C);

/* ---- clipping --------------------------------------------------------------------------------- */
/* c[b] = min(1, max_norm / (sqrt(norm2[b]) + 1e-6)) (Opacus's factor); 0 when norm2[b] is not finite. */
void dp_clip_factors(float *c, const float *norm2, int B, float max_norm);
/* The factor with a margin: c[b] = min(1, max_norm / (sqrt(norm2[b])·(1 + rel) + 1e-6)), computed in
   double and rounded down to float, so that c_b·‖g_b‖ ≤ max_norm holds even when the measured norm
   is low by up to a relative `rel` (and through the float rounding of norm2 and of c). The bf16
   trainers use rel = DP_BF16_CLIP_MARGIN: their norms are fp32/double sums over bf16 values, whose
   error is far below it, and the margin itself is 16 times below bf16's resolution (2^-8). */
#define DP_BF16_CLIP_MARGIN 0x1p-12
void dp_clip_factors_safe(float *c, const float *norm2, int B, float max_norm, double rel);
/* grad [P] += Σ_b c_b psg[b] for psg [B, P]. */
void dp_clipped_sum(float *grad, const float *psg, const float *c, int B, size_t P);
/* grad [P] holds sample 0's gradient (dp_linear_norms_direct_split): grad = c_0 grad + Σ_{b≥1} c_b
   rest[b-1] for rest [B-1, P]. */
void dp_clipped_sum_first(float *grad, const float *rest, const float *c, int B, size_t P);

/* ---- the update: noise and AdamW in one pass (dp_update.c; CUDA: dp_noisy_adamw_cuda) ---------- */
typedef struct {
    double sigma, max_grad_norm, logical_batch;   /* noise_privatize's (kernels/noise.h) */
    uint64_t seed, step;
} DpNoise;
typedef struct { float lr, beta1, beta2, eps, weight_decay; int t; } DpAdamW;   /* adamw_update's (kernels.h) */
/* One pass over a tensor at flat offset `offset` of the parameter vector: the summed clipped gradient g
   privatized as noise_privatize does it, g_i = (g_i + (float)(σC·z(seed, step, offset + i))) / L, and the
   AdamW update of p, m, v with it (adamw_element.h): the bits of noise_privatize followed by
   adamw_update, without writing the noised gradient and reading it back: 28 bytes a parameter (32 with
   keep_noised) where the separate path moves 36 (CPU: privatize, AdamW) or 44 (GPU: noise, scale,
   AdamW). keep_noised: also store the noised g_i into g (what the separate path leaves there); else g
   keeps the summed clipped gradient, for the caller to clear. nthreads: OpenMP threads (< 1: one). */
void dp_noisy_adamw(float *p, float *g, float *m, float *v, size_t n, uint64_t offset, const DpNoise *noise,
                    const DpAdamW *opt, int keep_noised, int nthreads);

#endif /* DP_KERNELS_H */
