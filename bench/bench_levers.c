/* bench_levers.c — `make bench` table of the two memory levers on this machine's CPU: step time and
   peak tagged memory of --precision bf16 against fp32 and of --checkpoint-activations against
   keeping every activation, for vanilla, flash+bk and ghost+twopass, each configuration as a ratio to
   the same method's fp32 run without checkpointing measured in the same process.

   Model: the small preset cut to 2 layers and an 8000-token vocabulary, B = 4, T = 256 (a CPU step
   of a fraction of a second). Rounds are interleaved: round r runs every (method, configuration)
   once, 3 steps each, and a configuration's time is the median over the rounds of its steady step
   (from the 2nd step's start to the run's end, over 2 steps), wall and process CPU time; a slow
   spell of a shared machine then moves all configurations of a round alike. The machine's load
   average is printed before and after. Peaks are exact (tagged bytes), the same every round.

   This CPU has no bf16 arithmetic in its OpenBLAS (no cblas_sbgemm: bf16 GEMM operands are widened
   to fp32, docs/LEVERS.md), so bf16 costs time here; a GPU's tensor cores make it faster. The
   memory ratios are what the levers save on this model; docs/LEVERS.md has the planned ones at
   Llama-3.2 sizes.
   Usage: bench_levers [--quick] (--quick or DPMEM_BENCH_QUICK=1: 1 round at T = 128, indicative
   only; default 5 rounds at 256).
   Not here: the plan figures (docs/LEVERS.md, from tools/run_experiments --plan), GPU runs. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"
#include "timed_strategy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { STEPS = 3, MAX_ROUNDS = 9, NMETH = 3, NCONF = 4 };
static const char *METHODS[NMETH] = { "vanilla", "flash+bk", "ghost+twopass" };
static const char *CONFS[NCONF] = { "fp32", "bf16", "fp32+ckpt", "bf16+ckpt" };
static int seq_len = 256;   /* 128 in the quick run */

/* One run: the steady step's wall and CPU seconds, the peak tagged bytes. */
static int measure(int method, int conf, double *wall, double *cpu, size_t *peak) {
    TrainConfig cfg;
    config_defaults(&cfg);
    config_preset(&cfg, "small");
    cfg.model.n_layers = 2; cfg.model.vocab_size = 8000;
    cfg.seq_len = seq_len; cfg.batch_size = 4; cfg.steps = STEPS; cfg.quiet = 2; cfg.run_name = "bench_levers";
    snprintf(cfg.device, sizeof cfg.device, "cpu");
    cfg.model.precision = conf & 1;
    cfg.model.checkpoint_activations = conf >> 1;
    DpConfig dp;
    if (method > 0)
        dp_config_defaults(&dp, method == 1 ? DP_NORM_FLASH : DP_NORM_GHOST, method == 1 ? DP_CLIP_BK : DP_CLIP_TWOPASS);
    Timed w;
    if (timed_run(&w, &cfg, method > 0 ? &dp : NULL, peak) != 0 || w.n < STEPS + 1) return -1;
    *wall = (double)(w.t[w.n - 1] - w.t[1]) * 1e-9 / (STEPS - 1);
    *cpu = (w.cpu[w.n - 1] - w.cpu[1]) / (STEPS - 1);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void load(const char *when) {
    char buf[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (!fgets(buf, sizeof buf, f)) snprintf(buf, sizeof buf, "?\n"); fclose(f); }
    printf("load average %s: %s", when, buf);
}

int main(int argc, char **argv) {
    train_prefer_passive_omp(argv);
    const int quick = (argc > 1 && !strcmp(argv[1], "--quick")) || (getenv("DPMEM_BENCH_QUICK") && !strcmp(getenv("DPMEM_BENCH_QUICK"), "1"));
    const int rounds = quick ? 1 : 5;
    if (quick) seq_len = 128;
    static double wall[NMETH][NCONF][MAX_ROUNDS], cpu[NMETH][NCONF][MAX_ROUNDS];
    size_t peak[NMETH][NCONF];
    int failed = 0;
    printf("The levers on the CPU: small preset with 2 layers, vocabulary 8000, B=4, T=%d, %d OpenMP threads; "
           "%d interleaved rounds, medians; ratios to the same method's fp32 run without checkpointing\n",
           seq_len, kcpu_max_threads(), rounds);
    printf("(bf16 GEMMs here: %s)\n", kcpu_have_sbgemm() ? "OpenBLAS cblas_sbgemm" : "operands widened to fp32 (this OpenBLAS has no cblas_sbgemm)");
    load("before");
    {   /* warm-up: the process's first run pays for OpenBLAS/OpenMP start-up */
        double a, b;
        size_t c;
        measure(0, 0, &a, &b, &c);
    }
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < NMETH; m++)
            for (int c = 0; c < NCONF; c++)
                if (measure(m, c, &wall[m][c][r], &cpu[m][c][r], &peak[m][c])) {
                    printf("%s %s failed: %s\n", METHODS[m], CONFS[c], "see the error above");
                    failed = 1;
                    wall[m][c][r] = cpu[m][c][r] = NAN;
                }
    printf("%-14s %-10s | %8s %7s | %8s %7s | %10s %7s\n", "method", "config", "wall ms", "x fp32", "cpu ms", "x fp32",
           "peak MiB", "x fp32");
    for (int m = 0; m < NMETH; m++) {
        double w0 = median(wall[m][0], rounds), c0 = median(cpu[m][0], rounds);
        for (int c = 0; c < NCONF; c++) {
            double w = median(wall[m][c], rounds), cp = median(cpu[m][c], rounds);
            printf("%-14s %-10s | %8.1f %7.2f | %8.1f %7.2f | %10.2f %7.3f\n", METHODS[m], CONFS[c], w * 1e3, w / w0, cp * 1e3,
                   cp / c0, peak[m][c] / 1048576.0, (double)peak[m][c] / (double)peak[m][0]);
        }
        /* each lever alone, and checkpointing on top of bf16 */
        printf("%-14s %-10s | bf16 %.2fx time, %.3fx peak; checkpointing %.2fx time, %.3fx peak (fp32), %.3fx peak (bf16)\n",
               METHODS[m], "levers", median(wall[m][1], rounds) / w0, (double)peak[m][1] / peak[m][0],
               median(wall[m][2], rounds) / w0, (double)peak[m][2] / peak[m][0], (double)peak[m][3] / peak[m][1]);
    }
    load("after");
    return failed;
}
