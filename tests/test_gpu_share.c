/* test_gpu_share.c — tests/gpu_share.h without a GPU: the GPU test lock (a second taker waits for
   the first and names it; a child of the holder does not wait; a dead holder's variable is not
   trusted; an unusable lock file is said and not fatal; a link planted at the path is not followed
   and its target keeps its bytes; a FIFO there is refused) and the decisions on canned nvidia-smi
   listings (parsing, and whether another process could have moved the device's used bytes), and the
   query through a stand-in nvidia-smi. */
#include "tests/gpu_share.h"

#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static gpu_apps parsed(const char *text, int *rc) {
    gpu_apps a;
    *rc = gpu_apps_parse(text, &a);
    return a;
}

static void check_parse(void) {
    int rc;
    gpu_apps a = parsed("", &rc);
    CHECK(rc == 0 && a.ok && a.n == 0, "empty listing: rc %d ok %d n %d", rc, a.ok, a.n);
    a = parsed("12345, 463\n678, [N/A]\n", &rc);
    CHECK(rc == 0 && a.ok && a.n == 2 && a.app[0].pid == 12345 && a.app[0].mib == 463 && a.app[1].pid == 678 && a.app[1].mib == -1,
          "nounits listing: rc %d n %d", rc, a.n);
    a = parsed("12345, 463 MiB\r\n", &rc);
    CHECK(rc == 0 && a.n == 1 && a.app[0].mib == 463, "listing with units: rc %d n %d", rc, a.n);
    a = parsed("No devices were found\n", &rc);
    CHECK(rc == -1 && !a.ok, "an error message parsed as a listing");
    a = parsed("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", &rc);
    CHECK(rc == -1 && !a.ok, "a driver failure parsed as a listing");
    a = parsed("123, 4x\n", &rc);
    CHECK(rc == -1 && !a.ok, "a cut line parsed");
    a = parsed("123 463\n", &rc);
    CHECK(rc == -1, "a line without a comma parsed");
}

/* The verdict on two listings: quiet or not, and the exact reason. */
static void verdict(const char *before, const char *after, long self, int want, const char *want_why) {
    gpu_apps b, a;
    char why[512];
    int rb = gpu_apps_parse(before, &b), ra = gpu_apps_parse(after, &a), q;
    (void)rb; (void)ra;
    q = gpu_apps_quiet(&b, &a, self, why, sizeof why);
    CHECK(q == want && strcmp(why, want_why) == 0, "before [%s] after [%s]: quiet %d why \"%s\", want %d \"%s\"", before, after, q,
          why, want, want_why);
}

static void check_verdicts(void) {
    /* alone: only this process (its own memory moves; that is what is measured) */
    verdict("", "", 100, 1, "");
    verdict("100, 300\n", "100, 1500\n", 100, 1, "");
    /* another process held memory throughout: what it did between the two listings is not seen */
    verdict("100, 300\n812, 2048\n", "812, 2048\n100, 600\n", 100, 0, "pid 812: 2048 MiB");
    /* the first run's case: other CUDA tests started beside it */
    verdict("100, 300\n", "100, 300\n812, 463\n", 100, 0, "pid 812: 463 MiB (came)");
    verdict("100, 300\n812, 442\n", "100, 300\n812, 463\n", 100, 0, "pid 812: 442 -> 463 MiB");
    verdict("100, 300\n812, 463\n", "100, 300\n", 100, 0, "pid 812: 463 MiB (went)");
    verdict("812, [N/A]\n", "812, [N/A]\n", 100, 0, "pid 812: ? MiB");
    verdict("812, [N/A]\n", "812, 40\n", 100, 0, "pid 812: ? MiB");
    verdict("", "813, [N/A]\n", 100, 0, "pid 813: ? MiB (came)");
    verdict("812, 10\n900, 5\n", "812, 12\n901, 7\n", 100, 0, "pid 812: 10 -> 12 MiB, pid 900: 5 MiB (went), pid 901: 7 MiB (came)");
    /* no listing: nothing to excuse a failure with */
    verdict("No devices were found\n", "", 100, 1, "the GPU's processes could not be listed (nvidia-smi --query-compute-apps)");
}

/* gpu_apps_query through a stand-in nvidia-smi: the listing parsed; an id it does not take falls back
   to every device; a failing nvidia-smi is no listing. */
static void check_query(void) {
    char dir[] = "/tmp/dpmem_gpu_smi_XXXXXX", path[256], *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL, newpath[4400];
    gpu_apps a;
    FILE *f;
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); free(old); return; }
    snprintf(path, sizeof path, "%s/nvidia-smi", dir);
    f = fopen(path, "w");
    if (!f) { CHECK(0, "stand-in nvidia-smi"); free(old); return; }
    fprintf(f, "#!/bin/sh\n"
               "[ -n \"$SMI_FAIL\" ] && { echo 'NVIDIA-SMI has failed'; exit 9; }\n"
               "for a; do [ \"$a\" = -i ] && { echo 'Invalid combination of input arguments'; exit 2; }; done\n"
               "printf '4242, 463\\n%%s, 300\\n' $PPID\n");
    fclose(f);
    chmod(path, 0755);
    snprintf(newpath, sizeof newpath, "%s:%s", dir, old ? old : "/usr/bin:/bin");
    setenv("PATH", newpath, 1);
    CHECK(gpu_apps_query("00000000:01:00.0", &a) == 0 && a.ok && a.n == 2 && a.app[0].pid == 4242 && a.app[0].mib == 463,
          "query with a bus id nvidia-smi refuses: ok %d n %d", a.ok, a.n);
    setenv("SMI_FAIL", "1", 1);
    CHECK(gpu_apps_query(NULL, &a) == -1 && !a.ok, "a failing nvidia-smi gave a listing");
    unsetenv("SMI_FAIL");
    if (old) setenv("PATH", old, 1);
    free(old);
    unlink(path);
    rmdir(dir);
}

static void check_lock(void) {
    char dir[] = "/tmp/dpmem_gpu_share_XXXXXX", path[256], msgpath[300], text[512] = "", want[400];
    int pfd[2], status, fd;
    pid_t holder, child;
    FILE *msg;
    double t0, waited;
    size_t n;
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp: %s", strerror(errno)); return; }
    snprintf(path, sizeof path, "%s/gpu.lock", dir);
    snprintf(msgpath, sizeof msgpath, "%s/msg", dir);
    setenv("DPMEM_GPU_LOCK", path, 1);
    unsetenv("DPMEM_GPU_LOCK_HELD");

    /* a holder that keeps the lock 300 ms */
    if (pipe(pfd) != 0) { CHECK(0, "pipe"); return; }
    holder = fork();
    if (holder == 0) {
        char c = 1;
        if (gpu_lock_take("holder", stderr) <= 0) _exit(2);
        if (write(pfd[1], &c, 1) != 1) _exit(2);
        usleep(300000);
        _exit(0);
    }
    {
        char c;
        CHECK(read(pfd[0], &c, 1) == 1, "the holder did not take the lock");
    }
    msg = fopen(msgpath, "w+");
    t0 = now_s();
    fd = gpu_lock_take("waiter", msg);
    waited = now_s() - t0;
    rewind(msg);
    n = fread(text, 1, sizeof text - 1, msg);
    text[n] = 0;
    fclose(msg);
    snprintf(want, sizeof want, "waiter: waiting for the GPU lock %s (held by pid %ld holder)\n", path, (long)holder);
    CHECK(fd > 0 && waited > 0.2, "the second taker did not wait for the first: fd %d, %.3f s", fd, waited);
    CHECK(strcmp(text, want) == 0, "waiting line \"%s\", want \"%s\"", text, want);
    waitpid(holder, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "holder exit status %d", status);
    {
        FILE *f = fopen(path, "r");
        char line[128] = "", want_line[128];
        if (f) { if (!fgets(line, sizeof line, f)) line[0] = 0; fclose(f); }
        snprintf(want_line, sizeof want_line, "%ld waiter\n", (long)getpid());
        CHECK(strcmp(line, want_line) == 0, "lock file says \"%s\", want \"%s\"", line, want_line);
        CHECK(getenv("DPMEM_GPU_LOCK_HELD") && atol(getenv("DPMEM_GPU_LOCK_HELD")) == (long)getpid(), "DPMEM_GPU_LOCK_HELD not exported");
    }

    /* a child of the holder runs under its lock; anyone else is kept out */
    child = fork();
    if (child == 0) _exit(gpu_lock_take("child", stderr) == 0 ? 0 : 1);
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child of the holder did not run under its lock (status %d)", status);
    child = fork();
    if (child == 0) {
        int other = open(path, O_RDWR | O_CLOEXEC);
        _exit(other >= 0 && flock(other, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK ? 0 : 1);
    }
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the lock was not held against another taker (status %d)", status);

    /* a variable left by a holder that is gone is not trusted: the lock is taken */
    child = fork();
    if (child == 0) _exit(0);
    waitpid(child, &status, 0);
    {
        char dead[32];
        snprintf(dead, sizeof dead, "%ld", (long)child);
        close(fd);                                     /* release ours */
        setenv("DPMEM_GPU_LOCK_HELD", dead, 1);
        fd = gpu_lock_take("again", stderr);
        CHECK(fd > 0, "a dead holder's DPMEM_GPU_LOCK_HELD was trusted (%d)", fd);
        if (fd > 0) close(fd);
    }

    /* a lock file that cannot be made: said, and the test goes on */
    unsetenv("DPMEM_GPU_LOCK_HELD");
    setenv("DPMEM_GPU_LOCK", "/nonexistent-dir/gpu.lock", 1);
    msg = fopen(msgpath, "w+");
    fd = gpu_lock_take("nolock", msg);
    rewind(msg);
    n = fread(text, 1, sizeof text - 1, msg);
    text[n] = 0;
    fclose(msg);
    CHECK(fd == -1 && strstr(text, "nolock: cannot open the GPU lock /nonexistent-dir/gpu.lock: No such file or directory: running without it"),
          "unusable lock file: fd %d, \"%s\"", fd, text);
    /* a link planted at the lock's path (to a file of ours standing in for any file on the machine)
       is not followed: the target keeps its bytes; a FIFO there is refused at once, not waited on */
    {
        char target[300], link[300], fifo[300], got[64] = "";
        const char *victim = "precious contents\n";
        snprintf(target, sizeof target, "%s/victim", dir);
        snprintf(link, sizeof link, "%s/linked.lock", dir);
        snprintf(fifo, sizeof fifo, "%s/fifo.lock", dir);
        FILE *f = fopen(target, "w");
        if (f) { fputs(victim, f); fclose(f); }
        CHECK(symlink(target, link) == 0, "symlink: %s", strerror(errno));
        setenv("DPMEM_GPU_LOCK", link, 1);
        msg = fopen(msgpath, "w+");
        fd = gpu_lock_take("linked", msg);
        rewind(msg);
        n = fread(text, 1, sizeof text - 1, msg);
        text[n] = 0;
        fclose(msg);
        f = fopen(target, "r");
        if (f) { n = fread(got, 1, sizeof got - 1, f); got[n] = 0; fclose(f); }
        CHECK(strcmp(got, victim) == 0, "the lock wrote through a link: the target holds \"%s\"", got);
        CHECK(fd == -1 && strstr(text, "linked: cannot open the GPU lock") && strstr(text, "a symbolic link (not followed)"),
              "a link at the lock's path: fd %d, \"%s\"", fd, text);
        if (fd > 0) close(fd);
        unsetenv("DPMEM_GPU_LOCK_HELD");
        CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
        setenv("DPMEM_GPU_LOCK", fifo, 1);
        msg = fopen(msgpath, "w+");
        fd = gpu_lock_take("fifo", msg);
        rewind(msg);
        n = fread(text, 1, sizeof text - 1, msg);
        text[n] = 0;
        fclose(msg);
        CHECK(fd == -1 && strstr(text, "fifo: the GPU lock") && strstr(text, "is not a regular file: running without it"),
              "a FIFO at the lock's path: fd %d, \"%s\"", fd, text);
        if (fd > 0) close(fd);
        unsetenv("DPMEM_GPU_LOCK_HELD");
        unlink(link); unlink(fifo); unlink(target);
    }
    unlink(msgpath);
    unlink(path);
    rmdir(dir);
    unsetenv("DPMEM_GPU_LOCK");
    unsetenv("DPMEM_GPU_LOCK_HELD");
}

int main(void) {
    check_parse();
    check_verdicts();
    check_query();
    check_lock();
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("test_gpu_share: all checks passed\n");
    return 0;
}
