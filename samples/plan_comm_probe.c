/* plan_comm_probe.c — the link a CPU plan's collectives run over, measured: under `mpirun -np 2`,
   MPI_Allreduce of fp32 sums at 4 KiB, 256 KiB and 4 MiB (the median of 7 after one warm-up each),
   and prints one line for samples/llama/plan_time.c:

       link <bytes/s per rank on the ring> <seconds per call>

   fitted as t(S) = latency + ring bytes / bandwidth, ring bytes = 2(N-1)/N·S (kernels/plan/cost.h),
   from the smallest and the largest size. A plan for --ranks N on --plan-profile cpu runs it once and
   caches the figures with the CPU profile. Only MPI and libc: it allocates no tagged memory. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double allreduce_seconds(float *buf, int n) {
    double t[7];
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < 7; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t[i] = MPI_Wtime() - t0;
    }
    qsort(t, 7, sizeof *t, cmp);
    double m = t[3];
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);   /* the slower rank's */
    return m;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    static const int sizes[3] = { 1 << 10, 1 << 16, 1 << 20 };   /* floats */
    float *buf = calloc((size_t)sizes[2], sizeof *buf);
    if (!buf) { fprintf(stderr, "plan_comm_probe: out of host memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    double t[3];
    for (int i = 0; i < 3; i++) t[i] = allreduce_seconds(buf, sizes[i]);
    const double ring = world > 1 ? 2.0 * (world - 1) / world : 1;
    const double b0 = ring * 4.0 * sizes[0], b2 = ring * 4.0 * sizes[2];
    const double bw = t[2] > t[0] ? (b2 - b0) / (t[2] - t[0]) : b2 / t[2];
    double lat = t[0] - b0 / bw;
    if (lat < 0) lat = 0;
    if (rank == 0) printf("link %.6g %.6g (allreduce of 4 KiB %.3g s, 256 KiB %.3g s, 4 MiB %.3g s)\n", bw, lat, t[0], t[1], t[2]);
    free(buf);
    MPI_Finalize();
    return 0;
}
