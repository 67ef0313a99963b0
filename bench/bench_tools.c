/* bench_tools.c — `make bench` for the tools: synthetic training logs of 10^5, 10^6 and 10^7 events
   (two threads, DP-SGD-like steps: scopes, tagged allocations, snapshots) written into
   $(BUILD)/bench/, then dpmem-render, dpmem-report and dpmem-trace run on each as child processes:
   wall time and peak RSS. The baseline, measured in the same run, is one merged pass of the reader
   over the same log (open + iterate every event): each tool's time is also given as a multiple of it.
   The 10^7 log (~300 MB) is skipped when DPMEM_BENCH_SMALL or DPMEM_BENCH_QUICK=1 (make bench QUICK=1) is
   set or the disk has under 2 GB free;
   the logs are deleted afterwards (kept with DPMEM_BENCH_KEEP=1, to look at them). It measures; it asserts nothing (the goals are in docs/TOOLS.md). */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "read/dpmem_read.h"
#include "read/synthlog.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Steps of a small LLaMA-like DP-SGD loop until the log holds n events. */
static void make_log(const char *path, uint64_t n) {
    static const char *layers[] = { "0", "1", "2", "3", "4", "5", "6", "7" };
    SynthLog S;
    synth_init(&S, 65536, 1000);
    uint64_t ts = 1000;
    synth_thread(&S, 1, ts, 100, "main");
    synth_thread(&S, 2, ++ts, 101, "loader");
    synth_meta(&S, 1, ++ts, "run", "bench");
    synth_alloc(&S, 1, ++ts, "params/all", 1, 0x1000, 500ull << 20);
    synth_alloc(&S, 1, ++ts, "optimizer/adam", 1, 0x2000, 1000ull << 20);
    char tag[64];
    for (uint64_t step = 0; S.n_events < n; step++) {
        synth_begin(&S, 1, ts += 50, "step");
        synth_begin(&S, 2, ts += 50, "data");
        synth_alloc(&S, 2, ts += 50, "input/batch", 0, 0x3000, 1 << 20);
        synth_end(&S, 2, ts += 50, "data");
        synth_begin(&S, 1, ts += 50, "forward");
        for (int l = 0; l < 8; l++) {
            snprintf(tag, sizeof tag, "activations/layers.%s.ffn", layers[l]);
            synth_alloc(&S, 1, ts += 400, tag, 1, 0x10000 + (uint64_t)l, (40ull + (uint64_t)l) << 20);
        }
        synth_end(&S, 1, ts += 50, "forward");
        synth_begin(&S, 1, ts += 50, "backward");
        for (int l = 7; l >= 0; l--) {
            snprintf(tag, sizeof tag, "per_sample_grads/layers.%s", layers[l]);
            synth_alloc(&S, 1, ts += 300, tag, 1, 0x20000 + (uint64_t)l, 30ull << 20);
            synth_begin(&S, 1, ts += 20, "clip");
            synth_end(&S, 1, ts += 200, "clip");
            synth_free(&S, 1, ts += 20, tag, 1, 0x20000 + (uint64_t)l, 30ull << 20);
            snprintf(tag, sizeof tag, "activations/layers.%s.ffn", layers[l]);
            synth_free(&S, 1, ts += 50, tag, 1, 0x10000 + (uint64_t)l, (40ull + (uint64_t)l) << 20);
        }
        synth_end(&S, 1, ts += 50, "backward");
        synth_begin(&S, 1, ts += 50, "noise");
        synth_alloc(&S, 1, ts += 50, "noise/z", 1, 0x4000, 500ull << 20);
        synth_free(&S, 1, ts += 400, "noise/z", 1, 0x4000, 500ull << 20);
        synth_end(&S, 1, ts += 50, "noise");
        synth_begin(&S, 1, ts += 50, "optimizer_step");
        synth_end(&S, 1, ts += 500, "optimizer_step");
        synth_free(&S, 2, ts += 50, "input/batch", 0, 0x3000, 1 << 20);
        synth_end(&S, 1, ts += 50, "step");
        if (step % 100 == 0) {
            const char *cats[3] = { "params", "optimizer", "activations" };
            uint64_t live[3] = { 500ull << 20, 1000ull << 20, 0 };
            synth_snapshot(&S, 1, ts += 10, "step", 0, 0, 0, 3, cats, live);
        }
    }
    synth_close(&S, 1, ts += 10);
    synth_save(&S, path);
    synth_release(&S);
}

/* Runs argv with stdout/stderr to /dev/null: wall seconds and peak RSS (MiB). */
static int run(char *const argv[], double *secs, double *rss_mib) {
    fflush(stdout);   /* or the child's freopen would print our buffer again */
    double t = now();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid) return -1;
    *secs = now() - t;
    *rss_mib = ru.ru_maxrss / 1024.0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static double read_pass(const char *path, uint64_t *events) {
    double t = now();
    DpmemLog L;
    char err[512];
    if (dpmem_log_open(&L, path, err, sizeof err)) { fprintf(stderr, "%s\n", err); return -1; }
    DpmemIter it;
    DpmemEvent e;
    uint64_t n = 0, sum = 0;
    if (dpmem_iter_begin(&it, &L) == 0) {
        while (dpmem_iter_next(&it, &e)) { n++; sum += e.ts; }
        dpmem_iter_end(&it);
    }
    *events = n + (sum == 1);   /* sum keeps the loop from being optimised away */
    dpmem_log_close(&L);
    return now() - t;
}

int main(int argc, char **argv) {
    (void)argc;
    char self[1024];
    snprintf(self, sizeof self, "%s", argv[0]);
    const char *build = dirname(self);
    char dir[1100], path[1200], png[1200], json[1200], bin[3][1200], cmdout[1200];
    snprintf(dir, sizeof dir, "%s/bench", build);
    snprintf(cmdout, sizeof cmdout, "mkdir -p '%s'", dir);
    if (system(cmdout) != 0) return 1;
    const char *names[3] = { "render", "report", "trace" };
    for (int i = 0; i < 3; i++) snprintf(bin[i], sizeof bin[i], "%s/dpmem-%s", build, names[i]);
    struct statvfs vfs;
    int quick = getenv("DPMEM_BENCH_QUICK") && !strcmp(getenv("DPMEM_BENCH_QUICK"), "1");   /* make bench QUICK=1 */
    int big = !quick && !getenv("DPMEM_BENCH_SMALL") && statvfs(dir, &vfs) == 0 && (double)vfs.f_bavail * vfs.f_frsize > 2e9;
    uint64_t sizes[3] = { 100000, 1000000, 10000000 };
    printf("dpmem tools: time (s) and peak RSS (MiB) per log size; x = multiple of one reader pass over the same log\n");
    printf("%10s %8s %8s | %8s %7s %7s | %8s %7s %7s | %8s %7s %7s\n", "events", "log MiB", "read s", "render s", "x read", "RSS",
           "report s", "x read", "RSS", "trace s", "x read", "RSS");
    for (int k = 0; k < 3; k++) {
        if (k == 2 && !big) { printf("%10llu   (skipped: DPMEM_BENCH_SMALL or QUICK=1 set, or under 2 GB free)\n", (unsigned long long)sizes[k]); continue; }
        snprintf(path, sizeof path, "%s/bench-%llu.log", dir, (unsigned long long)sizes[k]);
        snprintf(png, sizeof png, "%s/bench.png", dir);
        snprintf(json, sizeof json, "%s/bench.json", dir);
        make_log(path, sizes[k]);
        uint64_t events = 0;
        read_pass(path, &events);   /* warm the page cache: every tool then reads from memory */
        double rd = read_pass(path, &events);
        struct stat st;
        double mib = stat(path, &st) == 0 ? st.st_size / 1048576.0 : 0;
        char *av[3][8] = { { bin[0], path, "-o", png, NULL }, { bin[1], path, NULL }, { bin[2], path, "-o", json, NULL } };
        double secs[3] = { 0 }, rss[3] = { 0 };
        for (int t = 0; t < 3; t++)
            if (run(av[t], &secs[t], &rss[t])) { fprintf(stderr, "bench: %s failed on %s\n", bin[t], path); return 1; }
        printf("%10llu %8.1f %8.3f | %8.3f %7.1f %7.1f | %8.3f %7.1f %7.1f | %8.3f %7.1f %7.1f\n", (unsigned long long)events, mib, rd,
               secs[0], secs[0] / rd, rss[0], secs[1], secs[1] / rd, rss[1], secs[2], secs[2] / rd, rss[2]);
        fflush(stdout);
        if (!getenv("DPMEM_BENCH_KEEP")) { remove(path); remove(json); remove(png); }
    }
    return 0;
}
