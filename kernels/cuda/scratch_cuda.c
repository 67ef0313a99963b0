/* scratch_cuda.c — the CUDA target as the plan backend sees it: the scratch each CUDA op asks for
   (a pure function of the shapes and of the fixed sizes in kernels_cuda.h, never of the device, so
   that `--plan-for cuda` predicts a CUDA run's tagged allocations byte for byte), the cuBLAS
   workspace both backends allocate first, and the plan init for this target.
   Plain C with no CUDA dependency: a build without the toolkit can still plan for a GPU.
   Keep it in step with the kernels: tests/test_cuda_kernels.cu compares a plan trace with a run. */
#include "kernels_cuda.h"
#include "dpmem.h"

size_t kcuda_scratch_bytes(const KBackend *b, KOp op, const KShape *s) {
    (void)b;
    switch (op) {
    case KOP_ATTENTION_BACKWARD:   /* delta = rowsum(dout * out), one per query row, as the CPU */
        return (size_t)s->B * s->NH * s->T * sizeof(float);
    case KOP_RMSNORM_BACKWARD: {   /* dw partial sums: one row per group of rows, summed in order */
        size_t N = (size_t)s->B * (size_t)s->T;
        size_t parts = N < KCUDA_RMSNORM_PARTS ? N : KCUDA_RMSNORM_PARTS;
        return parts * (size_t)s->C * sizeof(float);
    }
    case KOP_REDUCE:               /* one double per block, then the total */
        return (KCUDA_REDUCE_BLOCKS + 1) * sizeof(double);
    default:                       /* attention forward (on-chip tiles), embedding backward (column
                                      owners, no atomics), cross-entropy (one block per row): none */
        return 0;
    }
}

const KOps kops_cuda_target = { .name = "cuda", .space = DPMEM_DEVICE, .scratch_bytes = kcuda_scratch_bytes };

void *kcuda_alloc_cublas_workspace(KBackend *b) {
    return kbuf_alloc(b, KCUDA_CUBLAS_WORKSPACE, "cublas/workspace");
}

int kbackend_cuda_plan_init(KBackend *b) {
    kbackend_plan_init(b, &kops_cuda_target, 1);
    return kcuda_alloc_cublas_workspace(b) ? 0 : -1;
}
