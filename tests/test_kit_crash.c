/* test_kit_crash.c — the log survives its process dying. Child processes record a known set of
   events and then abort(), segfault, exit() without dpmem_close(), _exit() (no atexit handlers), or
   get SIGKILL (after telling the parent what they wrote, and also while writing flat out); the parent
   reads each log back and checks that everything completely written is there. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "check.h"
#include "logread.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 5000 };
enum { MODE_ABORT, MODE_SEGV, MODE_EXIT, MODE__EXIT, MODE_KILL_AFTER, MODE_KILL_DURING };
static const char *mode_name[] = { "abort", "segv", "exit", "_exit", "kill-after", "kill-during" };

/* What every child records before dying: META, N × (scope, alloc), N/2 frees, a snapshot. */
static void record(void) {
    static char buf[N];
    dpmem_meta("run", "crash-test");
    for (int i = 0; i < N; i++) {
        DPMEM_SCOPE("work");
        dpmem_tag_alloc(buf + i, 16, i % 2 ? "activations/odd" : "params/even");
        if (i % 2) dpmem_tag_free(buf + i);
    }
    dpmem_snapshot("before_death");
}

static void child(int mode, const char *path, int fd_ready) {
    signal(SIGSEGV, SIG_DFL);   /* die of it, not of a sanitizer's report */
    signal(SIGABRT, SIG_DFL);
    if (dpmem_open(path) != 0) _exit(3);
    if (mode == MODE_KILL_DURING) {
        static char b;
        if (write(fd_ready, "g", 1) != 1) _exit(4);
        for (;;) { DPMEM_SCOPE("spin"); dpmem_tag_alloc(&b, 1, "x/y"); dpmem_tag_free(&b); }
    }
    record();
    switch (mode) {
    case MODE_ABORT: abort();
    case MODE_SEGV: {
        /* a real segfault, without undefined behaviour: a store to a page with no access rights */
        volatile char *page = (volatile char *)mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        page[0] = 1;
        _exit(5);
    }
    case MODE_EXIT: exit(0);
    case MODE__EXIT: _exit(0);
    case MODE_KILL_AFTER:
        if (write(fd_ready, "r", 1) != 1) _exit(4);
        for (;;) pause();
    }
    _exit(6);
}

static void check_full_log(const char *path, int mode) {
    char err[1024];
    LogFile lf;
    int ok = log_read(path, &lf, err, sizeof err) == 0;
    CHECK(ok);
    if (!ok) { fprintf(stderr, "%s: %s\n", mode_name[mode], err); return; }
    size_t begins = log_count(&lf, 4), ends = log_count(&lf, 5), allocs = log_count(&lf, 6), frees = log_count(&lf, 7);
    int meta = 0, snap = 0;
    for (size_t i = 0; i < lf.nev; i++) {
        if (lf.ev[i].type == 3) meta += !strcmp(log_str(&lf, lf.ev[i].id), "run");
        if (lf.ev[i].type == 9) snap += !strcmp(log_str(&lf, lf.ev[i].id), "before_death");
    }
    if (begins != N || allocs != N || frees != N / 2 || !snap)
        fprintf(stderr, "%s: begins %zu ends %zu allocs %zu frees %zu snap %d\n", mode_name[mode], begins, ends, allocs, frees, snap);
    CHECK_EQ_U(begins, N);
    CHECK_EQ_U(ends, N);
    CHECK_EQ_U(allocs, N);
    CHECK_EQ_U(frees, N / 2);
    CHECK_EQ_U(meta, 1);
    CHECK_EQ_U(snap, 1);
    /* exit() runs the kit's atexit handler, which closes the log; the others leave it unclosed */
    CHECK_EQ_U(lf.closed, mode == MODE_EXIT);
    log_free(&lf);
}

int main(void) {
    for (int mode = MODE_ABORT; mode <= MODE_KILL_DURING; mode++) {
        char path[512], name[64];
        snprintf(name, sizeof name, "crash_%s.log", mode_name[mode]);
        test_path(path, sizeof path, name);
        int pipefd[2];
        if (pipe(pipefd) != 0) return 2;
        pid_t pid = fork();
        if (pid == 0) { close(pipefd[0]); child(mode, path, pipefd[1]); }
        close(pipefd[1]);
        int status = 0;
        if (mode == MODE_KILL_AFTER || mode == MODE_KILL_DURING) {
            char c;
            CHECK(read(pipefd[0], &c, 1) == 1);
            if (mode == MODE_KILL_DURING) usleep(50000);   /* let it write flat out for a while */
            kill(pid, SIGKILL);
        }
        waitpid(pid, &status, 0);
        close(pipefd[0]);
        int expect_sig = mode == MODE_ABORT ? SIGABRT : mode == MODE_SEGV ? SIGSEGV :
                         mode >= MODE_KILL_AFTER ? SIGKILL : 0;
        if (expect_sig) CHECK(WIFSIGNALED(status) && WTERMSIG(status) == expect_sig);
        else CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        if (mode != MODE_KILL_DURING) { check_full_log(path, mode); continue; }

        /* Killed mid-stream: every event up to the cut is whole, BEGIN/END alternate, and allocs
           and frees pair up, except at most the last of each (the one being written). */
        char err[1024];
        LogFile lf;
        CHECK(log_read(path, &lf, err, sizeof err) == 0);
        size_t b = log_count(&lf, 4), e = log_count(&lf, 5), a = log_count(&lf, 6), f = log_count(&lf, 7);
        CHECK(b > 1000);                 /* it did write a lot before dying */
        CHECK(b - e <= 1 && a - f <= 1 && b >= a && b - a <= 1);
        CHECK(!lf.closed);
        log_free(&lf);
    }
    return check_exit("test_kit_crash");
}
