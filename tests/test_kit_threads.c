/* test_kit_threads.c — 8 threads × 100,000 iterations of (scope, tagged alloc, tagged free) with the
   log on: the totals are exact, the peak the kit reports is the one the log replays to, and not one
   event is missing from the log. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "check.h"
#include "logread.h"

#include <pthread.h>

enum { THREADS = 8, ITERS = 100000 };
static char slab[THREADS][64];   /* addresses to tag: one per thread, never dereferenced by the kit */

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    static const char *tags[THREADS] = { "activations/t0", "grads/t1", "activations/t2", "ghost/t3",
                                         "activations/t4", "norms/t5", "activations/t6", "workspace/t7" };
    long long *keep = (long long *)malloc(1000 * (size_t)(t + 1));
    DPMEM_TAG_ALLOC(keep, 1000 * (size_t)(t + 1), "params/keep");   /* lives until the end */
    for (int i = 0; i < ITERS; i++) {
        DPMEM_SCOPE("iteration");
        DPMEM_TAG_ALLOC(slab[t], (size_t)(i % 100 + 1), tags[t]);
        DPMEM_TAG_FREE(slab[t]);
    }
    return keep;
}

int main(void) {
    char path[512], err[1024];
    test_path(path, sizeof path, "threads.log");
    CHECK(dpmem_open(path) == 0);
    pthread_t th[THREADS];
    void *keep[THREADS] = {0};
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], &keep[t]);

    CHECK_EQ_U(dpmem_live_bytes(NULL), 36000);          /* 1000·(1+…+8) kept */
    CHECK_EQ_U(dpmem_live_bytes("params"), 36000);
    CHECK_EQ_U(dpmem_live_bytes("activations"), 0);
    CHECK_EQ_U(dpmem_peak_bytes("activations") <= 400, 1);
    size_t peak = dpmem_peak_bytes(NULL);
    CHECK(peak >= 36000 && peak <= 36000 + 8 * 100);
    for (int t = 0; t < THREADS; t++) { DPMEM_TAG_FREE(keep[t]); free(keep[t]); }
    CHECK_EQ_U(dpmem_live_bytes(NULL), 0);
    dpmem_close();

    LogFile lf;
    CHECK(log_read(path, &lf, err, sizeof err) == 0);
    size_t begins = 0, ends = 0, allocs = 0, frees = 0;
    uint64_t live = 0, maxlive = 0, last = 0;
    int ordered = 1;
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        begins += e->type == 4; ends += e->type == 5;
        if (e->type == 6 || e->type == 7) {
            if (e->ts <= last) ordered = 0;
            last = e->ts;
            uint64_t b = lr_u64(e->payload + 8);
            if (e->type == 6) { allocs++; live += b; if (live > maxlive) maxlive = live; }
            else { frees++; live -= b; }
        }
    }
    CHECK_EQ_U(begins, (size_t)THREADS * ITERS);
    CHECK_EQ_U(ends, (size_t)THREADS * ITERS);
    CHECK_EQ_U(allocs, (size_t)THREADS * ITERS + THREADS);
    CHECK_EQ_U(frees, (size_t)THREADS * ITERS + THREADS);
    CHECK(ordered);
    CHECK_EQ_U(live, 0);
    CHECK_EQ_U(maxlive, peak);                          /* the replay finds the kit's own peak */
    CHECK(lf.closed);
    log_free(&lf);
    remove(path);
    return check_exit("test_kit_threads");
}
