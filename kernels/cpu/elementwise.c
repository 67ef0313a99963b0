/* elementwise.c — fills, copies, y += x, scaling, and the reductions (sum, sum of squares, count of
   NaN/Inf) on the CPU. Reductions accumulate in double, one partial per thread over a fixed range,
   combined in thread order: the same thread count gives the same bits. */
#include "kernels_cpu.h"
#include "vmath.h"
#include <math.h>
#include <string.h>

/* Large byte copies and zero fills in one piece per thread (one thread does not saturate the
   memory bus); overlapping ranges in one memmove. */
#define KCPU_SPLIT_MIN ((size_t)4 << 20)

void kcpu_copy_bytes(KBackend *b, void *dst, const void *src, size_t bytes) {
    const uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    const int apart = d + bytes <= s || s + bytes <= d;
    const int nt = apart && bytes >= KCPU_SPLIT_MIN && b->nthreads > 1 ? b->nthreads : 1;
    if (nt == 1) { if (dst != src) memmove(dst, src, bytes); return; }
    #pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (int t = 0; t < nt; t++) {
        const size_t lo = bytes * (size_t)t / (size_t)nt, hi = bytes * (size_t)(t + 1) / (size_t)nt;
        memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
    }
}

void kcpu_zero_bytes(KBackend *b, void *x, size_t bytes) {
    const int nt = bytes >= KCPU_SPLIT_MIN && b->nthreads > 1 ? b->nthreads : 1;
    #pragma omp parallel for num_threads(nt) schedule(static, 1) if(nt > 1)
    for (int t = 0; t < nt; t++) {
        const size_t lo = bytes * (size_t)t / (size_t)nt, hi = bytes * (size_t)(t + 1) / (size_t)nt;
        memset((char *)x + lo, 0, hi - lo);
    }
}

void fill_cpu(KBackend *b, float *x, float value, size_t n) {
    if (value == 0.0f) { kcpu_zero_bytes(b, x, n * sizeof *x); return; }
    #pragma omp parallel for simd num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) x[i] = value;
}

void copy_cpu(KBackend *b, float *dst, const float *src, size_t n) { kcpu_copy_bytes(b, dst, src, n * sizeof *dst); }

void add_cpu(KBackend *b, float *y, const float *x, size_t n) {
    #pragma omp parallel for simd num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void scale_cpu(KBackend *b, float *x, float s, size_t n) {
    #pragma omp parallel for simd num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

/* kind 0: sum, 1: sum of squares, 2: count of non-finite values. Range t is fixed by nt alone,
   whichever thread runs it. */
static double reduce(KBackend *b, const float *x, size_t n, double *part, int kind) {
    int nt = b->nthreads > 0 ? b->nthreads : 1;
    #pragma omp parallel for num_threads(nt) schedule(static, 1) if(KCPU_PARALLEL(n))
    for (int t = 0; t < nt; t++) {
        size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
        double acc = 0.0;
        for (size_t i = lo; i < hi; i++) {
            double v = x[i];
            acc += kind == 0 ? v : kind == 1 ? v * v : (isfinite(x[i]) ? 0.0 : 1.0);
        }
        part[t] = acc;
    }
    double total = 0.0;
    for (int t = 0; t < nt; t++) total += part[t];
    return total;
}

double sum_cpu(KBackend *b, const float *x, size_t n, void *scratch) { return reduce(b, x, n, scratch, 0); }
double sumsq_cpu(KBackend *b, const float *x, size_t n, void *scratch) { return reduce(b, x, n, scratch, 1); }
size_t count_nonfinite_cpu(KBackend *b, const float *x, size_t n, void *scratch) {
    return (size_t)reduce(b, x, n, scratch, 2);
}

KCPU_CLONES
void swiglu_forward_cpu(KBackend *b, float *h, const float *gate, const float *up, size_t n) {
    #pragma omp parallel for simd num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        h[i] = g / (1.0f + kexpf(-g)) * up[i];
    }
}

KCPU_CLONES
void swiglu_backward_cpu(KBackend *b, float *dgate, float *dup, const float *dh, const float *gate,
                         const float *up, size_t n) {
    #pragma omp parallel for simd num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sig = 1.0f / (1.0f + kexpf(-g)), silu = g * sig;
        dup[i] = dh[i] * silu;
        dgate[i] = dh[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
    }
}
