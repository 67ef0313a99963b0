/* quickstart.c — the kit in 100 lines: a pretend training loop that allocates and frees tagged host
   buffers inside nested scopes, on several threads, writes a log and prints the peaks per category.

   It computes nothing; the real trainers (train_vanilla, train_dpsgd, ...) show the kit on a LLaMA.

       build/quickstart [log]        (default: quickstart.log)
       build/dpmem-report quickstart.log */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 4, STEPS = 3, WORKERS = 3 };
static const size_t DIM = 256 * 1024; /* floats per layer weight: 1 MiB */

static float *tagged_alloc(size_t n, const char *tag) {
    float *p = (float *)calloc(n, sizeof *p);
    if (!p) { fprintf(stderr, "quickstart: out of memory for %s\n", tag); exit(1); }
    DPMEM_TAG_ALLOC(p, n * sizeof *p, tag);
    return p;
}
static void tagged_free(float *p) { DPMEM_TAG_FREE(p); free(p); }

/* A worker thread, as a data loader would be: its own scopes, its own buffers. */
static void *loader(void *arg) {
    int id = (int)(intptr_t)arg;
    char name[32], tag[64];
    snprintf(name, sizeof name, "loader%d", id);
    dpmem_thread_name(name);
    for (int s = 0; s < STEPS; s++) {
        DPMEM_SCOPE("data");
        snprintf(tag, sizeof tag, "input/batch.%d", id);
        float *batch = tagged_alloc(DIM / 4, tag);
        tagged_free(batch);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: quickstart [LOG]   (writes the dpmem log LOG, default quickstart.log)\n");
        return 0;
    }
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {   /* never a log named "--bogus" */
        fprintf(stderr, "quickstart: %s '%s' (usage: quickstart [LOG])\n", argc > 2 ? "one log name at most, got also" : "unknown option",
                argc > 2 ? argv[2] : argv[1]);
        return 2;
    }
    const char *log = argc > 1 ? argv[1] : "quickstart.log";
    if (dpmem_open(log) != 0) return 1;
    dpmem_meta("run", "quickstart");
    dpmem_meta_int("config.layers", LAYERS);

    float *params[LAYERS], *grads[LAYERS], *adam[LAYERS];
    {
        DPMEM_SCOPE("model_creation");
        char tag[64];
        for (int l = 0; l < LAYERS; l++) {
            snprintf(tag, sizeof tag, "params/layers.%d.weight", l);    params[l] = tagged_alloc(DIM, tag);
            snprintf(tag, sizeof tag, "grads/layers.%d.weight", l);     grads[l] = tagged_alloc(DIM, tag);
            snprintf(tag, sizeof tag, "optimizer/layers.%d.m_v", l);    adam[l] = tagged_alloc(2 * DIM, tag);
        }
    }
    dpmem_snapshot("after_model_creation");

    pthread_t th[WORKERS];
    for (int w = 0; w < WORKERS; w++) pthread_create(&th[w], NULL, loader, (void *)(intptr_t)w);

    for (int step = 0; step < STEPS; step++) {
        DPMEM_SCOPE("step");
        float *acts[LAYERS];
        {
            DPMEM_SCOPE("forward");
            char tag[64];
            for (int l = 0; l < LAYERS; l++) {
                snprintf(tag, sizeof tag, "activations/layers.%d.hidden", l);
                acts[l] = tagged_alloc(2 * DIM, tag);
            }
        }
        {
            DPMEM_SCOPE("backward");
            for (int l = LAYERS - 1; l >= 0; l--) {
                DPMEM_SCOPE("layer_backward");
                float *tmp = tagged_alloc(DIM, "workspace/grad_tmp");
                for (size_t i = 0; i < DIM; i += 4096) grads[l][i] += tmp[i] + acts[l][i];
                tagged_free(tmp);
                tagged_free(acts[l]);   /* activations are freed as backward walks down */
            }
        }
        { DPMEM_SCOPE("optimizer_step"); for (int l = 0; l < LAYERS; l++) adam[l][0] += grads[l][0]; }
    }
    for (int w = 0; w < WORKERS; w++) pthread_join(th[w], NULL);
    dpmem_snapshot("end");

    printf("quickstart: log written to %s\n", log);
    printf("peak tagged bytes: %.2f MiB; at that moment, by category:\n", (double)dpmem_peak_bytes(NULL) / 1048576.0);
    printf("  %-14s %12s %12s\n", "category", "at peak MiB", "own peak MiB");
    for (int i = 0; i < dpmem_category_count(); i++) {
        const char *c = dpmem_category_name(i);
        printf("  %-14s %12.2f %12.2f\n", c, (double)dpmem_bytes_at_peak(c) / 1048576.0, (double)dpmem_peak_bytes(c) / 1048576.0);
    }
    for (int l = 0; l < LAYERS; l++) { tagged_free(params[l]); tagged_free(grads[l]); tagged_free(adam[l]); }
    dpmem_close();
    return 0;
}
