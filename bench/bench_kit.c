/* bench_kit.c — what the kit costs per operation, as ratios to the floor measured in the same run.

   The floor is two reads of the fastest clock (a scope needs a begin and an end timestamp): rdtsc on
   x86-64. Each figure is the median of several repetitions of a loop, in ns per operation; the loops
   are bursts whose log stays in the page cache, and one row repeats alloc+free 20 times longer to show
   what sustained logging at ~1 GB/s costs once the kernel throttles the writer to the disk's pace.
   Goals (the issue's): scope with logging on <= 2x floor, with logging off <= 5 ns, tagged
   alloc+free with logging on <= 60 ns. A benchmark, not a test: it prints, it does not fail. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REPS = 7 };
static long N = 200000;   /* a burst: the log (13 MB per run) stays in the page cache */
static volatile uint64_t sink;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
typedef void (*BodyFn)(long n);
static double median_ns(BodyFn body) {
    double t[REPS];
    body(N / 10); /* warm up: first touches, lazy init */
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        body(N);
        t[r] = (now_s() - t0) * 1e9 / (double)N;
    }
    qsort(t, REPS, sizeof *t, cmp_d);
    return t[REPS / 2];
}

static void floor_rdtsc(long n) {
    uint64_t s = 0;
#if defined(__x86_64__) || defined(__i386__)
    for (long i = 0; i < n; i++) { uint64_t a = __builtin_ia32_rdtsc(); uint64_t b = __builtin_ia32_rdtsc(); s += b - a; }
#else
    (void)n;
#endif
    sink = s;
}
static void floor_clock_gettime(long n) {
    uint64_t s = 0;
    struct timespec a, b;
    for (long i = 0; i < n; i++) { clock_gettime(CLOCK_MONOTONIC, &a); clock_gettime(CLOCK_MONOTONIC, &b); s += (uint64_t)(b.tv_nsec - a.tv_nsec); }
    sink = s;
}
static void nvtx_bare(long n) {
#ifndef DPMEM_NO_NVTX
    for (long i = 0; i < n; i++) { nvtxRangePushA("bench"); nvtxRangePop(); }
#else
    (void)n;
#endif
}
static void scope(long n) {
    for (long i = 0; i < n; i++) { DPMEM_SCOPE("bench"); }
}
static char buffers[2][64];
static void alloc_free(long n) {
    for (long i = 0; i < n; i++) { dpmem_tag_alloc(buffers[0], 64, "activations/bench"); dpmem_tag_free(buffers[0]); }
}
static void *alloc_free_thread(void *arg) {
    char *b = (char *)arg;
    for (long i = 0; i < N; i++) { dpmem_tag_alloc(b, 64, "activations/bench"); dpmem_tag_free(b); }
    return NULL;
}
static void *scope_thread(void *arg) {
    (void)arg;
    for (long i = 0; i < N; i++) { DPMEM_SCOPE("bench"); }
    return NULL;
}
/* Two threads at once: wall time over N operations per thread. */
static double two_threads(void *(*fn)(void *)) {
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        pthread_t th[2];
        double t0 = now_s();
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, fn, buffers[i]);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        t[r] = (now_s() - t0) * 1e9 / (double)N;
    }
    qsort(t, REPS, sizeof *t, cmp_d);
    return t[REPS / 2];
}

int main(int argc, char **argv) {
    if (argc > 1) N = atol(argv[1]);
    else if (getenv("DPMEM_BENCH_QUICK") && !strcmp(getenv("DPMEM_BENCH_QUICK"), "1")) N = 50000;   /* make bench QUICK=1 */
    char path[512];
    const char *b = getenv("DPMEM_BUILD");
    snprintf(path, sizeof path, "%s/tmp/bench_kit.log", b && *b ? b : "build");

    double floor_tsc = median_ns(floor_rdtsc), floor_cg = median_ns(floor_clock_gettime);
#if defined(__x86_64__) || defined(__i386__)
    double floor = floor_tsc;
    const char *floor_name = "floor: 2 reads of rdtsc";
#else
    double floor = floor_cg;
    const char *floor_name = "floor: 2 reads of clock_gettime";
#endif
    double nvtx = median_ns(nvtx_bare);
    double scope_off = median_ns(scope);
    double alloc_off = median_ns(alloc_free);
    if (dpmem_open(path) != 0) return 1;
    double scope_on = median_ns(scope);
    double alloc_on = median_ns(alloc_free);
    double scope_2t = two_threads(scope_thread);
    double alloc_2t = two_threads(alloc_free_thread);
    /* Sustained: 20x longer, ~1 GB/s of log, where the kernel's writeback of dirty pages to the disk
       throttles the writer. Real trainers log far less than that; this shows the ceiling. */
    long burst = N; N *= 20;
    double alloc_sustained = median_ns(alloc_free);
    N = burst;
    dpmem_close();
    remove(path);

    printf("dpmem kit: ns per operation, median of %d runs of %ld (clock: %s)\n", REPS, N,
           dpmem__G.use_tsc ? "rdtsc" : "clock_gettime");
    printf("%-46s %9s %9s %s\n", "operation", "ns/op", "x floor", "goal");
    printf("%-46s %9.2f %9.2f\n", floor_name, floor, 1.0);
    printf("%-46s %9.2f %9.2f\n", "2 reads of clock_gettime(MONOTONIC)", floor_cg, floor_cg / floor);
    printf("%-46s %9.2f %9.2f\n", "nvtxRangePushA+Pop, no tool attached", nvtx, nvtx / floor);
    printf("%-46s %9.2f %9.2f %s\n", "DPMEM_SCOPE, logging off", scope_off, scope_off / floor, "<= 5 ns");
    printf("%-46s %9.2f %9.2f %s\n", "DPMEM_SCOPE, logging on", scope_on, scope_on / floor, "<= 2x floor");
    printf("%-46s %9.2f %9.2f\n", "DPMEM_SCOPE, logging on, 2 threads at once", scope_2t, scope_2t / floor);
    printf("%-46s %9.2f %9.2f\n", "tagged alloc+free, logging off", alloc_off, alloc_off / floor);
    printf("%-46s %9.2f %9.2f %s\n", "tagged alloc+free, logging on", alloc_on, alloc_on / floor, "<= 60 ns");
    printf("%-46s %9.2f %9.2f\n", "tagged alloc+free, logging on, 2 threads", alloc_2t, alloc_2t / floor);
    printf("%-46s %9.2f %9.2f %s\n", "tagged alloc+free, logging on, sustained", alloc_sustained, alloc_sustained / floor,
           "(20x longer: disk writeback)");
    return 0;
}
