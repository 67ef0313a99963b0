/* bench_ckpt.c — how fast --init-from and --save are, against the memory system in the same run.

   A model of `--model small`'s shape with untied head (V 32000, C 512, L 4: 46M parameters) is saved
   as F32 and BF16 in a temporary directory, then loaded back with ckpt_load (warm page cache: this
   measures parsing, checks and conversion, not the disk). The baseline is a plain memcpy of the same
   fp32 bytes between two buffers of the process (the floor for filling the parameters). Best of 3.
   Printed: milliseconds, GB/s of parameter bytes written, ratio to the baseline.
   BENCH_CKPT_LAYERS=n changes the depth (default 4; 1 with DPMEM_BENCH_QUICK=1). Not a test: it asserts nothing but success. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

#include "llama/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int main(void) {
    LlamaConfig c;
    memset(&c, 0, sizeof c);
    snprintf(c.preset, sizeof c.preset, "bench");
    c.vocab_size = 32000; c.dim = 512; c.n_layers = getenv("BENCH_CKPT_LAYERS") ? atoi(getenv("BENCH_CKPT_LAYERS")) : (getenv("DPMEM_BENCH_QUICK") && !strcmp(getenv("DPMEM_BENCH_QUICK"), "1")) ? 1 : 4;
    c.n_heads = 8; c.n_kv_heads = 8; c.ffn_dim = llama_ffn_dim(512); c.rope_theta = 10000; c.norm_eps = 1e-6f;
    if (c.n_layers < 1) c.n_layers = 1;
    KBackend kb;
    kbackend_cpu_init(&kb, 0);
    LlamaModel m;
    if (llama_build(&m, &kb, &c, 1, 8, "sgd", 1, NULL, NULL) != 0) { printf("build failed: %s\n", kbackend_error(&kb)); return 1; }
    char root[] = "/tmp/bench_ckpt_XXXXXX", f32[64], bf16[64], err[CKPT_ERR];
    if (!mkdtemp(root)) return 1;
    snprintf(f32, sizeof f32, "%s/f32", root);
    snprintf(bf16, sizeof bf16, "%s/bf16", root);
    size_t bytes = m.bytes_params;
    double t_save32 = 1e30, t_save16 = 1e30, t_load32 = 1e30, t_load16 = 1e30, t_copy = 1e30;
    float *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) return 1;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ms();
        if (ckpt_save(&m, f32, ST_F32, NULL, err, sizeof err)) { printf("%s\n", err); return 1; }
        double t1 = now_ms();
        if (ckpt_save(&m, bf16, ST_BF16, NULL, err, sizeof err)) { printf("%s\n", err); return 1; }
        double t2 = now_ms();
        if (ckpt_load(&m, f32, err, sizeof err)) { printf("%s\n", err); return 1; }
        double t3 = now_ms();
        if (ckpt_load(&m, bf16, err, sizeof err)) { printf("%s\n", err); return 1; }
        double t4 = now_ms();
        memcpy(b, a, bytes);
        double t5 = now_ms();
        a[rep] = b[bytes / 8]; /* keep the copy observable */
        if (t1 - t0 < t_save32) t_save32 = t1 - t0;
        if (t2 - t1 < t_save16) t_save16 = t2 - t1;
        if (t3 - t2 < t_load32) t_load32 = t3 - t2;
        if (t4 - t3 < t_load16) t_load16 = t4 - t3;
        if (t5 - t4 < t_copy) t_copy = t5 - t4;
    }
    printf("checkpoints: %zu parameters (%.1f MB fp32), V=%d C=%d L=%d, warm page cache, best of 3\n", bytes / 4,
           bytes / 1e6, c.vocab_size, c.dim, c.n_layers);
    printf("  %-34s %10s %10s %12s\n", "operation", "ms", "GB/s", "x memcpy");
    struct { const char *name; double ms; } rows[] = {
        {"memcpy of the fp32 bytes (baseline)", t_copy}, {"ckpt_load from F32", t_load32},
        {"ckpt_load from BF16 (convert)", t_load16}, {"ckpt_save to F32", t_save32}, {"ckpt_save to BF16 (round)", t_save16},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("  %-34s %10.1f %10.2f %12.2f\n", rows[i].name, rows[i].ms, bytes / 1e6 / rows[i].ms, rows[i].ms / t_copy);
    free(a); free(b);
    llama_free(&m);
    kbackend_destroy(&kb);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : 1;
}
