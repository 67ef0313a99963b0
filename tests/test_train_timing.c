/* test_train_timing.c — where the trainer's closing numbers come from on a GPU, and its MFU, without a GPU.
   1. TrainGpuTime (samples/llama/train_gpu_time.c): scope GPU times given in the order the kit reads them
      back become exact rows: phases directly inside "step" summed (two forwards), "clip" inside
      "backward" counted as clip and taken out of the backward, other scopes (recompute, scopes
      outside any step) ignored, the step's own time last; rows past the cap counted, not kept.
   2. The phase table's source switch, end to end: train_run on the tiny model with the kit's GPU
      timing running on the simulated GPU (tests/test_cuda_fakert.c linked in place of libcudart,
      dpmem_cuda.h's implementation here), a strategy putting 3 ms of GPU work in "noise" and 0.2 ms in
      each "clip" scope of the backward's hooks: with the timer hooks set (what samples/llama/train_cuda.c
      does on --device cuda) the table says GPU time and shows noise ≥ 3 ms and clip ≥ 0.2 ms per hook,
      where the host table (hooks unset) shows both near 0 (the launches are asynchronous).
   3. MFU (samples/llama/mfu.h): N and FLOPs per token against hand counts (tiny; llama3.2-1b: N is the
      published 1,235,814,400 parameters less its 67,584 norm weights), the peak table by device name
      and GEMM precision, unknown devices and precisions giving 0.
   The flag's parsing and errors: tests/test_llama_cli.sh. */
#define DPMEM_IMPLEMENTATION
#include "dpmem_cuda.h"
#include "llama/train.h"
#include "llama/mfu.h"
#include "check.h"
#include "tests/test_cuda_fakert.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const PH[TRAIN_PH_N] = { "data", "forward", "loss", "backward", "clip", "noise", "optimizer_step",
                                            "zero_grad", "allreduce" };

#define NEAR(a, b) (fabs((a) - (b)) < 1e-12)

static void test_rows(void) {
    TrainGpuTime g;
    CHECK(train_gpu_time_init(&g, 2, PH) == 0);
    const uint32_t step = dpmem_intern("step"), data = dpmem_intern("data"), fwd = dpmem_intern("forward"),
                   loss = dpmem_intern("loss"), bwd = dpmem_intern("backward"), clip = dpmem_intern("clip"),
                   noise = dpmem_intern("noise"), opt = dpmem_intern("optimizer_step"), zero = dpmem_intern("zero_grad"),
                   rec = dpmem_intern("recompute"), setup = dpmem_intern("dp_setup"), mc = dpmem_intern("model_creation");
    const uint64_t ms = 1000000;
    /* before the loop: model creation's data scope (top level), a forward inside something else */
    train_gpu_time_add(&g, data, 0, 9 * ms);
    train_gpu_time_add(&g, fwd, setup, 9 * ms);
    train_gpu_time_add(&g, clip, mc, 9 * ms);
    CHECK(g.n == 0);
    /* step 1, in end order */
    train_gpu_time_add(&g, data, step, 1 * ms);
    train_gpu_time_add(&g, fwd, step, 10 * ms);
    train_gpu_time_add(&g, loss, step, 2 * ms);
    train_gpu_time_add(&g, clip, bwd, 3 * ms);      /* a hook's norms, inside the backward */
    train_gpu_time_add(&g, rec, bwd, 4 * ms);       /* checkpointing's recompute: part of the backward */
    train_gpu_time_add(&g, bwd, step, 20 * ms);
    train_gpu_time_add(&g, clip, step, 5 * ms);     /* the factors and clipped sums after it */
    train_gpu_time_add(&g, fwd, step, 10 * ms);     /* two-pass: a second forward */
    train_gpu_time_add(&g, noise, step, 6 * ms);
    train_gpu_time_add(&g, opt, step, 7 * ms);
    train_gpu_time_add(&g, zero, step, ms / 2);
    train_gpu_time_add(&g, step, 0, 100 * ms);
    CHECK(g.n == 1);
    const double want1[TRAIN_PH_N + 1] = { 0.001, 0.020, 0.002, 0.017, 0.008, 0.006, 0.007, 0.0005, 0, 0.100 };
    for (int k = 0; k <= TRAIN_PH_N; k++) {
        if (!NEAR(g.rows[0][k], want1[k])) fprintf(stderr, "  step 1 column %d: %.9f, want %.9f\n", k, g.rows[0][k], want1[k]);
        CHECK(NEAR(g.rows[0][k], want1[k]));
    }
    /* step 2 starts from zero */
    train_gpu_time_add(&g, fwd, step, 4 * ms);
    train_gpu_time_add(&g, step, 0, 50 * ms);
    CHECK(g.n == 2 && NEAR(g.rows[1][TRAIN_PH_FORWARD], 0.004) && NEAR(g.rows[1][TRAIN_PH_BACKWARD], 0) &&
          NEAR(g.rows[1][TRAIN_PH_N], 0.050));
    /* past the cap: counted, not written */
    train_gpu_time_add(&g, step, 0, 70 * ms);
    CHECK(g.n == 3 && NEAR(g.rows[1][TRAIN_PH_N], 0.050));
    train_gpu_time_add(&g, 0, step, 70 * ms);       /* no name: nothing */
    CHECK(g.n == 3);
    train_gpu_time_free(&g);
    CHECK(g.rows == NULL);
}

/* ---- the source switch, end to end on the simulated GPU ---- */

#define CLIP_NS  200000ull
#define NOISE_NS 3000000ull
static long hook_calls;

static int weight_grad(void *user, const GradHookArgs *a) {
    (void)user; (void)a;
    hook_calls++;
    { DPMEM_SCOPE("clip"); fake_cuda_launch(CLIP_NS); }
    return 0;
}
static int physical_batch(void *user, TrainState *s) {
    GradHooks h = { .user = user, .weight_grad = weight_grad };
    return train_forward(s) || train_backward(s, &h) ? -1 : 0;
}
static int before_update(void *user, TrainState *s) {
    (void)user;
    const uint64_t t0 = dpmem_now_ns();
    { DPMEM_SCOPE("noise"); fake_cuda_launch(NOISE_NS); }
    train_phase_add(s, TRAIN_PH_NOISE, t0);
    return 0;
}

static void on_time(void *user, uint32_t name, uint32_t parent, uint64_t ts, uint64_t ns) {
    (void)ts;
    train_gpu_time_add(user, name, parent, ns);
}
static int timer_start(TrainGpuTime *g) {   /* what samples/llama/train_cuda.c installs */
    dpmem_cuda_flush();
    dpmem_cuda_on_gpu_time(g ? on_time : NULL, g);
    return 0;
}
static void timer_flush(void) { dpmem_cuda_flush(); }

/* Runs the trainer with stdout in a file; returns that output (malloc'd) or NULL. */
static char *run_captured(int steps) {
    TrainConfig c;
    config_defaults(&c);
    c.steps = steps; c.seq_len = 16; c.batch_size = 2; c.threads = 1;
    snprintf(c.device, sizeof c.device, "cpu");
    TrainStrategy st = { .name = "gpu-timing", .physical_batch = physical_batch, .before_update = before_update };
    char path[600];
    test_path(path, sizeof path, "train_timing.out");
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || fd < 0) { CHECK(0); return NULL; }
    dup2(fd, 1);
    close(fd);
    hook_calls = 0;
    int rc = train_run(&c, &st);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    CHECK(rc == 0);
    FILE *f = fopen(path, "r");
    if (!f) { CHECK(0); return NULL; }
    char *out = calloc(1, 1 << 16);
    size_t n = out ? fread(out, 1, (1 << 16) - 1, f) : 0;
    (void)n;
    fclose(f);
    unlink(path);
    return out;
}

/* The median column of a phase's row in the table (-1: not found). */
static double median_of(const char *out, const char *phase) {
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", phase);
    const char *p = out ? strstr(out, key) : NULL;
    double v = -1;
    if (p && sscanf(p + strlen(key), "%lf", &v) == 1) return v;
    return -1;
}

static void test_switch(void) {
    const int steps = 4;
    train_gpu_timer_start = NULL; train_gpu_timer_flush = NULL;
    char *host = run_captured(steps);
    const long hooks_per_step = hook_calls / steps;
    train_gpu_timer_start = timer_start; train_gpu_timer_flush = timer_flush;
    char *gpu = run_captured(steps);
    train_gpu_timer_start = NULL; train_gpu_timer_flush = NULL;
    if (!host || !gpu) { free(host); free(gpu); return; }
    const double hn = median_of(host, "noise"), hc = median_of(host, "clip"), gn = median_of(gpu, "noise"),
                 gc = median_of(gpu, "clip"), gs = median_of(gpu, "step"), go = median_of(gpu, "other"),
                 gb = median_of(gpu, "backward");
    printf("host table: noise %.3f ms, clip %.3f ms; GPU table: noise %.3f, clip %.3f (%ld hooks x %.1f ms), backward %.3f, "
           "other %.3f, step %.3f ms\n", hn, hc, gn, gc, hooks_per_step, CLIP_NS * 1e-6, gb, go, gs);
    CHECK(strstr(host, "\ntime per step (ms) over") != NULL && strstr(host, "of GPU time") == NULL);
    CHECK(strstr(gpu, "\nGPU time per step (ms; CUDA events around each scope") != NULL);
    CHECK(strstr(gpu, "ms of GPU time (steps 2..4") != NULL);
    CHECK(hn >= 0 && hn < 1.0 && hc >= 0 && hc < 0.05);                       /* launches: the host does not wait */
    CHECK(gn >= NOISE_NS * 1e-6 && gn < NOISE_NS * 1e-6 + 1.0);               /* 3 ms of GPU work, + launch gaps */
    CHECK(hooks_per_step == 21);                                               /* tiny: 21 weight tensors */
    CHECK(gc >= hooks_per_step * CLIP_NS * 1e-6 - 1e-3 && gc < hooks_per_step * CLIP_NS * 1e-6 + 2.0);
    CHECK(gb > -0.001 && go > -0.01 && gs >= gn + gc - 0.001);   /* (the simulated GPU: no host time in its clock) */
    if (check_failures) { fprintf(stderr, "--- host output:\n%s--- GPU output:\n%s", host, gpu); }
    free(host); free(gpu);
}

static void test_mfu(void) {
    TrainConfig c;
    config_defaults(&c);
    config_preset(&c, "tiny");   /* V 1000, C 64, L 2, NH 4 = NKV, F 256 */
    /* per block: q, k, v, o 4 x 64 x 64 = 16384; gate, up, down 3 x 64 x 256 = 49152; lm_head 1000 x 64 */
    CHECK(mfu_matmul_params(&c.model) == 2 * (16384 + 49152) + 64000);
    CHECK(mfu_attention_flops_per_token(&c.model, 64) == 6.0 * 2 * 4 * 16 * 64);
    CHECK(mfu_flops_per_token(&c.model, 64) == 6.0 * 195072 + 49152);
    c.model.tie_embeddings = 1;   /* the shared matrix counts once either way */
    CHECK(mfu_matmul_params(&c.model) == 195072);
    config_preset(&c, "llama3.2-1b");   /* GQA: k, v are 512 x 2048 */
    CHECK(mfu_matmul_params(&c.model) == 1235814400.0 - (16 * 2 + 1) * 2048);
    CHECK(mfu_matmul_params(&c.model) == 16 * (2.0 * 2048 * 2048 + 2.0 * 512 * 2048 + 3.0 * 8192 * 2048) + 128256.0 * 2048);
    config_preset(&c, "1b");
    CHECK(mfu_matmul_params(&c.model) == 1093140480.0);
    printf("1b at T=4096: %.4g FLOP per token (6N %.4g + attention %.4g)\n", mfu_flops_per_token(&c.model, 4096),
           6 * mfu_matmul_params(&c.model), mfu_attention_flops_per_token(&c.model, 4096));

    const char *src = NULL;
    static const struct { const char *name, *gemm; double want; } peaks[] = {
        { "NVIDIA H100 80GB HBM3", "bf16", 989 }, { "NVIDIA H100 80GB HBM3", "tf32", 494 }, { "NVIDIA H100 80GB HBM3", "fp32", 67 },
        { "NVIDIA H100 SXM5 80GB", "bf16", 989 }, { "NVIDIA H100 PCIe", "bf16", 756 }, { "NVIDIA H100 PCIe", "tf32", 378 },
        { "NVIDIA H200", "bf16", 989 }, { "NVIDIA H200", "tf32", 494 }, { "NVIDIA A100-SXM4-80GB", "bf16", 312 },
        { "NVIDIA A100-PCIE-40GB", "tf32", 156 }, { "NVIDIA A100 80GB PCIe", "fp32", 19.5 },
        { "NVIDIA H100 NVL", "bf16", 0 }, { "NVIDIA H200 NVL", "bf16", 0 }, { "NVIDIA GeForce RTX 4090", "bf16", 0 },
        { "NVIDIA H100 80GB HBM3", "fp8", 0 },
    };
    for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++) {
        const double got = mfu_peak_tflops(peaks[i].name, peaks[i].gemm, &src);
        if (got != peaks[i].want) fprintf(stderr, "  peak of %s, %s: %g, want %g\n", peaks[i].name, peaks[i].gemm, got, peaks[i].want);
        CHECK(got == peaks[i].want);
        CHECK((got > 0) == (src != NULL));
    }
    CHECK(mfu_peak_tflops(NULL, "bf16", &src) == 0 && src == NULL);
    mfu_peak_tflops("NVIDIA H100 80GB HBM3", "bf16", &src);
    CHECK(src && strstr(src, "H100 datasheet, SXM"));
}

int main(int argc, char **argv) {
    (void)argc;
    train_prefer_passive_omp(argv);
    CHECK(dpmem_cuda_init() == 0);       /* the simulated GPU */
    CHECK(dpmem_cuda_timing(1) == 0);
    test_rows();
    test_mfu();
    test_switch();
    return check_exit("test_train_timing");
}
