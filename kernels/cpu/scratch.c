/* scratch.c — how much scratch each CPU op needs, from shapes and the thread count alone, so that
   the plan backend can predict a CPU run's allocations exactly. Keep it in step with the ops. */
#include "kernels_cpu.h"

size_t kcpu_scratch_bytes(const KBackend *b, KOp op, const KShape *s) {
    size_t nt = (size_t)(b->nthreads > 0 ? b->nthreads : 1);
    switch (op) {
    case KOP_ATTENTION_FORWARD:   /* per thread: an output block, the query block transposed, a block of
                                     scores, running max, sum and correction per query */
        return nt * (2 * (size_t)KCPU_ATTN_TILE * s->HS + (size_t)KCPU_ATTN_TILE * KCPU_ATTN_TILE + 3 * KCPU_ATTN_TILE) * sizeof(float);
    case KOP_ATTENTION_BACKWARD:  /* per thread: Pᵀ and dSᵀ blocks, the query and output-gradient blocks
                                     transposed */
        return nt * (2 * (size_t)KCPU_ATTN_TILE * KCPU_ATTN_TILE + 2 * (size_t)KCPU_ATTN_TILE * s->HS) * sizeof(float);
    case KOP_REDUCE:              /* one partial per thread, combined in order: deterministic */
        return nt * sizeof(double);
    case KOP_GEMM_EX:             /* widened blocks (no sbgemm), or an fp32 output to round */
        return kcpu_gemm_ex_scratch_floats(s->M, s->N, s->K, s->ab, s->c) * sizeof(float);
    default:
        return 0;
    }
}
