/* showcase_logs.c — showcase-logs DIR: writes DIR/vanilla.log, DIR/dpsgd.log and DIR/ghost.log,
   synthetic logs of a GPU run shaped like the samples' (a 12-layer, 768-wide LLaMA, T = 1024, logical
   batch 8 in physical batches of 4, fp32 with Adam, two steps) with realistic sizes, for the
   pictures of docs/tools/ (`make tools-pictures`): no GPU is needed to make them, and they do not
   change from one machine to the next.

   Realistic means what a CUDA run shows: device_used (cudaMemGetInfo, at each snapshot) is never
   below what the kit has live on the device: it is that plus the CUDA context and cuBLAS (526 MiB)
   plus cuBLAS's workspace once the first matrix product ran (32 MiB). The run snapshots after each
   layer's forward and backward (as one does to watch the device), so the straight segments between
   two samples stay above the stacked tagged bytes: the context (558 MiB) is more than any one
   allocation or free between two samples. The logs say they are synthetic (META config.data) and
   carry no date.

   Not a test fixture (tests/test_tools_common.h has those, with hand-computable numbers). */
#include <stdio.h>
#include <string.h>

#include "read/synthlog.h"

#define MiB (1024ull * 1024ull)
#define MS 1000000ull
#define T0 1000000000ull
#define LAYERS 12

typedef struct {
    SynthLog S;
    uint64_t t;               /* now, ns */
    uint64_t live_dev;        /* tagged device bytes live */
    uint64_t ctx;             /* what the device holds besides: context, cuBLAS */
    const char *method;
} Run;

static void alloc(Run *r, const char *tag, uint64_t addr, uint64_t bytes, uint64_t dt) {
    r->t += dt;
    synth_alloc(&r->S, 1, r->t, tag, 1, addr, bytes);
    r->live_dev += bytes;
}
static void release(Run *r, const char *tag, uint64_t addr, uint64_t bytes, uint64_t dt) {
    r->t += dt;
    synth_free(&r->S, 1, r->t, tag, 1, addr, bytes);
    r->live_dev -= bytes;
}
static void snapshot(Run *r, const char *label) {
    r->t += MS / 10;
    /* the categories a snapshot lists are for the report; the picture uses device_used */
    synth_snapshot(&r->S, 1, r->t, label, r->live_dev + r->ctx, 80ull * 1024 * MiB, r->live_dev, 0, NULL, NULL);
}

static void one_run(const char *path, const char *method) {
    Run r = { .t = T0, .ctx = 526 * MiB, .method = method };
    synth_init(&r.S, 65536, T0);
    synth_put64(r.S.buf + 32, 0);   /* no wall-clock start: a synthetic log has no date to show */
    synth_thread(&r.S, 1, T0, 4242, "main");
    synth_meta(&r.S, 1, T0, "run", method);
    synth_meta(&r.S, 1, T0, "config.data", "synthetic showcase (tools/showcase_logs.c)");
    synth_meta(&r.S, 1, T0, "config.model", "small");
    synth_meta(&r.S, 1, T0, "config.dim", "768");
    synth_meta(&r.S, 1, T0, "config.n_layers", "12");
    synth_meta(&r.S, 1, T0, "config.seq_len", "1024");
    synth_meta(&r.S, 1, T0, "config.precision", "fp32");
    synth_meta(&r.S, 1, T0, "config.device", "cuda");
    int dp = strcmp(method, "vanilla") != 0;
    if (dp) { synth_meta(&r.S, 1, T0, "dp.logical_batch", "8"); synth_meta(&r.S, 1, T0, "dp.physical_batch", "4"); }
    else { synth_meta(&r.S, 1, T0, "config.batch_size", "4"); synth_meta(&r.S, 1, T0, "config.grad_accum", "2"); }
    const uint64_t layer_params = 28 * MiB, embed = 98 * MiB, act = 240 * MiB, logits = 500 * MiB;
    char tag[96];
    /* the model: parameters, gradients, Adam's two moments */
    r.t += 5 * MS;
    synth_begin(&r.S, 1, r.t, "model_creation");
    alloc(&r, "params/embed_tokens", 0x100000, embed, MS);
    for (int l = 0; l < LAYERS; l++) { snprintf(tag, sizeof tag, "params/layers.%d", l); alloc(&r, tag, 0x200000 + (uint64_t)l * 0x1000, layer_params, 2 * MS); }
    alloc(&r, "grads/all", 0x300000, embed + LAYERS * layer_params, 3 * MS);
    alloc(&r, "optimizer/exp_avg", 0x400000, embed + LAYERS * layer_params, 3 * MS);
    alloc(&r, "optimizer/exp_avg_sq", 0x500000, embed + LAYERS * layer_params, 3 * MS);
    r.t += 2 * MS;
    synth_end(&r.S, 1, r.t, "model_creation");
    snapshot(&r, "after model creation");
    for (int step = 0; step < 2; step++) {
        r.t += 2 * MS;
        synth_begin(&r.S, 1, r.t, "step");
        for (int micro = 0; micro < 2; micro++) {
            r.t += MS;
            synth_begin(&r.S, 1, r.t, "data");
            alloc(&r, "input/batch", 0x600000, 32 * 1024, MS / 2);
            synth_end(&r.S, 1, r.t += MS / 2, "data");
            synth_begin(&r.S, 1, r.t += MS / 10, "forward");
            if (step == 0 && micro == 0) r.ctx += 32 * MiB;   /* cuBLAS's workspace, from the first GEMM on */
            for (int l = 0; l < LAYERS; l++) {
                snprintf(tag, sizeof tag, "activations/layers.%d", l);
                alloc(&r, tag, 0x700000 + (uint64_t)l * 0x1000, act, 7 * MS);
                snapshot(&r, "layer");
            }
            alloc(&r, "activations/logits", 0x800000, logits, 6 * MS);
            snapshot(&r, "logits");
            synth_end(&r.S, 1, r.t += MS, "forward");
            synth_begin(&r.S, 1, r.t += MS / 10, "backward");
            alloc(&r, "workspace/backward.d_h", 0x900000, 96 * MiB, MS);
            snapshot(&r, "loss grad");
            if (dp) {   /* the lm_head's clipping comes first, while the logits are still live */
                r.t += 2 * MS;
                synth_begin(&r.S, 1, r.t, "clip");
                if (!strcmp(method, "dpsgd")) { alloc(&r, "per_sample_grads/lm_head", 0xA00000, 4 * embed, MS); snapshot(&r, "clip"); release(&r, "per_sample_grads/lm_head", 0xA00000, 4 * embed, 3 * MS); }
                else { alloc(&r, "ghost/lm_head.gram", 0xB00000, 64 * MiB, MS); snapshot(&r, "clip"); release(&r, "ghost/lm_head.gram", 0xB00000, 64 * MiB, 2 * MS); }
                synth_end(&r.S, 1, r.t += MS / 2, "clip");
            }
            release(&r, "activations/logits", 0x800000, logits, 5 * MS);
            snapshot(&r, "logits freed");
            for (int l = LAYERS - 1; l >= 0; l--) {
                r.t += 4 * MS;
                if (dp) {   /* each layer's clipping inside the backward: per-sample gradients or Gram matrices */
                    synth_begin(&r.S, 1, r.t, "clip");
                    if (!strcmp(method, "dpsgd")) { snprintf(tag, sizeof tag, "per_sample_grads/layers.%d", l); alloc(&r, tag, 0xA00000, 4 * layer_params, MS); release(&r, tag, 0xA00000, 4 * layer_params, 2 * MS); }
                    else { snprintf(tag, sizeof tag, "ghost/layers.%d.gram", l); alloc(&r, tag, 0xB00000, 64 * MiB, MS); release(&r, tag, 0xB00000, 64 * MiB, MS); }
                    synth_end(&r.S, 1, r.t += MS / 2, "clip");
                }
                snprintf(tag, sizeof tag, "activations/layers.%d", l);
                release(&r, tag, 0x700000 + (uint64_t)l * 0x1000, act, 2 * MS);
                snapshot(&r, "layer");
            }
            release(&r, "workspace/backward.d_h", 0x900000, 96 * MiB, MS);
            release(&r, "input/batch", 0x600000, 32 * 1024, MS / 2);
            synth_end(&r.S, 1, r.t += MS, "backward");
        }
        if (dp) {
            synth_begin(&r.S, 1, r.t += MS, "noise");
            alloc(&r, "noise/gaussian", 0xC00000, embed + LAYERS * layer_params, 2 * MS);
            release(&r, "noise/gaussian", 0xC00000, embed + LAYERS * layer_params, 3 * MS);
            synth_end(&r.S, 1, r.t += MS, "noise");
        }
        synth_begin(&r.S, 1, r.t += MS, "optimizer_step");
        synth_end(&r.S, 1, r.t += 6 * MS, "optimizer_step");
        synth_end(&r.S, 1, r.t += MS, "step");
        snprintf(tag, sizeof tag, "after step %d", step + 1);
        snapshot(&r, tag);
    }
    synth_close(&r.S, 1, r.t + MS);
    synth_save(&r.S, path);
    synth_release(&r.S);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: showcase-logs DIR\n"); return 2; }
    static const char *const methods[3] = { "vanilla", "dpsgd", "ghost" };
    for (int i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.log", argv[1], methods[i]);
        one_run(path, methods[i]);
    }
    return 0;
}
