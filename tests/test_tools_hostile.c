/* test_tools_hostile.c — the tools against hostile files (issue 13): nothing hangs, nothing is lost,
   nothing is trusted that should not be.

   - A log that shrinks or is rewritten under a reader (a trainer re-run on the path being viewed):
     no SIGBUS; the reader stops and says the file changed.
   - 131072 threads (the 8.4 MB log that took 44 s) and 10^5 categories (report killed at 150 s,
     render 112 s): report, render and trace each finish within a limit far below the old times.
   - A 1.3 GB sparse log of zero chunks: read without taking its size in memory (peak RSS bound).
   - A FIFO as the log: one line, no blocking open().
   - Every output flag of every tool given its input (or another output), under several spellings of
     the same file: refused with one line, and the log is unchanged.
   - Backwards timestamps and lost STRING events: the report says so instead of printing 0 ms scopes,
     a false leak and an empty breakdown under a non-zero peak.
   - /proc/self/status (a pseudo-file whose size reads 0) is "not a dpmem log", not "an empty file".

   The tools run from $DPMEM_BUILD, so DPMEM_BUILD=<an old build> shows which checks the old tools
   fail. Logs come from tests/forge_logs.h. */
#include "test_tools_common.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "read/dpmem_read.h"
#include "forge_logs.h"
#include "read/runstats.h"

/* The tools' time limit on the large logs: the old readers took 35-112 s on them, these take ~1 s
   (a few under the sanitizers). */
#define LIMIT "20"

static uint64_t file_sum(const char *path, size_t *len) {
    char *s = tt_slurp(path, len);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; s && i < *len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    free(s);
    return s ? h : 0;
}

/* Runs a shell command line; its exit status (128 + signal when killed). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ---- a log that changes under the reader ---- */

static void changed_under_reader(void) {
    const char *log = tt_path("shrinks.log");
    forge_steps(log, 200000);
    size_t len;
    file_sum(log, &len);
    pid_t pid = fork();
    if (pid == 0) {   /* in a child: the old reader died of SIGBUS here */
        DpmemLog L;
        char err[512];
        if (dpmem_log_open(&L, log, err, sizeof err)) _exit(3);
        if (truncate(log, 4096 + 2 * 65536) != 0) _exit(4);   /* the re-run's truncation */
        DpmemIter it;
        DpmemEvent e;
        uint64_t n = 0;
        if (dpmem_iter_begin(&it, &L)) _exit(5);
        while (dpmem_iter_next(&it, &e)) n++;
        dpmem_iter_end(&it);
        int ok = n < L.n_events && dpmem_log_error(&L) && strstr(dpmem_log_error(&L), "changed while being read");
        if (!ok) fprintf(stderr, "after the truncation: %llu of %llu events, error '%s'\n", (unsigned long long)n,
                         (unsigned long long)L.n_events, dpmem_log_error(&L) ? dpmem_log_error(&L) : "(none)");
        dpmem_log_close(&L);
        _exit(ok ? 0 : 6);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a reader whose log shrank: %s %d", WIFEXITED(st) ? "exit" : "signal",
          WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));

    /* Rewritten in place, same size, other content (a run of the same program): the report fails
       with that one line instead of mixing two runs. */
    forge_steps(log, 200000);
    DpmemLog L;
    char err[512];
    CHECK(dpmem_log_open(&L, log, err, sizeof err) == 0, "open: %s", err);
    FILE *f = fopen(log, "r+b");
    uint8_t word[8] = { 0x77, 0, 0, 0, 0, 0, 0, 0 };
    CHECK(f && fseek(f, 4096 + 65536 * 3 + 32 + 24, SEEK_SET) == 0 && fwrite(word, 1, 8, f) == 8, "rewrite a payload");
    if (f) fclose(f);
    static RunStats r;
    CHECK(runstats_compute(&r, &L) == -1 && dpmem_log_error(&L) && strstr(dpmem_log_error(&L), "shrinks.log: the file changed"),
          "a rewritten log: %s", dpmem_log_error(&L) ? dpmem_log_error(&L) : "(no error)");
    dpmem_log_close(&L);
    remove(log);
}

/* ---- logs that were quadratic, or read whole ---- */

static void all_tools_within_limit(const char *log, const char *what, const char *report_has) {
    int rc = tt_run("dpmem-report", "%s", log);
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && out && strstr(out, report_has), "%s: dpmem-report exit %d (124: over %s s), want '%s' in its report", what,
          rc, LIMIT, report_has);
    free(out);
    rc = tt_run("dpmem-render", "%s -o %s", log, tt_path("big.png"));
    CHECK(rc == 0, "%s: dpmem-render exit %d (124: over %s s)", what, rc, LIMIT);
    rc = tt_run("dpmem-trace", "%s -o %s --no-allocs", log, tt_path("big.json"));
    CHECK(rc == 0, "%s: dpmem-trace exit %d (124: over %s s)", what, rc, LIMIT);
    remove(tt_path("big.png")); remove(tt_path("big.json"));
}

static void large_logs(void) {
    const char *log = tt_path("threads.log");
    forge_threads(log, 131072);
    all_tools_within_limit(log, "131072 threads", "262146 events");
    remove(log);

    log = tt_path("categories.log");
    forge_categories(log, 100000);
    all_tools_within_limit(log, "100000 categories", "c099999");
    /* the breakdown at the peak lists each category: 10^5 tags of 4096 bytes, all live at once */
    tt_run("dpmem-report", "%s", log);
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(out && strstr(out, "peak total: 390.62 MiB (409600000 bytes)") && strstr(out, "  c099999 "),
          "100000 categories: the peak and its breakdown");
    free(out);
    remove(log);

    /* A sparse log: the file is 1.3 GB of which a few KB hold events. */
    log = tt_path("sparse.log");
    forge_sparse(log, 1300000000ull);
    struct stat st;
    if (stat(log, &st) == 0 && (uint64_t)st.st_blocks * 512 > 100000000ull) {
        printf("SKIP (part): the file system does not keep %s sparse\n", log);
    } else {
        pid_t pid = fork();
        if (pid == 0) {
            char bin[600];
            snprintf(bin, sizeof bin, "%s/dpmem-report", tt_build());
            if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
            alarm(60);
            execl(bin, bin, log, (char *)NULL);
            _exit(127);
        }
        int status = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        wait4(pid, &status, 0, &ru);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && ru.ru_maxrss < 200 * 1024,
              "a 1.3 GB sparse log: exit %d, peak RSS %ld MiB (the old reader mapped it all: 1.28 GB)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1, ru.ru_maxrss / 1024);
    }
    remove(log);
}

/* ---- what is not a log ---- */

static void not_logs(void) {
    const char *fifo = tt_path("fifo.log");
    remove(fifo);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    tt_expect_error("dpmem-report", "%s/fifo.log", "not a regular file (a FIFO)");
    tt_expect_error("dpmem-render", "%s/fifo.log -o %s/x.png", "not a regular file (a FIFO)");
    tt_expect_error("dpmem-trace", "%s/fifo.log -o %s/x.json", "not a regular file (a FIFO)");
    remove(fifo);
    tt_expect_error("dpmem-report", "/proc/self/status", "not a dpmem log (bad magic)");
    tt_expect_error("dpmem-report", "%s", "not a regular file (a directory)");
}

/* ---- outputs that are inputs ---- */

static void outputs_are_inputs(void) {
    const char *log = tt_path("run.log");
    forge_steps(log, 2000);
    size_t len0, len;
    uint64_t sum0 = file_sum(log, &len0);
    CHECK(sh("ln -f '%s' '%s' && mkdir -p '%s' && ln -f '%s' '%s'", log, tt_path("alias.log"), tt_path("charts"), log,
             tt_path("charts/timeline.png")) == 0, "links");
    /* the log itself, the same name spelled otherwise, a hard link to it */
    tt_expect_error("dpmem-trace", "%s/run.log -o %s/run.log", "same file");
    tt_expect_error("dpmem-trace", "%s/run.log -o %s/../hostile/./run.log", "same file");
    tt_expect_error("dpmem-trace", "%s/run.log -o %s/alias.log", "same file");
    tt_expect_error("dpmem-render", "%s/run.log -o %s/run.log", "same file");
    tt_expect_error("dpmem-render", "--compare %s/alias.log %s/run.log -o %s/alias.log", "same file");
    tt_expect_error("dpmem-report", "%s/run.log --csv %s/run.log", "same file");
    tt_expect_error("dpmem-report", "%s/run.log -q --json %s/alias.log", "same file");
    tt_expect_error("dpmem-report", "%s/run.log -q --charts %s/charts", "same file");
    tt_expect_error("dpmem-report", "%s/run.log -q --csv %s/both --json %s/both", "same file");
    tt_expect_error("dpmem-charts", "%s/run.log -o %s/charts", "same file");   /* charts/timeline.png is the log */
    uint64_t sum = file_sum(log, &len);
    CHECK(sum == sum0 && len == len0, "the log was written over: %zu bytes, was %zu", len, len0);
    /* and the ordinary cases still work */
    CHECK(tt_run("dpmem-trace", "%s -o %s", log, tt_path("run.json")) == 0, "trace to another file");
    CHECK(tt_run("dpmem-trace", "%s -o -", log) == 0, "trace to stdout");
    remove(log); remove(tt_path("alias.log")); remove(tt_path("charts/timeline.png")); remove(tt_path("run.json"));
}

/* ---- numbers a report must not print as if true ---- */

static void untrustworthy_numbers(void) {
    const char *log = tt_path("backwards.log");
    forge_backwards(log);
    int rc = tt_run("dpmem-report", "%s", log);
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && out && strstr(out, "ERROR: timestamps go backwards 14 times (first at byte") && !strstr(out, "a leak?") &&
          strstr(out, "  step                          5            -           -           -           -           -           -            -") &&
          !strstr(out, "step time"),
          "backwards clock: the report must say so, and print neither scope times nor a leak:\n%s", out ? out : "");
    free(out);
    remove(log);

    log = tt_path("dangling.log");
    forge_dangling(log);
    rc = tt_run("dpmem-report", "%s", log);
    out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && out && strstr(out, "peak total: 3.00 MiB (3145728 bytes)") &&
          strstr(out, "  ? (tag unknown)               3145728         3.00  100.0%") &&
          strstr(out, "ERROR: 4 ALLOC/FREE events name tags the log never defines (lost STRING events): 3.00 MiB at the peak"),
          "lost strings: the report must say where the peak's bytes went:\n%s", out ? out : "");
    free(out);
    remove(log);

    log = tt_path("huge.log");   /* 2^64 - 1 bytes wrapped the total to 99 B */
    forge_huge(log);
    rc = tt_run("dpmem-report", "%s", log);
    out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && out && strstr(out, "ERROR: 1 allocations left out: they would carry the total past 2^64 bytes") &&
          strstr(out, "peak total: 100 B (100 bytes)") &&
          strstr(out, "WARNING: 2 WARN events in the log, 1 distinct:") &&
          strstr(out, "    2x, first at ") && strstr(out, " ms: free of an unknown or already freed address\n"),
          "an ALLOC of 2^64 - 1 bytes and two WARN events: the report must say so:\n%s", out ? out : "");
    free(out);
    /* dpmem-render leaves it out too: its peak is the report's 100 B (it drew 99 B, the wrapped sum) */
    char layout[600];
    snprintf(layout, sizeof layout, "%s", tt_path("huge.layout"));
    remove(layout);
    setenv("DPMEM_LAYOUT", layout, 1);
    rc = tt_run("dpmem-render", "'%s' -o '%s'", log, tt_path("huge.png"));
    unsetenv("DPMEM_LAYOUT");
    char *err = tt_slurp(tt_path("err.txt"), NULL), *lay = tt_slurp(layout, NULL);
    CHECK(rc == 0 && err && strstr(err, "1 allocations left out: they would carry the total past 2^64 bytes") && lay &&
          strstr(lay, " peak 100 B at "),
          "dpmem-render on an ALLOC of 2^64 - 1 bytes: exit %d, stderr %s, labels:\n%s", rc, err ? err : "", lay ? lay : "");
    free(err); free(lay);
    remove(log);
}

int main(void) {
    tt_mkdir("hostile");
    setenv("DPMEM_TOOL_TIMEOUT", LIMIT, 1);
    changed_under_reader();
    not_logs();
    outputs_are_inputs();
    untrustworthy_numbers();
    large_logs();
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("hostile files: all checks passed\n");
    return 0;
}
