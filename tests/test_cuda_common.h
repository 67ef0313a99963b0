/* test_cuda_common.h — what the dpmem_cuda tests share: CHECK with a message, a scratch path, the
   BEGIN lookup behind GPU_TIME events, and the OOM scenario (a child process runs out of device memory
   in scopes step > backward, then dies without closing its log) with its checks. Include after
   dpmem_cuda.h and tests/logread.h. C and C++. */
#ifndef TEST_CUDA_COMMON_H
#define TEST_CUDA_COMMON_H

#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* $DPMEM_BUILD/tmp/<name>.<pid> (or /tmp/<name>.<pid> when that directory cannot be made). */
static inline const char *test_cuda_path(char *buf, size_t n, const char *name) {
    const char *b = getenv("DPMEM_BUILD");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tmp", b && *b ? b : "build");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) snprintf(dir, sizeof dir, "/tmp");
    snprintf(buf, n, "%s/%s.%d", dir, name, (int)getpid());
    return buf;
}

/* The BEGIN event a GPU_TIME refers to (same name, thread and timestamp), or NULL. */
static inline const LogEvent *test_cuda_find_begin(const LogFile *lf, uint32_t id, uint32_t thread, uint64_t ts) {
    for (size_t i = 0; i < lf->nev; i++)
        if (lf->ev[i].type == 4 && lf->ev[i].id == id && lf->ev[i].thread == thread && lf->ev[i].ts == ts) return &lf->ev[i];
    return NULL;
}

/* The OOM child (argv: oom <log> <bytes to ask>): params 64 MiB and grads 32 MiB live, then the
   request in "backward". Exits 3 right after the failed call, skipping dpmem_close and atexit, so the
   OOM event must already be in the file. 2: something else failed; 4: the CUDA error was lost. */
static inline int test_cuda_oom_child(const char *log, size_t ask) {
    void *p, *g, *x = NULL;
    if (dpmem_open(log) != 0) return 2;
    DPMEM_SCOPE("step");
    if (dpmem_cuda_malloc(&p, 64 * MiB, "params/wte") != cudaSuccess) return 2;
    if (dpmem_cuda_malloc(&g, 32 * MiB, "grads/wte") != cudaSuccess) return 2;
    {
        DPMEM_SCOPE("backward");
        if (dpmem_cuda_malloc(&x, ask, "ghost/layers.7.ggT") != cudaErrorMemoryAllocation) return 2;
        if (cudaGetLastError() != cudaErrorMemoryAllocation) return 4;
        _exit(3);
    }
}

/* Runs the child (self oom ...) asking for `ask` bytes of a device of `total` bytes and checks its
   stderr report and its log. want_used: the device's used bytes the OOM event must carry (0: any
   figure in (0, total]). */
static inline void test_cuda_oom_check(const char *self, size_t ask, size_t total, size_t want_used) {
    char log[600], errf[600], cmd[2000], text[8192] = "", err[1024], want[160];
    LogFile lf;
    int status, ooms = 0, allocs = 0;
    size_t n;
    FILE *fp;
    test_cuda_path(log, sizeof log, "cuda_oom.log");
    test_cuda_path(errf, sizeof errf, "cuda_oom.err");
    snprintf(cmd, sizeof cmd, "DPMEM_CUDA_TIMING= DPMEM_SAMPLE_MS= '%s' oom '%s' %zu 2> '%s'", self, log, ask, errf);
    status = system(cmd);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3, "the OOM child exited with status %d", status);
    fp = fopen(errf, "r");
    n = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    text[n] = 0;
    if (fp) fclose(fp);
    printf("  OOM report: %s", text);
    snprintf(want, sizeof want, "OOM in backward: asked %.1f GiB for ghost/layers.7.ggT", (double)ask / (double)GiB);
    CHECK(strstr(text, want) && strstr(text, "params 64.0 MiB") && strstr(text, "grads 32.0 MiB"),
          "stderr report, want \"%s\", params 64.0 MiB, grads 32.0 MiB:\n%s", want, text);
    if (log_read(log, &lf, err, sizeof err) != 0) { CHECK(0, "reading the OOM log: %s", err); return; }
    CHECK(!lf.closed, "the child's log was closed: it should have died first");
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        const uint8_t *p = e->payload, *q;
        uint32_t nstack, ncat, ntop;
        int params = 0, grads = 0;
        if (e->type == 6) allocs++;
        if (e->type != 11) continue;
        ooms++;
        nstack = lr_u32(p + 24); ncat = lr_u32(p + 28); ntop = lr_u32(p + 32);
        q = p + 40;
        CHECK(strcmp(log_str(&lf, e->id), "ghost/layers.7.ggT") == 0 && e->aux == DPMEM_DEVICE, "OOM tag/space");
        CHECK(lr_u64(p) == ask, "OOM requested %llu, want %zu", (unsigned long long)lr_u64(p), ask);
        CHECK(lr_u64(p + 16) == total, "OOM device_total %llu, want %zu", (unsigned long long)lr_u64(p + 16), total);
        if (want_used) CHECK(lr_u64(p + 8) == want_used, "OOM device_used %llu, want %zu", (unsigned long long)lr_u64(p + 8), want_used);
        else CHECK(lr_u64(p + 8) > 0 && lr_u64(p + 8) <= total, "OOM device_used %llu", (unsigned long long)lr_u64(p + 8));
        CHECK(nstack == 2 && strcmp(log_str(&lf, lr_u32(q)), "step") == 0 && strcmp(log_str(&lf, lr_u32(q + 4)), "backward") == 0,
              "OOM scope stack (%u deep)", nstack);
        q += (4 * nstack + 7) & ~7u;
        for (uint32_t c = 0; c < ncat; c++, q += 16) {
            if (strcmp(log_str(&lf, lr_u32(q)), "params") == 0) params = lr_u64(q + 8) == 64 * MiB;
            if (strcmp(log_str(&lf, lr_u32(q)), "grads") == 0) grads = lr_u64(q + 8) == 32 * MiB;
        }
        CHECK(params && grads, "OOM categories: params 64 MiB and grads 32 MiB expected");
        CHECK(ntop == 2 && strcmp(log_str(&lf, lr_u32(q)), "params/wte") == 0 && lr_u64(q + 8) == 64 * MiB &&
              strcmp(log_str(&lf, lr_u32(q + 16)), "grads/wte") == 0 && lr_u64(q + 24) == 32 * MiB,
              "OOM largest buffers (%u)", ntop);
    }
    CHECK(ooms == 1 && allocs == 2, "OOM log: %d OOM and %d ALLOC events, want 1 and 2", ooms, allocs);
    log_free(&lf);
    unlink(log);
    unlink(errf);
}

#endif
