/* plan_comm_probe.c — the link a CPU plan's collectives run over, measured: under `mpirun -np 2`, the
   trainer's own all-reduce (samples/llama/comm.h: MPI_Iallreduce completed by polling, as a step runs it)
   of fp32 sums at 4 KiB, 256 KiB and 4 MiB, each call on a buffer untouched since it was filled (a step's
   gradients come from memory, not from cache; one of 16), the median of 7 after one warm-up each (the
   slower rank's), and prints one line for samples/llama/plan_time.c:

       link <bytes/s per rank on the ring> <seconds per call> <skew>

   fitted as t(S) = latency + ring bytes / bandwidth, ring bytes = 2(N-1)/N·S (kernels/plan/cost.h),
   from the smallest and the largest size. skew: the slowest rank's time for the same work over the
   fastest's (the median of 9 runs of ~25 ms over 16 MiB on each): ranks in step wait for the
   slowest at every collective, and on a shared machine one core is often a few per cent slower. A plan for --ranks N on --plan-profile cpu runs it once and
   caches the figures with the CPU profile. It allocates no tagged memory. */
#include "llama/comm.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { COPIES = 16 };

/* the same work on every rank: passes over 16 MiB, a step's mix of loads, stores and arithmetic */
static double work_seconds(float *a, float *b, size_t n) {
    double t[9];
    for (int k = 0; k < 9; k++) {
        const double t0 = MPI_Wtime();
        for (int rep = 0; rep < 16; rep++)
            for (size_t i = 0; i < n; i++) a[i] = a[i] * 0.999f + b[i] * 0.001f;
        t[k] = MPI_Wtime() - t0;
    }
    qsort(t, 9, sizeof *t, cmp);
    return t[4];
}

static double allreduce_seconds(float *pool, int n) {
    double t[7];
    if (comm_allreduce_float(&g_comm, pool, (size_t)n, "the probe")) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < 7; i++) {
        float *buf = pool + (size_t)(i + 1) % COPIES * (size_t)n;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (comm_allreduce_float(&g_comm, buf, (size_t)n, "the probe")) MPI_Abort(MPI_COMM_WORLD, 1);
        t[i] = MPI_Wtime() - t0;
    }
    qsort(t, 7, sizeof *t, cmp);
    double m = t[3];
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);   /* the slower rank's */
    return m;
}

int main(int argc, char **argv) {
    (void)argc; (void)argv;
    if (comm_init(&g_comm) || !g_comm.mpi) { fprintf(stderr, "plan_comm_probe: run it under mpirun\n"); return 1; }
    const int rank = g_comm.rank, world = g_comm.world;
    static const int sizes[3] = { 1 << 10, 1 << 16, 1 << 20 };   /* floats */
    float *buf = malloc((size_t)sizes[2] * COPIES * sizeof *buf);
    if (!buf) { fprintf(stderr, "plan_comm_probe: out of host memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    for (size_t i = 0; i < (size_t)sizes[2] * COPIES; i++) buf[i] = 1e-3f;   /* every copy touched once, long before its call */
    double t[3];
    for (int i = 0; i < 3; i++) t[i] = allreduce_seconds(buf, sizes[i]);
    const double ring = world > 1 ? 2.0 * (world - 1) / world : 1;
    const double b0 = ring * 4.0 * sizes[0], b2 = ring * 4.0 * sizes[2];
    const double bw = t[2] > t[0] ? (b2 - b0) / (t[2] - t[0]) : b2 / t[2];
    double lat = t[0] - b0 / bw;
    if (lat < 0) lat = 0;
    const size_t wn = (size_t)4 << 20;   /* 16 MiB of the pool, and the 16 MiB after it */
    double slow = work_seconds(buf, buf + wn, wn), fast = slow;
    MPI_Allreduce(MPI_IN_PLACE, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &fast, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    const double skew = fast > 0 ? slow / fast : 1;
    if (rank == 0) printf("link %.6g %.6g %.4f (allreduce of 4 KiB %.3g s, 256 KiB %.3g s, 4 MiB %.3g s; work %.3g to %.3g s)\n", bw, lat,
                          skew, t[0], t[1], t[2], fast, slow);
    free(buf);
    comm_finalize(&g_comm);
    return 0;
}
