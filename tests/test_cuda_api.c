/* test_cuda_api.c — the parts of dpmem_cuda.h that need no GPU, built four ways (gcc as C, clang as
   C, g++ as C++, nvcc as CUDA C++) so the header is known to compile and work under each.

   Checks, with tests/nvtx_inject_ext.c attached as the NVTX tool (it refuses, with an "invalid" line,
   every memory call that compute-sanitizer refuses; no check passes with one):
   - tagged device and managed allocations are named by their tag (nvtxMemRegionsName, by pointer)
     and nothing is registered for them (compute-sanitizer holds no regions in the process-wide heap);
     host and pinned ones are not named; DPMEM_NVTX_MEM=0 and DPMEM_NVTX_COUNTERS=0 each turn their
     part off; with no tool attached both stay off;
   - a declared pool (dpmem_cuda_nvtx_pool): its heap registered once, at its first block, with the
     pool's exact base and size; each tagged block a region of exactly its address and size in that
     heap, named by its tag, unregistered when untagged (an unknown pointer is not); a block reaching
     past the pool only named; releasing the pool unregisters its heap and no block afterwards;
     empty, overlapping and unknown pools refused; 3000 blocks through the address set;
   - two threads tagging blocks of a pool at once: every region unregistered, counters end at the
     true live bytes;
   - NVTX counters: one per category and one for the device total, sampled with the exact live bytes
     whenever they change, and only then;
   - dpmem_cuda_nvtx(0, 0) silences both;
   - SNAPSHOT events carry device_tracked = the live tagged DEVICE bytes, and the device figures
     (cudaMemGetInfo) when there is a device, zeros when there is none;
   - without a GPU: dpmem_cuda_malloc returns the very error cudaMalloc returns and accounts nothing,
     timing refuses to start, the sampler starts and stops without writing anything.
   What needs a GPU is in test_cuda_gpu.cu. */
#define DPMEM_IMPLEMENTATION
#include "dpmem_cuda.h"
#include "tests/logread.h"
#include "tests/test_cuda_common.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
/* The CUDA driver maps memory where ASan's shadow gap is; without this, a GPU run dies at start. */
#ifdef __cplusplus
extern "C"
#endif
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }
#endif


static unsigned long long activations_counter, device_counter;   /* ids the tool gave them */

typedef const char *(*record_fn)(void);
typedef void (*clear_fn)(void);
static record_fn rec;
static clear_fn rec_clear;

/* Is this exact line in the capture? */
static int has_line(const char *fmt, ...) {
    char want[512];
    const char *r = rec(), *p;
    size_t n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    n = strlen(want);
    for (p = r; (p = strstr(p, want)) != NULL; p += n)
        if ((p == r || p[-1] == '\n') && p[n] == '\n') return 1;
    return 0;
}

static int count_prefix(const char *prefix);

/* The tool refused nothing since the last clear. */
#define CHECK_VALID() CHECK(count_prefix("invalid") == 0, "the tool refused calls:\n%s", rec())

static int count_prefix(const char *prefix) {
    const char *p = rec();
    int k = 0;
    size_t n = strlen(prefix);
    while (*p) {
        if (strncmp(p, prefix, n) == 0) k++;
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    return k;
}

/* The id the tool gave the counter of that title (0: never registered). */
static unsigned long long counter_id(const char *title) {
    const char *p = rec();
    while ((p = strstr(p, "counter ")) != NULL) {
        unsigned long long id;
        int used = 0;
        if ((p == rec() || p[-1] == '\n') && sscanf(p, "counter %llu %n", &id, &used) == 1 && used > 0) {
            const char *name = p + used, *end = strchr(name, '\n');
            if (end && (size_t)(end - name) == strlen(title) && strncmp(name, title, strlen(title)) == 0) return id;
        }
        p += 8;
    }
    return 0;
}

/* Many blocks of a pool at once (the registered-address set grows and rehashes), freed in another
   order: each unregistered exactly once. */
static void check_region_set(void) {
    enum { N = 3000 };
    static double slots[N];
    int i, missing = 0;
    CHECK(dpmem_cuda_nvtx_pool(slots, sizeof slots) == 0, "pool over the slots refused");
    rec_clear();
    for (i = 0; i < N; i++) dpmem_cuda_tag(&slots[i], sizeof slots[i], "activations/many", DPMEM_DEVICE);
    CHECK(count_prefix("heap+") == 1 && has_line("heap+ %p %zu", (void *)slots, sizeof slots), "one heap for the pool:\n%.300s", rec());
    CHECK(count_prefix("region+") == N && count_prefix("name ") == N, "%d regions registered, %d named, want %d",
          count_prefix("region+"), count_prefix("name "), N);
    CHECK(has_line("region+ %p 8 in %p", (void *)&slots[N - 1], (void *)slots), "the last block's region");
    CHECK_VALID();
    rec_clear();
    for (i = 0; i < N; i++) dpmem_cuda_untag(&slots[(i * 7) % N]);   /* 7 and 3000 are coprime */
    for (i = 0; i < N; i += 97) missing += !has_line("region- %p", (void *)&slots[i]);
    CHECK(count_prefix("region-") == N && missing == 0, "%d unregistered, want %d; %d sampled missing",
          count_prefix("region-"), N, missing);
    CHECK_VALID();
    rec_clear();
    CHECK(dpmem_cuda_nvtx_pool_release(slots) == 0 && has_line("heap- %p", (void *)slots), "pool release:\n%s", rec());
    CHECK_VALID();
}

/* A sub-allocator's pool: its blocks are regions of one heap over it, named by their tags. */
static void check_pool(void) {
    static char arena[1 << 16], other[64];
    char *b1 = arena + 256, *b2 = arena + 4096, *edge = arena + sizeof arena - 100;
    rec_clear();
    CHECK(dpmem_cuda_nvtx_pool(arena, sizeof arena) == 0, "pool refused");
    CHECK(rec()[0] == 0, "the heap is registered before any block:\n%s", rec());
    dpmem_cuda_tag(b1, 1000, "activations/block1", DPMEM_DEVICE);
    activations_counter = counter_id("dpmem activations bytes");   /* the first activations tag */
    CHECK(has_line("heap+ %p %zu", (void *)arena, sizeof arena), "no heap over the pool:\n%s", rec());
    CHECK(has_line("region+ %p 1000 in %p", (void *)b1, (void *)arena) && has_line("name %p activations/block1", (void *)b1),
          "block 1 not a named region of the pool:\n%s", rec());
    rec_clear();
    dpmem_cuda_tag(b2, 4096, "activations/block2", DPMEM_DEVICE);
    CHECK(count_prefix("heap+") == 0, "the heap registered twice:\n%s", rec());
    CHECK(has_line("region+ %p 4096 in %p", (void *)b2, (void *)arena) && has_line("name %p activations/block2", (void *)b2),
          "block 2:\n%s", rec());
    dpmem_cuda_tag(edge, 200, "activations/past_the_end", DPMEM_DEVICE);   /* reaches 100 B past the pool */
    CHECK(!has_line("region+ %p 200 in %p", (void *)edge, (void *)arena) && has_line("name %p activations/past_the_end", (void *)edge),
          "a block reaching past the pool became a region:\n%s", rec());
    CHECK_VALID();
    rec_clear();
    CHECK(dpmem_cuda_untag(b1) == 1000 && has_line("region- %p", (void *)b1), "block 1 not unregistered:\n%s", rec());
    CHECK(dpmem_cuda_untag(edge) == 200 && count_prefix("region-") == 1, "unregistered what was only named:\n%s", rec());
    CHECK_VALID();
    CHECK(dpmem_cuda_nvtx_pool(arena + 100, 10) == -1, "an overlapping pool was accepted");
    CHECK(dpmem_cuda_nvtx_pool(other, 0) == -1 && dpmem_cuda_nvtx_pool(NULL, 64) == -1, "an empty pool was accepted");
    CHECK(dpmem_cuda_nvtx_pool_release(other) == -1, "released a pool never declared");
    rec_clear();
    CHECK(dpmem_cuda_nvtx_pool_release(arena) == 0 && has_line("heap- %p", (void *)arena), "pool release:\n%s", rec());
    CHECK(dpmem_cuda_untag(b2) == 4096 && count_prefix("region-") == 0, "a block unregistered after its heap:\n%s", rec());
    CHECK_VALID();
    rec_clear();
    CHECK(dpmem_cuda_nvtx_pool(arena, sizeof arena) == 0, "the same pool declared again after release refused");
    dpmem_cuda_tag(b1, 8, "activations/again", DPMEM_DEVICE);
    CHECK(has_line("heap+ %p %zu", (void *)arena, sizeof arena) && has_line("region+ %p 8 in %p", (void *)b1, (void *)arena),
          "a pool declared again gets a new heap:\n%s", rec());
    dpmem_cuda_untag(b1);
    CHECK(dpmem_cuda_nvtx_pool_release(arena) == 0, "second release");
    CHECK_VALID();
}

static void check_nvtx(void) {
    static char a[1000], b[24], c[500], h[64], x[8];
    unsigned long long params, grads, optim, device;

    rec_clear();
    dpmem_cuda_tag(a, 1000, "params/wte", DPMEM_DEVICE);   /* NVTX attaches extensions at first use */
    CHECK(has_line("attached mem"), "the memory extension was not handed to the tool:\n%s", rec());
    CHECK(has_line("attached counters"), "the counters extension was not handed to the tool:\n%s", rec());
    params = counter_id("dpmem params bytes");
    device = counter_id("dpmem device bytes");
    device_counter = device;
    CHECK(has_line("name %p params/wte", (void *)a), "allocation not named by its tag:\n%s", rec());
    CHECK(count_prefix("region+") == 0 && count_prefix("heap+") == 0, "a whole allocation was registered:\n%s", rec());
    CHECK_VALID();
    CHECK(params && has_line("sample %llu 1000", params), "params counter not at 1000:\n%s", rec());
    CHECK(device && has_line("sample %llu 1000", device), "device counter not at 1000:\n%s", rec());

    rec_clear();
    dpmem_cuda_tag(b, 24, "params/ln", DPMEM_DEVICE);
    CHECK(has_line("name %p params/ln", (void *)b), "params/ln:\n%s", rec());
    CHECK(has_line("sample %llu 1024", params) && has_line("sample %llu 1024", device), "counters not at 1024:\n%s", rec());
    CHECK(count_prefix("sample ") == 2, "2 samples expected (params, device):\n%s", rec());
    CHECK(count_prefix("counter ") == 0, "a counter registered twice:\n%s", rec());

    rec_clear();
    dpmem_cuda_tag(c, 500, "grads/wte", DPMEM_PINNED);
    grads = counter_id("dpmem grads bytes");
    CHECK(count_prefix("region+") == 0 && count_prefix("name ") == 0, "pinned host memory was named:\n%s", rec());
    CHECK(grads && has_line("sample %llu 500", grads), "grads counter:\n%s", rec());
    CHECK(count_prefix("sample ") == 1, "only grads changed:\n%s", rec());

    rec_clear();
    dpmem_cuda_tag(h, 64, "optimizer/m", DPMEM_HOST);
    optim = counter_id("dpmem optimizer bytes");
    CHECK(count_prefix("region+") == 0 && count_prefix("name ") == 0, "host memory was named:\n%s", rec());
    CHECK(optim && has_line("sample %llu 64", optim), "optimizer counter:\n%s", rec());

    rec_clear();
    CHECK(dpmem_cuda_untag(a) == 1000, "untag returned %zu", dpmem_tag_bytes(a));
    CHECK(count_prefix("region-") == 0, "unregistered an allocation that was only named:\n%s", rec());
    CHECK_VALID();
    CHECK(has_line("sample %llu 24", params) && has_line("sample %llu 24", device), "counters after free:\n%s", rec());

    rec_clear();
    CHECK(dpmem_cuda_untag(a) == 0, "a second untag found bytes");
    CHECK(rec()[0] == 0, "NVTX calls for an unknown pointer:\n%s", rec());

    dpmem_cuda_nvtx(0, 0);
    rec_clear();
    dpmem_cuda_tag(x, 8, "params/quiet", DPMEM_DEVICE);
    CHECK(rec()[0] == 0, "NVTX calls with regions and counters off:\n%s", rec());
    dpmem_cuda_nvtx(1, 1);
    rec_clear();
    dpmem_cuda_untag(c);
    CHECK(has_line("sample %llu 0", grads), "back on:\n%s", rec());
    rec_clear();
    dpmem_cuda_tag(c, 500, "grads/managed", DPMEM_MANAGED);
    CHECK(has_line("name %p grads/managed", (void *)c) && count_prefix("region+") == 0, "managed allocation:\n%s", rec());
    dpmem_cuda_untag(c);
    CHECK_VALID();
    rec_clear();
    CHECK(dpmem_cuda_untag(h) == 64, "host untag");
    CHECK(count_prefix("region-") == 0, "unregistered host memory that was never registered:\n%s", rec());
    check_pool();
    check_region_set();
    /* live now: b (24, device), x (8, device) */
}

/* The value of the last sample of a counter in the capture (-1: none). */
static long long last_sample(unsigned long long id) {
    char want[64];
    const char *p = rec(), *hit = NULL;
    long long v = -1;
    snprintf(want, sizeof want, "sample %llu ", id);
    while ((p = strstr(p, want)) != NULL) {
        if (p == rec() || p[-1] == '\n') hit = p;
        p += strlen(want);
    }
    if (hit) sscanf(hit + strlen(want), "%lld", &v);
    return v;
}

static char stress_bufs[2][128];  /* one pool: both threads register blocks in the same heap, none overlapping */

static void *stress_thread(void *arg) {
    char *base = (char *)arg;
    for (int i = 0; i < 500; i++) {
        dpmem_cuda_tag(base + i % 50, 1 + (size_t)(i % 50), "activations/stress", DPMEM_DEVICE);
        dpmem_cuda_untag(base + i % 50);
    }
    return NULL;
}

/* Two threads tag and untag at once with regions and counters on (the locks, under ASan too):
   every region registered is unregistered, and the counters end at the true live bytes. */
static void check_threads(void) {
    pthread_t th[2];
    size_t device_live = dpmem_live_bytes_in(DPMEM_DEVICE);
    CHECK(dpmem_cuda_nvtx_pool(stress_bufs, sizeof stress_bufs) == 0, "stress pool refused");
    rec_clear();
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, stress_thread, stress_bufs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(count_prefix("region+") == 1000 && count_prefix("region-") == 1000 && count_prefix("name ") == 1000,
          "%d registered, %d unregistered, %d named, want 1000", count_prefix("region+"), count_prefix("region-"),
          count_prefix("name "));
    CHECK_VALID();
    CHECK(dpmem_cuda_nvtx_pool_release(stress_bufs) == 0, "stress pool release");
    CHECK(activations_counter && last_sample(activations_counter) == 0, "activations counter ends at %lld, want 0",
          last_sample(activations_counter));
    CHECK(device_counter && last_sample(device_counter) == (long long)device_live, "device counter ends at %lld, want %zu",
          last_sample(device_counter), device_live);
}

static void check_no_gpu(void) {
    void *p = (void *)&failures, *q = NULL;
    size_t live = dpmem_live_bytes(NULL), used = 1, total = 1;
    cudaError_t bare = cudaMalloc(&q, 1024), got, last, clean;
    (void)cudaGetLastError();
    clean = cudaGetLastError();        /* what a cleared error state reads (no driver: the error stays) */
    rec_clear();
    got = dpmem_cuda_malloc(&p, 1024, "params/nogpu");
    last = cudaGetLastError();
    CHECK(got == bare && got != cudaSuccess, "dpmem_cuda_malloc returned %d, cudaMalloc %d", (int)got, (int)bare);
    CHECK(last == bare, "cudaGetLastError after the wrapper: %d, expected %d", (int)last, (int)bare);
    CHECK(dpmem_live_bytes(NULL) == live, "a failed allocation was accounted");
    CHECK(count_prefix("region+") == 0, "a failed allocation got a region:\n%s", rec());
    CHECK(dpmem_cuda_init() == -1, "init says there is a device");
    {   /* its one line says what is missing, not "CUDA driver version is insufficient" */
        char ef[] = "/tmp/dpmem_api_err.XXXXXX", line[300] = "";
        int fd = mkstemp(ef), saved = dup(2);
        fflush(stderr);
        if (fd >= 0) dup2(fd, 2);
        int rc = dpmem_cuda_timing(1);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        if (f) { rewind(f); if (!fgets(line, sizeof line, f)) line[0] = 0; fclose(f); }
        remove(ef);
        CHECK(rc == -1, "timing started without a device");
        CHECK(access("/proc/driver/nvidia/version", F_OK) == 0 ||
                  strncmp(line, "dpmem: GPU timing of scopes is off: no NVIDIA GPU or driver found (cudaError", 76) == 0,
              "the timing's message: %s", line);
    }
    CHECK(dpmem_cuda_device_memory(&used, &total) == -1 && used == 0 && total == 0, "device figures without a device");
    CHECK(cudaGetLastError() == clean, "our own failed queries left an error behind");
    CHECK(dpmem_cuda_sampler(1) == 0, "sampler did not start");
    usleep(20000);
    CHECK(dpmem_cuda_sampler(0) == 0, "sampler did not stop");
}

static void check_snapshot(const char *path, size_t want_total) {
    LogFile lf;
    char err[1024];
    size_t i, snaps = 0;
    if (log_read(path, &lf, err, sizeof err) != 0) { CHECK(0, "reading the log: %s", err); return; }
    for (i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        if (e->type != 9 || strcmp(log_str(&lf, e->id), "after tags") != 0) continue;
        snaps++;
        CHECK(e->payload_bytes >= 32, "SNAPSHOT payload %u bytes", e->payload_bytes);
        if (e->payload_bytes < 32) break;
        CHECK(lr_u64(e->payload + 16) == 32, "device_tracked %llu, want 32", (unsigned long long)lr_u64(e->payload + 16));
        CHECK(lr_u64(e->payload + 8) == want_total, "device_total %llu, want %zu",
              (unsigned long long)lr_u64(e->payload + 8), want_total);
        if (want_total == 0) CHECK(lr_u64(e->payload) == 0, "device_used without a device");
        else CHECK(lr_u64(e->payload) > 0 && lr_u64(e->payload) <= want_total, "device_used out of range");
    }
    CHECK(snaps == 1, "%zu SNAPSHOT events labelled 'after tags'", snaps);
    CHECK(log_count(&lf, 12) == 0 || want_total > 0, "DEVICE samples without a device");
    log_free(&lf);
}

/* Child mode "env": the DPMEM_NVTX_MEM / DPMEM_NVTX_COUNTERS switches given by the parent. */
static int env_child(void) {
    static char buf[256];
    int want_regions = getenv("DPMEM_NVTX_MEM") && strcmp(getenv("DPMEM_NVTX_MEM"), "0") == 0 ? 0 : 1;
    int want_counters = getenv("DPMEM_NVTX_COUNTERS") && strcmp(getenv("DPMEM_NVTX_COUNTERS"), "0") == 0 ? 0 : 1;
    dpmem_cuda_init();
    dpmem_cuda_tag(buf, sizeof buf, "params/env", DPMEM_DEVICE);
    dpmem_cuda_untag(buf);
    CHECK((count_prefix("name ") == 1) == want_regions, "names %s expected:\n%s", want_regions ? "on" : "off", rec());
    CHECK_VALID();
    CHECK((count_prefix("sample ") > 0) == want_counters, "counters %s expected:\n%s", want_counters ? "on" : "off", rec());
    return failures ? 1 : 0;
}

static void check_env(const char *self) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "DPMEM_NVTX_MEM=0 '%s' env", self);
    CHECK(system(cmd) == 0, "DPMEM_NVTX_MEM=0 not obeyed");
    snprintf(cmd, sizeof cmd, "DPMEM_NVTX_COUNTERS=0 '%s' env", self);
    CHECK(system(cmd) == 0, "DPMEM_NVTX_COUNTERS=0 not obeyed");
    snprintf(cmd, sizeof cmd, "'%s' env", self);
    CHECK(system(cmd) == 0, "regions and counters not on by default with a tool attached");
    snprintf(cmd, sizeof cmd, "env -u NVTX_INJECTION64_PATH '%s' notool", self);
    CHECK(system(cmd) == 0, "regions or counters on without a tool");
}

int main(int argc, char **argv) {
    const char *build = getenv("DPMEM_BUILD") ? getenv("DPMEM_BUILD") : "build";
    char lib[4096], path[600];
    void *h;
    int ndev = 0, have_gpu;
    size_t used = 0, total = 0;

    if (argc > 1 && strcmp(argv[1], "notool") == 0) {  /* no tool attached: regions and counters stay off */
        dpmem_cuda_init();
        if (dpmem__cuda.regions || dpmem__cuda.counters || dpmem__cuda.domain) {
            fprintf(stderr, "FAIL: NVTX regions/counters on with no tool attached\n");
            return 1;
        }
        return 0;
    }
    /* Attach the capture library as NVTX's tool before the first NVTX call. */
    snprintf(lib, sizeof lib, "%s/tests/libnvtx_inject_ext.so", build);
    if (access(lib, R_OK) != 0) { fprintf(stderr, "FAIL: %s is missing (make builds it)\n", lib); return 1; }
    setenv("NVTX_INJECTION64_PATH", lib, 1);
    h = dlopen(lib, RTLD_NOW);
    if (!h) { fprintf(stderr, "FAIL: dlopen %s: %s\n", lib, dlerror()); return 1; }
    rec = (record_fn)(uintptr_t)dlsym(h, "nvtx_inject_ext_record");
    rec_clear = (clear_fn)(uintptr_t)dlsym(h, "nvtx_inject_ext_clear");
    if (!rec || !rec_clear) { fprintf(stderr, "FAIL: %s lacks its record functions\n", lib); return 1; }
    if (argc > 1 && strcmp(argv[1], "env") == 0) return env_child();

    test_cuda_path(path, sizeof path, "cuda_api.log");
    if (dpmem_open(path) != 0) { fprintf(stderr, "FAIL: cannot open %s\n", path); return 1; }
    have_gpu = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
    (void)cudaGetLastError();
    dpmem_cuda_init();

    check_nvtx();
    check_threads();
    check_env(argv[0]);
    if (!have_gpu) check_no_gpu();
    else {
        CHECK(dpmem_cuda_init() == 0, "init says there is no device");
        CHECK(dpmem_cuda_device_memory(&used, &total) == 0 && total > 0 && used <= total, "device figures");
    }
    dpmem_snapshot("after tags");
    dpmem_close();
    check_snapshot(path, total);
    unlink(path);

    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("test_cuda_api: all checks passed (%s)\n", have_gpu ? "with a GPU" : "no GPU: the no-device paths");
    return 0;
}
