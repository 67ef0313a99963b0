/* train_gpu_time.c — the closing table's rows from the GPU times of the loop's scopes (see train.h:
   TrainGpuTime for the rule). Called from dpmem_cuda.h's read-back with its lock held: only
   arithmetic here, no dpmem call. Not here: the CUDA side (samples/llama/train_cuda.c forwards the kit's
   callback), the table itself (train.c). */
#include "train.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int (*train_gpu_timer_start)(TrainGpuTime *g) = NULL;
void (*train_gpu_timer_flush)(void) = NULL;
const char *(*train_device_name)(void) = NULL;
const char *(*train_device_gemm)(const TrainConfig *c) = NULL;

int train_gpu_time_init(TrainGpuTime *g, int cap, const char *const names[TRAIN_PH_N]) {
    memset(g, 0, sizeof *g);
    g->rows = cap > 0 ? calloc((size_t)cap, sizeof *g->rows) : NULL;
    if (cap > 0 && !g->rows) { fprintf(stderr, "error: out of host memory for the GPU step times\n"); return -1; }
    g->cap = cap;
    g->step_id = dpmem_intern("step");
    for (int ph = 0; ph < TRAIN_PH_N; ph++) g->ids[ph] = dpmem_intern(names[ph]);
    g->backward_id = g->ids[TRAIN_PH_BACKWARD];
    g->clip_id = g->ids[TRAIN_PH_CLIP];
    return 0;
}

void train_gpu_time_add(TrainGpuTime *g, uint32_t name_id, uint32_t parent_id, uint64_t gpu_ns) {
    const double sec = (double)gpu_ns * 1e-9;
    if (!name_id) return;
    if (name_id == g->step_id) {
        if (g->n < g->cap) {
            memcpy(g->rows[g->n], g->cur, sizeof g->cur);
            g->rows[g->n][TRAIN_PH_N] = sec;
        }
        g->n++;
        memset(g->cur, 0, sizeof g->cur);
        return;
    }
    const int in_step = parent_id != 0 && parent_id == g->step_id;
    const int clip_in_backward = name_id == g->clip_id && parent_id != 0 && parent_id == g->backward_id;
    if (!in_step && !clip_in_backward) return;   /* outside the loop's steps, or an op's own scope */
    for (int ph = 0; ph < TRAIN_PH_N; ph++) {
        if (g->ids[ph] != name_id) continue;
        g->cur[ph] += sec;
        if (clip_in_backward) g->cur[TRAIN_PH_BACKWARD] -= sec;   /* (the backward's own time arrives after) */
        return;
    }
}

void train_gpu_time_free(TrainGpuTime *g) {
    free(g->rows);
    memset(g, 0, sizeof *g);
}
