/* scratch_cuda.c — the CUDA target as the plan backend sees it: the scratch each CUDA op asks for
   (a pure function of the shapes and of the fixed sizes in kernels_cuda.h, never of the device, so
   that `--plan-for cuda` predicts a CUDA run's tagged allocations byte for byte), the cuBLAS
   workspace both backends allocate first, and the plan init for this target.
   Plain C with no CUDA dependency: a build without the toolkit can still plan for a GPU.
   Keep it in step with the kernels: tests/test_cuda_kernels.cu compares a plan trace with a run. */
#include "kernels_cuda.h"
#include "dpmem.h"

/* cuDNN's fused attention asks for a workspace whose size depends on its version and engine, never
   on the data: the backend allocates this bound (a pure function of the shapes, so plans stay exact)
   and stops with one line if an engine ever asks for more (attention_cudnn.cpp). Backward: dQ's fp32
   accumulator and, for GQA, dK/dV accumulated over every query head (3 · B·NH·T·HS floats), two fp32
   row statistics per query row, and 1 MiB for the engine's own; forward: one row statistic and 1 MiB. */
size_t kcuda_attention_cudnn_workspace(int B, int T, int NH, int NKV, int HS, int backward) {
    (void)NKV;
    const size_t rows = (size_t)B * NH * T;
    return backward ? rows * (3 * (size_t)HS + 2) * sizeof(float) + ((size_t)1 << 20)
                    : rows * sizeof(float) + ((size_t)1 << 20);
}

size_t kcuda_scratch_bytes(const KBackend *b, KOp op, const KShape *s) {
    (void)b;
    switch (op) {
    case KOP_ATTENTION_FORWARD:    /* bf16: cuDNN's workspace; fp32: on-chip tiles, none */
        return s->ab == KDT_BF16 ? kcuda_attention_cudnn_workspace(s->B, s->T, s->NH, s->NKV, s->HS, 0) : 0;
    case KOP_ATTENTION_BACKWARD:   /* bf16: cuDNN's workspace; fp32: delta = rowsum(dout * out) per query row */
        if (s->ab == KDT_BF16) return kcuda_attention_cudnn_workspace(s->B, s->T, s->NH, s->NKV, s->HS, 1);
        return (size_t)s->B * s->NH * s->T * sizeof(float);
    case KOP_RMSNORM_BACKWARD: {   /* dw partial sums: one row per group of rows, summed in order */
        size_t N = (size_t)s->B * (size_t)s->T;
        size_t parts = N < KCUDA_RMSNORM_PARTS ? N : KCUDA_RMSNORM_PARTS;
        return parts * (size_t)s->C * sizeof(float);
    }
    case KOP_REDUCE:               /* one double per block, then the total */
        return (KCUDA_REDUCE_BLOCKS + 1) * sizeof(double);
    default:                       /* embedding backward (column
                                      owners, no atomics), cross-entropy (one block per row): none */
        return 0;
    }
}

const KOps kops_cuda_target = { .name = "cuda", .space = DPMEM_DEVICE, .scratch_bytes = kcuda_scratch_bytes,
                                 .bf16_native = 1 };

void *kcuda_alloc_cublas_workspace(KBackend *b) {
    return kbuf_alloc(b, KCUDA_CUBLAS_WORKSPACE, "cublas/workspace");
}

int kbackend_cuda_plan_init(KBackend *b) {
    kbackend_plan_init(b, &kops_cuda_target, 1);
    return kcuda_alloc_cublas_workspace(b) ? 0 : -1;
}
