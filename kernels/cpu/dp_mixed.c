/* dp_mixed.c — mixed's per-layer choice (--norm mixed): the Gram path (flash) or direct per-sample
   gradients, whichever adds less to the step at the run's shapes. One pure function of the shapes, so
   the CPU, the GPU and the plan for either pick the same (and CPU/GPU loss curves stay identical).

   The cost is what each way adds over the weight-gradient GEMM the step runs anyway (2·B·T·IC·OC
   flops), in flops plus bytes moved, the bytes weighted by DP_COST_FLOPS_PER_BYTE (the H100's measured
   balance, 700 TFLOP/s bf16 GEMMs against 2.6 TB/s: docs/CUDA_RESULTS_2026-11-26.md):
     direct, kept   the per-sample gradient is the clipped sum's too (book-keeping keeps it: its GEMM is
                    the weight gradient's): Σ psg² and the clipped sum, 2·B·IC·OC flops; it is written,
                    read for the norm and read for the sum: 3·B·IC·OC fp32.
     direct         streamed (norm only): the per-sample GEMMs again, 2·B·T·IC·OC + 2·B·IC·OC flops; A
                    and G read again, the gradient written and read.
     Gram (flash)   a_b a_bᵀ and g_b g_bᵀ over j ≤ i block pairs, B·T²·(IC+OC) flops + 2·B·T² for the
                    product; A and G read again, the Gram block rows written and read back (2·B·T² fp32).
                    Where direct would be kept, the Gram path must copy G instead (2·B·T·OC elements).
   So at physical batch 1 under book-keeping direct wins unless T is small against the width (its
   cost does not grow with T); without keeping, the Gram path wins where T² (IC+OC) < T·IC·OC, i.e.
   T well below the layer's width. Not here: what may be kept (the memory rule, samples/dp/dp_norms.c). */
#include "dp_kernels.h"

DpCost dp_linear_cost(DpWay way, int B, int T, int IC, int OC, int elem_bytes) {
    const double b = B, t = T, ic = IC, oc = OC, e = elem_bytes, w = ic * oc;
    DpCost c = { 0, 0 };
    switch (way) {
    case DP_WAY_DIRECT_KEPT:
        c.flops = 2 * b * w;
        c.bytes = 3 * b * w * 4;
        break;
    case DP_WAY_DIRECT:
        c.flops = 2 * b * t * w + 2 * b * w;
        c.bytes = b * t * (ic + oc) * e + 2 * b * w * 4;
        break;
    case DP_WAY_GRAM:
    case DP_WAY_GRAM_COPY_G:
        c.flops = b * t * t * (ic + oc) + 2 * b * t * t;
        c.bytes = b * t * (ic + oc) * e + 2 * b * t * t * 4 + (way == DP_WAY_GRAM_COPY_G ? 2 * b * t * oc * e : 0);
        break;
    }
    return c;
}

double dp_cost_flop_equivalent(DpCost c) { return c.flops + DP_COST_FLOPS_PER_BYTE * c.bytes; }

int dp_mixed_uses_gram(int B, int T, int IC, int OC, int kept, int elem_bytes) {
    const DpCost direct = dp_linear_cost(kept ? DP_WAY_DIRECT_KEPT : DP_WAY_DIRECT, B, T, IC, OC, elem_bytes);
    const DpCost gram = dp_linear_cost(kept ? DP_WAY_GRAM_COPY_G : DP_WAY_GRAM, B, T, IC, OC, elem_bytes);
    return dp_cost_flop_equivalent(gram) < dp_cost_flop_equivalent(direct);   /* a tie: direct (exact norms) */
}
