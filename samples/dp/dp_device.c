/* dp_device.c — where the DP-SGD strategy's kernels run and its buffers live (dp_sgd_impl.h): the
   errors, the bf16 widening of the CPU path, the tagged allocations. */
#include "dp_sgd_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int dp_fail(DpSgd *d, const char *fmt, const char *what) {
    snprintf(d->kb->err, sizeof d->kb->err, fmt, what);
    return -1;
}

#ifndef DP_HAVE_CUDA
void dp_no_gpu_kernels(void) {
    fprintf(stderr, "error: DP-SGD on a CUDA backend in a program built without the DP CUDA kernels\n");
    exit(1);
}
#endif

int dp_widen_open(DpSgd *d, Widen *w, int T, int din, int dout) {
    w->a = w->g = NULL;
    if (d->dt != KDT_BF16 || d->gpu) return 0;
    if (din > 0 && !(w->a = kbuf_alloc(d->kb, (size_t)T * din * sizeof(float), "workspace/dp_widen.A"))) return -1;
    if (!(w->g = kbuf_alloc(d->kb, (size_t)T * dout * sizeof(float), "workspace/dp_widen.G"))) {
        kbuf_free(d->kb, w->a); w->a = NULL;
        return -1;
    }
    return 0;
}

void dp_widen_close(DpSgd *d, Widen *w) { kbuf_free(d->kb, w->g); kbuf_free(d->kb, w->a); w->a = w->g = NULL; }

void dp_widen_sample(DpSgd *d, Widen *w, const float *A, const float *G, int b, int T, int din, int dout) {
    if (A) widen_buffer(d->kb, w->a, kact_at(A, (size_t)b * T * din, KDT_BF16), (size_t)T * din);
    widen_buffer(d->kb, w->g, kact_at(G, (size_t)b * T * dout, KDT_BF16), (size_t)T * dout);
}

float *dp_alloc_floats(DpSgd *d, size_t floats, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    if (floats > SIZE_MAX / sizeof(float)) {   /* kbuf_alloc refuses over 1 EiB; this product must not wrap first */
        snprintf(d->kb->err, sizeof d->kb->err, "%s: %zu floats do not fit a 64-bit byte count", tag, floats);
        return NULL;
    }
    return kbuf_alloc(d->kb, floats * sizeof(float), tag);
}

float *dp_alloc_act(DpSgd *d, size_t elems, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    return kbuf_alloc(d->kb, elems * KDT_SIZE(d->dt), tag);
}

/* (the per-sample gradient GEMMs and Gram products write with beta = 0; the copies of G are whole) */
float *dp_alloc_written(DpSgd *d, size_t bytes, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    return kbuf_alloc_overwritten(d->kb, bytes, tag);
}
