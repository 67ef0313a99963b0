/* convert.c — bf16 <-> fp32 on the CPU (kernels.h's mixed precision): widening (exact), narrowing
   (round to nearest even, kbf16_from_f32), narrowing in place, and the byte copies and zero fills
   that buffers of either element type use. bf16 is stored as uint16_t.
   Not here: the bf16 GEMM (gemm_ex.c). */
#include "kernels_cpu.h"
#include <string.h>

void widen_cpu(KBackend *b, float *dst, const void *src, size_t n) {
    const uint16_t *s = src;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) dst[i] = kbf16_to_f32(s[i]);
}

void narrow_cpu(KBackend *b, void *dst, const float *src, size_t n) {
    uint16_t *d = dst;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL(n))
    for (size_t i = 0; i < n; i++) d[i] = kbf16_from_f32(src[i]);
}

/* Element i's bf16 lands in bytes [2i, 2i+2), inside float i/2, which is read before it: one pass in
   order is safe. In parallel: first [0, S) in order, then rounds [lo, 2lo): a round reads floats
   [lo, 2lo) and writes floats [lo/2, lo), all read by earlier rounds, so its elements are
   independent. Accesses go through memcpy (char access): the same bytes hold floats and halves. */
static void narrow_range(char *p, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i++) {
        float v;
        memcpy(&v, p + 4 * i, sizeof v);
        uint16_t h = kbf16_from_f32(v);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}

void narrow_inplace_cpu(KBackend *b, void *x, size_t n) {
    char *p = x;
    size_t head = n < 4096 ? n : 4096;
    narrow_range(p, 0, head);
    for (size_t lo = head; lo < n; lo *= 2) {
        size_t hi = 2 * lo < n ? 2 * lo : n, len = hi - lo;
        int nt = KCPU_PARALLEL(len) ? b->nthreads : 1;
        #pragma omp parallel for num_threads(nt) schedule(static, 1) if(nt > 1)
        for (int t = 0; t < nt; t++)
            narrow_range(p, lo + len * (size_t)t / (size_t)nt, lo + len * (size_t)(t + 1) / (size_t)nt);
    }
}

void copy_bytes_cpu(KBackend *b, void *dst, const void *src, size_t bytes) { kcpu_copy_bytes(b, dst, src, bytes); }
void zero_bytes_cpu(KBackend *b, void *x, size_t bytes) { kcpu_zero_bytes(b, x, bytes); }
