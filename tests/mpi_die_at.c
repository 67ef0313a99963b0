/* mpi_die_at.c — preloaded into one rank of an MPI job by tests/test_comm_zero (LD_PRELOAD): the rank dies
   (SIGKILL, as a crashed or OOM-killed process does) as it starts its Nth all-gather (MPI_Iallgather: the
   bucketed gathers, --save's; MPI_Iallgatherv: --zero 3's weight gathers), N from
   DPMEM_TEST_DIE_AT_GATHER, so that the test kills a rank inside a chosen gather (--zero 3's weight
   gathers, --save's tensor gathers) rather than at a random time. Without N it counts the all-gathers and
   prints the count at exit (DPMEM_TEST_COUNT_GATHERS=1), which is how the test picks N. Through MPI's
   profiling interface: MPI_Iallgather(v) here, PMPI_Iallgather(v) the library's. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long g_calls;

static void count_one(void) {
    const char *at = getenv("DPMEM_TEST_DIE_AT_GATHER");
    if (++g_calls == (at ? atol(at) : -1)) {
        fprintf(stderr, "mpi_die_at: killing this rank at all-gather %ld\n", g_calls);
        fflush(stderr);
        raise(SIGKILL);
    }
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[],
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    count_one();
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    count_one();
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

__attribute__((destructor)) static void report(void) {
    if (getenv("DPMEM_TEST_COUNT_GATHERS")) fprintf(stderr, "mpi_die_at: %ld all-gathers\n", g_calls);
}
