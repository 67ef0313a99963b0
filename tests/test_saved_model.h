/* test_saved_model.h — a model saved by a trainer (--save DIR --save-dtype f32) read back for
   comparisons between runs: the safetensors header and the raw f32 data after it, and the largest
   difference of two such models. Include after test_dp_common.h (CHECK, failures). */
#ifndef TEST_SAVED_MODEL_H
#define TEST_SAVED_MODEL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A saved model: the safetensors header and the raw f32 data after it. */
typedef struct { char *head; size_t nhead; float *w; size_t n; } Model;

static inline int load(const char *dir, Model *m) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) { printf("FAIL: cannot open %s\n", path); failures++; return -1; }
    uint64_t h = 0;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (fread(&h, 8, 1, f) != 1 || size < 8 || h > (uint64_t)size - 8 || ((uint64_t)size - 8 - h) % 4) {
        fclose(f); printf("FAIL: %s: bad safetensors header\n", path); failures++; return -1;
    }
    m->nhead = (size_t)h;
    m->n = ((size_t)size - 8 - m->nhead) / 4;
    m->head = malloc(m->nhead + 1);
    m->w = malloc(m->n * 4 + 4);
    if (!m->head || !m->w || fread(m->head, 1, m->nhead, f) != m->nhead || fread(m->w, 4, m->n, f) != m->n) {
        fclose(f); printf("FAIL: %s: short read\n", path); failures++; return -1;
    }
    fclose(f);
    return 0;
}

static inline void unload(Model *m) { free(m->head); free(m->w); memset(m, 0, sizeof *m); }

/* max |a − b| over the weights; -1 when the layouts differ */
static inline double maxdiff(const Model *a, const Model *b) {
    if (a->nhead != b->nhead || a->n != b->n || memcmp(a->head, b->head, a->nhead)) return -1;
    double d = 0;
    for (size_t i = 0; i < a->n; i++) {
        double x = fabs((double)a->w[i] - b->w[i]);
        if (!(x <= d)) d = x;   /* NaN wins */
    }
    return d;
}

#endif
