/* test_cuda_fake.c — dpmem_cuda.h against a simulated GPU (tests/test_cuda_fakert.c, linked in place
   of libcudart), so the GPU layer's logic is checked with exact figures on every machine. The same
   points run against real hardware in test_cuda_gpu.cu.

   Checks:
   - DPMEM_CUDA_TIMING=1 and DPMEM_SAMPLE_MS=5 in the environment turn timing and the sampler on;
   - tagged bytes per space (device, async, pinned, managed), ALLOC events carry the space;
   - SNAPSHOT: device used/total exactly the fake's, tracked = the tagged DEVICE bytes;
   - an error other than out-of-memory is returned unchanged, accounts nothing, writes no OOM;
   - OOM (in a child that then dies without closing the log): the OOM event with exact request,
     device used/total, scope stack, categories and largest buffers, and the stderr report;
   - GPU time of scopes: nested 20+5 ms of simulated GPU work give 25 ms and 5 ms; the scopes and a
     snapshot taken meanwhile never wait (no event synchronize) and leave no cudaErrorNotReady as the
     thread's last error (nor clear the program's own); the times come out after the busy
     snapshot; 3000 scopes (past the pending ring) all get a GPU_TIME and events are recycled; a scope
     open when timing was switched off and on gets none; two threads each get their own, tied to their
     BEGIN events;
   - the program's callback (dpmem_cuda_on_gpu_time) gets the same times with the enclosing scope
     (spin_5ms inside spin_25ms), all 3000 tiny ones, one with no log open, none once unset;
   - a child forked while timing and the sampler run records no CUDA event and exits cleanly;
   - the sampler's DEVICE events carry the fake's figures. */
#define DPMEM_IMPLEMENTATION
#include "dpmem_cuda.h"
#include "tests/logread.h"
#include "tests/test_cuda_fakert.h"
#include "tests/test_cuda_common.h"

static size_t fake_used(void) {
    size_t f, t;
    cudaMemGetInfo(&f, &t);
    return t - f;
}

/* ---- accounting, snapshot, errors ---- */

static size_t snap_used, snap_tracked;

static void check_accounting(void) {
    void *d, *a, *h, *m, *x = (void *)&failures;
    size_t used0 = fake_used();
    CHECK(dpmem_cuda_malloc(&d, 3 * MiB + 1, "params/wq") == cudaSuccess, "malloc");
    CHECK(fake_used() - used0 == 4 * MiB, "fake rounding");
    CHECK(dpmem_cuda_malloc_async(&a, 5 * MiB, "activations/x", 0) == cudaSuccess, "malloc_async");
    CHECK(dpmem_cuda_malloc_host(&h, 7 * MiB, "pinned/staging") == cudaSuccess, "malloc_host");
    CHECK(dpmem_cuda_malloc_managed(&m, 1 * MiB, "optimizer/m") == cudaSuccess, "malloc_managed");
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) == 8 * MiB + 1, "device bytes %zu", dpmem_live_bytes_in(DPMEM_DEVICE));
    CHECK(dpmem_live_bytes_in(DPMEM_PINNED) == 7 * MiB, "pinned bytes %zu", dpmem_live_bytes_in(DPMEM_PINNED));
    CHECK(dpmem_live_bytes_in(DPMEM_MANAGED) == 1 * MiB, "managed bytes %zu", dpmem_live_bytes_in(DPMEM_MANAGED));
    snap_used = fake_used();
    snap_tracked = dpmem_live_bytes_in(DPMEM_DEVICE);
    dpmem_snapshot("fake snapshot");

    fake_cuda_fail_next(cudaErrorInvalidValue);
    CHECK(dpmem_cuda_malloc(&x, 64, "params/bad") == cudaErrorInvalidValue, "error not returned unchanged");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "last error changed");
    CHECK(x == (void *)&failures && dpmem_live_bytes("params") == 3 * MiB + 1, "a failed call was accounted");

    CHECK(dpmem_cuda_free(d) == cudaSuccess && dpmem_cuda_free_async(a, 0) == cudaSuccess &&
          dpmem_cuda_free_host(h) == cudaSuccess && dpmem_cuda_free(m) == cudaSuccess, "frees");
    CHECK(dpmem_live_bytes(NULL) == 0 && fake_used() == used0, "after frees: %zu tagged, %zu used",
          dpmem_live_bytes(NULL), fake_used());
    CHECK(dpmem_cuda_free(NULL) == cudaSuccess, "free(NULL)");
}

/* ---- GPU time ---- */

static uint64_t busy_snapshot_ts;

static void *other_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) {
        DPMEM_SCOPE("thread_b");
        fake_cuda_launch(100000);
    }
    return NULL;
}

static void check_timing(void) {
    FakeCudaStats s0, s1;
    pthread_t th;
    s0 = fake_cuda_stats();
    {
        DPMEM_SCOPE("spin_25ms");
        fake_cuda_launch(20000000);
        {
            DPMEM_SCOPE("spin_5ms");
            fake_cuda_launch(5000000);
        }
    }
    dpmem_snapshot("while busy");
    /* the scope ends and the snapshot polled events still pending (cudaErrorNotReady): none of it may
       be left as this thread's last error, or the next launch check (cudaGetLastError) of the program,
       e.g. the CUDA backend's cudaLaunchCheck, would fail with "device not ready" */
    CHECK(cudaGetLastError() == cudaSuccess, "polling pending GPU times left an error behind");
    s1 = fake_cuda_stats();
    CHECK(s1.records - s0.records == 4, "%ld events recorded for 2 scopes", s1.records - s0.records);
    CHECK(s1.syncs == s0.syncs, "the scopes or the snapshot waited for the GPU (%ld syncs)", s1.syncs - s0.syncs);
    {   /* and an error of the program's own, not yet checked, is still there after a scope ends */
        CHECK(cudaSetDevice(7) == cudaErrorInvalidDevice, "the fake's cudaSetDevice(7)");
        {
            DPMEM_SCOPE("user_error_pending");
            fake_cuda_launch(1000000);
        }
        CHECK(cudaGetLastError() == cudaErrorInvalidDevice, "the program's pending error was lost at a scope end");
    }

    for (int i = 0; i < 3000; i++) {
        DPMEM_SCOPE("tiny");
        fake_cuda_launch(1000);
    }
    {   /* a scope open across off/on gets no time; one begun after gets its time */
        DPMEM_SCOPE("across_off_on");
        dpmem_cuda_timing(0);
        CHECK(dpmem_cuda_timing(1) == 0, "timing back on");
        {
            DPMEM_SCOPE("after_on");
            fake_cuda_launch(2000000);
        }
    }
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, NULL);
    {   /* a forked child (timing and sampler on in the parent) runs a scope and exits cleanly */
        int status = -1;
        pid_t pid = fork();
        if (pid == 0) {
            long records = fake_cuda_stats().records;
            alarm(10);                                 /* a hang at exit fails the check below */
            { DPMEM_SCOPE("in_child"); }
            exit(fake_cuda_stats().records == records ? 0 : 5);   /* no CUDA events in the child */
        }
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "forked child: status %d", status);
    }
    dpmem_cuda_flush();
    s1 = fake_cuda_stats();
    CHECK(s1.events_created <= 2 * 1024 + 64 + 2 && s1.events_created < s1.records / 2,
          "%ld events created for %ld records: not recycled", s1.events_created, s1.records);
}

/* ---- the program's callback (dpmem_cuda_on_gpu_time): the same times, log or no log ---- */

static struct {
    uint32_t id25, id5, tiny, after_close;
    size_t n25, n5, ntiny, nafter, total, wrong_user;
    uint64_t ns25, ns5, ns_after;
    uint32_t parent25, parent5;
} cb;

static void on_gpu_time(void *user, uint32_t name, uint32_t parent, uint64_t begin_ts, uint64_t ns) {
    (void)begin_ts;
    if (user != &cb) cb.wrong_user++;
    cb.total++;
    if (name == cb.id25) { cb.n25++; cb.ns25 = ns; cb.parent25 = parent; }
    if (name == cb.id5) { cb.n5++; cb.ns5 = ns; cb.parent5 = parent; }
    if (name == cb.tiny) cb.ntiny++;
    if (name == cb.after_close) { cb.nafter++; cb.ns_after = ns; }
}

static void check_callback(void) {
    CHECK(cb.wrong_user == 0, "the callback got another user pointer %zu times", cb.wrong_user);
    CHECK(cb.n25 == 1 && cb.ns25 >= 25000000 && cb.ns25 < 26000000 && cb.parent25 == 0,
          "callback spin_25ms: %zu, %llu ns, parent %u", cb.n25, (unsigned long long)cb.ns25, cb.parent25);
    CHECK(cb.n5 == 1 && cb.ns5 >= 4999000 && cb.ns5 <= 5001000 && cb.parent5 == cb.id25,
          "callback spin_5ms: %zu, %llu ns, parent %u (want spin_25ms %u)", cb.n5, (unsigned long long)cb.ns5, cb.parent5, cb.id25);
    CHECK(cb.ntiny == 3000, "callback: %zu of 3000 tiny scopes", cb.ntiny);
    CHECK(cb.nafter == 1 && cb.ns_after >= 1000000 && cb.ns_after < 1200000, "callback after the log closed: %zu, %llu ns",
          cb.nafter, (unsigned long long)cb.ns_after);
}

/* ---- the log ---- */

static void check_log(const char *path) {
    LogFile lf;
    char err[1024];
    size_t last = 0, n25 = 0, n5 = 0, tiny = 0, across = 0, after = 0, other = 0, samples = 0, snaps = 0, pinned = 0;
    uint32_t main_thread = 0, b_thread = 0;
    if (log_read(path, &lf, err, sizeof err) != 0) { CHECK(0, "reading the log: %s", err); return; }
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        const char *name = log_str(&lf, e->id);
        if (e->type == 9 && strcmp(name, "fake snapshot") == 0) {
            snaps++;
            CHECK(lr_u64(e->payload) == snap_used && lr_u64(e->payload + 8) == FAKE_TOTAL && lr_u64(e->payload + 16) == snap_tracked,
                  "snapshot %llu/%llu tracked %llu, want %zu/%zu tracked %zu", (unsigned long long)lr_u64(e->payload),
                  (unsigned long long)lr_u64(e->payload + 8), (unsigned long long)lr_u64(e->payload + 16), snap_used,
                  FAKE_TOTAL, snap_tracked);
        }
        if (e->type == 9 && strcmp(name, "while busy") == 0) busy_snapshot_ts = e->ts;
        if (e->type == 6 && e->aux == DPMEM_PINNED) pinned++;
        if (e->type == 12) {
            samples++;
            CHECK(lr_u64(e->payload + 8) == FAKE_TOTAL && lr_u64(e->payload) >= FAKE_CONTEXT, "DEVICE sample figures");
        }
        if (e->type != 10) continue;
        uint32_t thread = lr_u32(e->payload);
        uint64_t begin = lr_u64(e->payload + 8), gpu = lr_u64(e->payload + 16);
        CHECK(test_cuda_find_begin(&lf, e->id, thread, begin), "GPU_TIME of %s not tied to a BEGIN", name);
        if (strcmp(name, "spin_25ms") == 0) {
            n25++;
            main_thread = thread;
            CHECK(gpu >= 25000000 && gpu < 26000000, "spin_25ms: %llu ns", (unsigned long long)gpu);
            CHECK(busy_snapshot_ts && e->ts > busy_snapshot_ts, "spin_25ms resolved before the busy snapshot");
        } else if (strcmp(name, "spin_5ms") == 0) {
            n5++;
            CHECK(gpu >= 4999000 && gpu <= 5001000, "spin_5ms: %llu ns", (unsigned long long)gpu);
        } else if (strcmp(name, "tiny") == 0) {
            tiny++;
        } else if (strcmp(name, "across_off_on") == 0) {
            across++;
        } else if (strcmp(name, "after_on") == 0) {
            after++;
            CHECK(gpu >= 1999000 && gpu <= 2001000, "after_on: %llu ns", (unsigned long long)gpu);
        } else if (strcmp(name, "thread_b") == 0) {
            other++;
            b_thread = thread;
        } else if (strcmp(name, "last_before_close") == 0) {
            last++;
            /* the queue was idle: the time also holds the host gap between the begin event and the launch */
            CHECK(gpu >= 1000000 && gpu < 1200000, "last_before_close: %llu ns", (unsigned long long)gpu);
        }
    }
    CHECK(last == 1, "%zu GPU_TIME for the scope that only dpmem_close() could flush", last);
    CHECK(snaps == 1 && pinned == 1, "%zu snapshots, %zu pinned ALLOCs", snaps, pinned);
    CHECK(n25 == 1 && n5 == 1, "GPU_TIME: %zu spin_25ms, %zu spin_5ms", n25, n5);
    CHECK(tiny == 3000, "%zu GPU_TIME for 3000 tiny scopes", tiny);
    CHECK(across == 0 && after == 1, "across_off_on: %zu (want 0), after_on: %zu (want 1)", across, after);
    CHECK(other == 10 && b_thread != main_thread, "thread_b: %zu GPU_TIME, thread %u vs main %u", other, b_thread, main_thread);
    CHECK(samples >= 3, "%zu DEVICE samples from the sampler", samples);
    log_free(&lf);
}

int main(int argc, char **argv) {
    char path[600];
    if (argc > 3 && strcmp(argv[1], "oom") == 0) return test_cuda_oom_child(argv[2], (size_t)strtoull(argv[3], NULL, 10));
    setenv("DPMEM_CUDA_TIMING", "1", 1);
    setenv("DPMEM_SAMPLE_MS", "5", 1);
    test_cuda_path(path, sizeof path, "cuda_fake.log");
    if (dpmem_open(path) != 0) { fprintf(stderr, "FAIL: cannot open %s\n", path); return 1; }
    CHECK(dpmem_cuda_init() == 0, "the fake device was not found");
    cb.id25 = dpmem_intern("spin_25ms"); cb.id5 = dpmem_intern("spin_5ms"); cb.tiny = dpmem_intern("tiny");
    cb.after_close = dpmem_intern("after_close");
    dpmem_cuda_on_gpu_time(on_gpu_time, &cb);
    check_accounting();
    check_timing();
    usleep(30000);                                     /* let the sampler write a few */
    {   /* no flush: dpmem_close() itself must write this scope's GPU time (the kit's close hook) */
        DPMEM_SCOPE("last_before_close");
        fake_cuda_launch(1000000);
    }
    dpmem_close();
    {   /* no log open: the callback still gets the time */
        DPMEM_SCOPE("after_close");
        fake_cuda_launch(1000000);
    }
    dpmem_cuda_flush();
    dpmem_cuda_on_gpu_time(NULL, NULL);
    {   /* and none once it is unset */
        DPMEM_SCOPE("after_close");
        fake_cuda_launch(1000000);
    }
    dpmem_cuda_flush();
    check_callback();
    dpmem_cuda_shutdown();
    check_log(path);
    unlink(path);
    test_cuda_oom_check(argv[0], FAKE_TOTAL, FAKE_TOTAL, FAKE_CONTEXT + 96 * MiB);
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("test_cuda_fake: all checks passed\n");
    return 0;
}
