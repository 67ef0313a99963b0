/* backend_cpu.c — the CPU backend: memcpy transfers and the table of CPU ops. Not here: the ops
   themselves (one file each beside this one), host memory and its cache of freed blocks
   (host_memory.c). */
#include "kernels_cpu.h"
#include "dpmem.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int kcpu_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int kcpu_thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static void cpu_copy_bytes(KBackend *b, void *dst, const void *src, size_t n) { (void)b; memcpy(dst, src, n); }

const KOps kops_cpu = {
    .name = "cpu", .space = DPMEM_HOST,
    .alloc = kcpu_alloc, .free = kcpu_free, .upload = cpu_copy_bytes, .download = cpu_copy_bytes,
    .scratch_bytes = kcpu_scratch_bytes,
    .gemm = gemm_cpu, .fill = fill_cpu, .copy = copy_cpu, .add = add_cpu, .scale = scale_cpu,
    .sum = sum_cpu, .sumsq = sumsq_cpu, .count_nonfinite = count_nonfinite_cpu,
    .embedding_forward = embedding_forward_cpu, .embedding_backward = embedding_backward_cpu,
    .rmsnorm_forward = rmsnorm_forward_cpu, .rmsnorm_backward = rmsnorm_backward_cpu,
    .rope_forward = rope_forward_cpu, .rope_backward = rope_backward_cpu,
    .attention_forward = attention_forward_cpu, .attention_backward = attention_backward_cpu,
    .swiglu_forward = swiglu_forward_cpu, .swiglu_backward = swiglu_backward_cpu,
    .crossentropy_forward = crossentropy_forward_cpu, .crossentropy_backward = crossentropy_backward_cpu,
    .adamw = adamw_cpu, .sgd = sgd_cpu,
    .gemm_ex = gemm_ex_cpu, .widen = widen_cpu, .narrow = narrow_cpu, .narrow_inplace = narrow_inplace_cpu,
    .copy_bytes = copy_bytes_cpu, .zero_bytes = zero_bytes_cpu,
    .init_normal = init_normal_cpu,
};

void kbackend_cpu_init(KBackend *b, int nthreads) {
    memset(b, 0, sizeof *b);
    b->kind = KB_CPU;
    b->ops = b->target = &kops_cpu;
    b->space = kops_cpu.space;
    b->nthreads = nthreads > 0 ? nthreads : kcpu_max_threads();
    b->release = kcpu_release;
    kcpu_blas_single_thread();
}
