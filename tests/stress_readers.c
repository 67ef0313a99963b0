/* stress_readers.c — `make stress-readers`: the hostile logs of issue 13 at full size (131072 threads,
   10^5 categories, a 1.3 GB sparse log, backwards clocks, lost strings; tests/forge_logs.h) through
   dpmem-report, dpmem-render and dpmem-trace, each as a child process with a time limit: exit status,
   wall time and peak RSS per case, as a table. It measures; it asserts nothing (the regression test
   is tests/test_tools_hostile.c, at sizes that take seconds).

       build/tests/stress_readers [--tools DIR] [--limit SECONDS] [--quick] [OUTDIR]

   --tools: where the three binaries are (default: this program's build directory), e.g. another
   checkout's build/, to compare; --limit: seconds before a tool is killed (default 300). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forge_logs.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Runs argv (stdout, stderr to files) for at most `limit` seconds: its status as a word. */
static void run(char *const argv[], int limit, const char *errfile, char *status, size_t n, double *secs, double *rss) {
    fflush(stdout);   /* or the child's freopen writes our buffer again */
    double t = now();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen(errfile, "w", stderr)) _exit(127);
        alarm((unsigned)limit);   /* SIGALRM kills it: reported as "killed at the limit" */
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid) { snprintf(status, n, "?"); return; }
    *secs = now() - t;
    *rss = ru.ru_maxrss / 1024.0;
    if (WIFEXITED(st)) snprintf(status, n, "exit %d", WEXITSTATUS(st));
    else if (WTERMSIG(st) == SIGALRM) snprintf(status, n, "killed at %ds", limit);
    else snprintf(status, n, "signal %d", WTERMSIG(st));
}

int main(int argc, char **argv) {
    char self[1024], tools[1100] = "", dir[1100] = "";
    snprintf(self, sizeof self, "%s", argv[0]);
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    int limit = 300, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tools") && i + 1 < argc) snprintf(tools, sizeof tools, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (argv[i][0] != '-') snprintf(dir, sizeof dir, "%s", argv[i]);
        else { fprintf(stderr, "usage: stress_readers [--tools DIR] [--limit SECONDS] [--quick] [OUTDIR]\n"); return 2; }
    }
    if (!tools[0]) snprintf(tools, sizeof tools, "%s/..", slash ? self : ".");
    if (!dir[0]) snprintf(dir, sizeof dir, "%s/stress-readers", slash ? self : ".");
    mkdir(dir, 0777);
    struct { const char *name; char path[1200]; } cases[6];
    int nc = 0;
#define CASE(label, file) (cases[nc].name = label, snprintf(cases[nc].path, sizeof cases[nc].path, "%s/%s", dir, file), cases[nc++].path)
    forge_threads(CASE(quick ? "16384 threads" : "131072 threads", "threads.log"), quick ? 16384 : 131072);
    forge_categories(CASE(quick ? "20000 categories" : "100000 categories", "categories.log"), quick ? 20000 : 100000);
    forge_sparse(CASE(quick ? "sparse 130 MB" : "sparse 1.3 GB", "sparse.log"), quick ? 130000000ull : 1300000000ull);
    forge_backwards(CASE("backwards clock", "backwards.log"));
    forge_dangling(CASE("lost strings", "dangling.log"));
    printf("readers on hostile logs (tools: %s; limit %d s)\n", tools, limit);
    printf("%-20s %-8s %-16s %9s %9s\n", "case", "tool", "status", "time s", "RSS MiB");
    for (int c = 0; c < nc; c++) {
        const char *names[3] = { "report", "render", "trace" };
        for (int t = 0; t < 3; t++) {
            char bin[1200], out[1200], errf[1200], status[64];
            snprintf(bin, sizeof bin, "%s/dpmem-%s", tools, names[t]);
            snprintf(out, sizeof out, "%s/out.%s", dir, t == 1 ? "png" : "json");
            snprintf(errf, sizeof errf, "%s/err.txt", dir);
            char *av[3][6] = { { bin, cases[c].path, NULL }, { bin, cases[c].path, "-o", out, NULL },
                               { bin, cases[c].path, "-o", out, NULL } };
            double secs = 0, rss = 0;
            run(av[t], limit, errf, status, sizeof status, &secs, &rss);
            printf("%-20s %-8s %-16s %9.2f %9.1f\n", cases[c].name, names[t], status, secs, rss);
            fflush(stdout);
        }
        remove(cases[c].path);
    }
    return 0;
}
