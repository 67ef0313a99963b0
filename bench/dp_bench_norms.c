/* dp_bench_norms.c — `make bench` table for the per-sample norm kernels of one linear layer, on
   this machine's CPU: time and scratch memory of direct, ghost, flash and mixed norms and of the
   book-keeping clipped gradient, each as a ratio to the ordinary weight gradient dW = Gᵀ A of the
   same layer measured in the same run (what a non-DP step spends on that layer's weights), with the
   flop floor of the norm beside it: min(2T²(IC+OC), 2T·IC·OC) / (2T·IC·OC).

   Shapes: batch 4, T = 128, 512, 1024 (DPMEM_BENCH_QUICK=1: tiny at T = 128, 512 only), the square projection (C×C) and the FFN projection (C×F) of
   the "tiny" (C=64, F=256) and "small" (C=512, F=1536) presets. Not here: whole training steps (the
   trainer benchmark), GPU kernels. */
#include "dp_kernels.h"
#include "cpu/blas_core.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Median-free but stable enough: repeat until 0.1 s has passed (at least 3 runs), take the mean. */
#define TIME_IT(out, stmt) do { int reps_ = 0; double t0_ = now(), el_;                               \
                                do { stmt; reps_++; el_ = now() - t0_; } while (el_ < 0.1 || reps_ < 3); \
                                out = el_ / reps_; } while (0)

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "dp_bench_norms: out of memory (%zu bytes)\n", n); exit(1); }
    return p;
}

int main(int argc, char **argv) {
    (void)argc;
    if (blas_core_prefer()) {   /* OpenBLAS's own kernels for this CPU, as the trainers (cpu/blas_core.h) */
        execv("/proc/self/exe", argv);
        blas_core_unprefer();
    }
    const int B = 4, R = 128;
    const int quick = getenv("DPMEM_BENCH_QUICK") && !strcmp(getenv("DPMEM_BENCH_QUICK"), "1");   /* make bench QUICK=1 */
    const struct { const char *model; int C, F; } models[] = { { "tiny", 64, 256 }, { "small", 512, 1536 } };
    const int Ts[] = { 128, 512, 1024 };
    char from[160];
    printf("per-sample norms of one linear layer, batch %d, flash tile %d; ratios to the weight gradient Gᵀ A; OpenBLAS core %s (%s)\n", B, R,
           blas_core_name(), blas_core_source(from, sizeof from));
    printf("%-6s %5s %9s %9s | %8s %7s %7s %7s %7s %7s | %9s %9s %9s | %8s %8s\n", "model", "T", "layer",
           "dW ms", "floor", "direct", "ghost", "flash", "mixed", "bk", "psg MB", "gram MB", "tile KB",
           "ghost IO", "flash IO");
    for (int m = 0; m < (quick ? 1 : 2); m++)
        for (int ti = 0; ti < (quick ? 2 : 3); ti++)
            for (int layer = 0; layer < 2; layer++) {
                int T = Ts[ti], IC = models[m].C, OC = layer ? models[m].F : models[m].C;
                size_t na = (size_t)B * T * IC, ng = (size_t)B * T * OC;
                float *a = xmalloc(na * 4), *g = xmalloc(ng * 4), *dw = xmalloc((size_t)IC * OC * 4);
                for (size_t k = 0; k < na; k++) a[k] = (float)((k * 2654435761u) % 1000) / 1000.0f - 0.5f;
                for (size_t k = 0; k < ng; k++) g[k] = (float)((k * 40503u) % 1000) / 1000.0f - 0.5f;
                float *psg = xmalloc(dp_linear_direct_floats(B, IC, OC) * 4);
                float *gram = xmalloc(dp_linear_ghost_floats(B, T) * 4);
                float *tile = xmalloc(dp_linear_flash_floats(B, T, R, 1) * 4);
                float norm2[4] = { 0 }, c[4] = { 1, 0.5f, 0.25f, 1 };
                DpIO iog = { 0, 0 }, iof = { 0, 0 };
                double t_dw, t_direct, t_ghost, t_flash, t_bk;
                TIME_IT(t_dw, cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, B * T, 1.0f, g, OC, a, IC, 1.0f, dw, IC));
                TIME_IT(t_direct, dp_linear_norms_direct(norm2, psg, a, g, B, T, IC, OC, NULL));
                TIME_IT(t_ghost, dp_linear_norms_ghost(norm2, gram, a, g, B, T, IC, OC, NULL));
                TIME_IT(t_flash, dp_linear_norms_flash(norm2, tile, a, g, B, T, IC, OC, R, 1, NULL));
                TIME_IT(t_bk, dp_linear_clipped_grad_bk(dw, a, g, c, B, T, IC, OC));
                dp_linear_norms_ghost(norm2, gram, a, g, B, T, IC, OC, &iog);
                dp_linear_norms_flash(norm2, tile, a, g, B, T, IC, OC, R, 1, &iof);
                int gram_path = dp_mixed_uses_gram(B, T, IC, OC, 0, 4);
                double t_mixed = gram_path ? t_flash : t_direct;
                double fl_w = 2.0 * T * IC * OC, fl_g = 2.0 * T * T * (IC + OC);
                char name[32];
                snprintf(name, sizeof name, "%dx%d", IC, OC);
                printf("%-6s %5d %9s %9.3f | %8.2f %7.2f %7.2f %7.2f %6.2f%s %7.2f | %9.2f %9.2f %9.1f | %7.1fM %7.1fM\n",
                       models[m].model, T, name, t_dw * 1e3, (fl_g < fl_w ? fl_g : fl_w) / fl_w,
                       t_direct / t_dw, t_ghost / t_dw, t_flash / t_dw, t_mixed / t_dw, gram_path ? "g" : "d",
                       t_bk / t_dw, dp_linear_direct_floats(B, IC, OC) * 4 / 1e6,
                       dp_linear_ghost_floats(B, T) * 4 / 1e6, dp_linear_flash_floats(B, T, R, 1) * 4 / 1e3,
                       (iog.read + iog.written) / 1e6, (iof.read + iof.written) / 1e6);
                if (norm2[0] != norm2[0]) printf("(NaN norm)\n");   /* keeps the results alive */
                free(a); free(g); free(dw); free(psg); free(gram); free(tile);
            }
    printf("mixed: g = Gram path (flash) chosen, d = direct (dp_mixed_uses_gram: flops + bytes, not kept); IO = bytes read + written\n");
    return 0;
}
