/* bench_noise.c — the CPU noise pass per coordinate: the Philox stream (noise_privatize, the default) against
   the secure one (secure_noise_privatize, --secure-noise: ChaCha20, a 128-bit uniform, the grid), in the same
   run and interleaved round by round (the machine may be shared: each round times both back to back, and
   the ratio is taken per round), on one thread and on every OpenMP thread. A table: ns per coordinate,
   best and median of the rounds, and the secure pass as a multiple of Philox's.
   DPMEM_BENCH_QUICK=1: 2^20 coordinates and 3 rounds (else 2^23 and 7). Not here: the GPU
   (bench_cuda_kernels), a training step (dp_train). */
#include "noise.h"
#include "secure_noise.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void row(const char *what, float *g, size_t n, int rounds, int threads) {
    const SecureKey key = {{ 1, 2, 3, 4, 5, 6, 7, 8 }};
    double ph[16], se[16], ratio[16];
    omp_set_num_threads(threads);
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        noise_privatize(g, n, 1.0, 1.0, 4.0, 1234, (uint64_t)r, 0);
        double t1 = now_s();
        secure_noise_privatize(g, n, 1.0, 1.0, 4.0, &key, (uint64_t)r, 0);
        double t2 = now_s();
        ph[r] = (t1 - t0) / n * 1e9;
        se[r] = (t2 - t1) / n * 1e9;
        ratio[r] = se[r] / ph[r];
    }
    qsort(ph, (size_t)rounds, sizeof *ph, cmp_double);
    qsort(se, (size_t)rounds, sizeof *se, cmp_double);
    qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_double);
    printf("| %s, %d thread%s | %.2f / %.2f | %.2f / %.2f | %.2fx (%.2fx .. %.2fx) |\n", what, threads, threads == 1 ? "" : "s",
           ph[0], ph[rounds / 2], se[0], se[rounds / 2], ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
}

int main(void) {
    const int quick = getenv("DPMEM_BENCH_QUICK") && *getenv("DPMEM_BENCH_QUICK") == '1';
    const size_t n = quick ? (size_t)1 << 20 : (size_t)1 << 23;
    const int rounds = quick ? 3 : 7;
    float *g = calloc(n, sizeof *g);
    if (!g) { fprintf(stderr, "bench_noise: out of memory\n"); return 1; }
    double load[3] = { 0, 0, 0 };
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1; fclose(f); }
    printf("noise pass per coordinate (privatize: noise + 1/L), %zu coordinates, %d rounds interleaved; load average %.2f\n",
           n, rounds, load[0]);
    printf("| pass | Philox ns/coord best / median | secure ns/coord best / median | secure / Philox, median (min .. max) |\n");
    printf("|---|---|---|---|\n");
    secure_noise_privatize(g, n, 1.0, 1.0, 4.0, &(SecureKey){{ 0 }}, 99, 0);   /* warm: pages faulted in */
    row("privatize", g, n, rounds, 1);
    const int all = omp_get_num_procs();
    if (all > 1) row("privatize", g, n, rounds, all);
    free(g);
    return 0;
}
