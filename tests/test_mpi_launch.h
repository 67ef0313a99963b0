/* test_mpi_launch.h — what the tests that start the trainers under mpirun share (tests/test_comm_mpi.c,
   tests/test_comm_zero.c): the setup (a SKIP line and 77 where mpirun is missing; mpirun allowed to run as
   root here; one OpenMP thread a rank; the build folder's absolute path; a temporary folder to run in) and a
   command line run there through sh with its output kept. Include after test_dp_common.h (build_dir). */
#ifndef TEST_MPI_LAUNCH_H
#define TEST_MPI_LAUNCH_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static char tmp[64];             /* the folder every command runs in */
static char out[1 << 16];        /* the last command's stdout and stderr */
static const char *B;            /* the build folder, absolute */

/* cmd through sh in tmp, its stdout and stderr into out (the stderr of its last command: group a line in
   parentheses for all of it); its exit status, 128 + the signal when one ended it. */
static int sh(const char *cmd) {
    char full[8300];
    snprintf(full, sizeof full, "cd %s && %s 2>&1", tmp, cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = 0;
    while (fgetc(p) != EOF) {}
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Before the first command: 0; 77 after a SKIP line naming what goes unchecked (no mpirun); 1 after a FAIL line. */
static int mpi_test_begin(const char *test, const char *unchecked) {
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("SKIP %s: no mpirun (Debian's openmpi-bin): %s not checked\n", test, unchecked);
        return 77;
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    static char absb[1024];
    if (!realpath(build_dir(), absb)) { printf("FAIL: no build dir %s\n", build_dir()); return 1; }
    B = absb;
    snprintf(tmp, sizeof tmp, "/tmp/%s.XXXXXX", test);
    if (!mkdtemp(tmp)) { printf("FAIL: mkdtemp\n"); return 1; }
    return 0;
}

/* After the last: the temporary folder removed. */
static void mpi_test_end(void) {
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", tmp);
    if (system(rm) != 0) printf("note: could not remove %s\n", tmp);
}

#endif
