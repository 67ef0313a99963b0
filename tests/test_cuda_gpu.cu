/* test_cuda_gpu.cu — what dpmem_cuda.h does on a real GPU. Without one it prints one SKIP line naming
   what it could not check and exits 77.

   Checks:
   - tagged totals vs cudaMemGetInfo deltas for a series of allocations: the kit's DEVICE bytes are the
     exact sum asked for; the device's used bytes grow by the same within the allocator's rounding
     (measured and printed per allocation; asserted: under 2 MiB per allocation of 2 MiB or more, and
     under 2 MiB × the count over the series), and return to where they were after the frees;
   - SNAPSHOT events carry cudaMemGetInfo's total and the tagged DEVICE bytes;
   - the cuBLAS workspace helper tags exactly the workspace it gives cuBLAS;
   - GPU time of scopes against kernels of known duration (a spin on %globaltimer): 20 ms and 5 ms
     nested, the scopes themselves return at once (no stall), a snapshot taken while the GPU is busy
     does not wait either, and the times land in the log after flush, tied to their BEGIN events;
     3000 timed scopes (more than the pending ring holds) all get their GPU_TIME;
   - cudaMallocAsync/cudaFreeAsync, cudaMallocHost, cudaMallocManaged and the macro forms: bytes in the
     right memory space, back to zero after the frees;
   - a sub-allocator's pool (dpmem_cuda_nvtx_pool): blocks tagged inside it, written by a kernel,
     untagged, the pool released, the bytes exact (under compute-sanitizer: the NVTX heap and regions
     accepted, the writes in bounds);
   - the background sampler writes DEVICE events with the device's figures;
   - an OOM provoked on purpose (more than the device has, in a child process that then dies without
     closing the log): the OOM event with the request, tag, device figures, scope stack, categories and
     largest buffers, the stderr report, and the events before it all in the log.
   The checks on device-wide figures hold only if no other process changes its device memory meanwhile:
   the test takes the GPU test lock (tests/gpu_share.h: no other GPU test of ours runs beside it) and
   lists the device's other processes before and after; a device-wide check that fails while another
   process holds device memory is skipped with a line naming it (exit 77 if nothing else failed), and
   counts as a failure of the kit otherwise.
   Modes for tests/test_cuda_memcheck.sh: "clean" (everything but the OOM, no timing bounds: the
   sanitizer slows launches and pads allocations), "leak" (leaks a tagged buffer on purpose). */
#define DPMEM_IMPLEMENTATION
#define DPMEM_CUDA_CUBLAS
#include "dpmem_cuda.h"
#include "tests/logread.h"
#include "tests/test_cuda_common.h"
#include "tests/gpu_share.h"
#include "kernels/cuda/cuda_no_device.h"

static int relaxed;

/* Checks on device-wide figures (cudaMemGetInfo deltas) are held back: a failure counts only if no
   other process held device memory during the run (gpu_share.h); otherwise it is skipped, with a line
   naming those processes, because it says nothing about the kit's tags. */
#define DEVICE_MAX_HELD 64
static char device_held[DEVICE_MAX_HELD][256];
static int device_nheld;
#define DEVICE_CHECK(cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond) && device_nheld < DEVICE_MAX_HELD) {                                           \
            int k_ = snprintf(device_held[device_nheld], sizeof device_held[0], "%s:%d: ", __FILE__, __LINE__); \
            snprintf(device_held[device_nheld] + k_, sizeof device_held[0] - (size_t)k_, __VA_ARGS__); \
            device_nheld++;                                                                        \
        }                                                                                          \
    } while (0)

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)s_); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Busy-waits ns nanoseconds of the GPU's global timer: a kernel of known duration. */
__global__ void spin_kernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

static void spin(unsigned long long ns, cudaStream_t s) {
    spin_kernel<<<1, 1, 0, s>>>(ns);
    CUDA_CHECK(cudaGetLastError());
}

static size_t used_now(void) {
    size_t f, t;
    CUDA_CHECK(cudaMemGetInfo(&f, &t));
    return t - f;
}

static size_t total_now(void) {
    size_t f, t;
    CUDA_CHECK(cudaMemGetInfo(&f, &t));
    return t;
}

/* ---- tagged totals vs cudaMemGetInfo ------------------------------------------------------------- */

static void check_totals(void) {
    static const size_t sizes[] = { 1 * MiB, 3 * MiB + 1, 64 * MiB, 2 * MiB, 100 * MiB + 12345, 512 * 1024, 256 * MiB };
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    char tag[64];
    size_t used0 = used_now(), live0 = dpmem_live_bytes_in(DPMEM_DEVICE), prev = used0, sum = 0, du;
    long long rmin = 0, rmax = 0;
    for (int i = 0; i < N; i++) {
        snprintf(tag, sizeof tag, "params/series.%d", i);
        CUDA_CHECK(dpmem_cuda_malloc(&p[i], sizes[i], tag));
        size_t u = used_now();
        long long r = (long long)(u - prev) - (long long)sizes[i];
        printf("  cudaMalloc %10zu B: device used +%10zu B, rounding %+9lld B\n", sizes[i], u - prev, r);
        if (i == 0 || r < rmin) rmin = r;
        if (i == 0 || r > rmax) rmax = r;
        if (!relaxed && sizes[i] >= 2 * MiB) DEVICE_CHECK(r >= 0 && r < (long long)(2 * MiB), "rounding %lld for %zu B", r, sizes[i]);
        prev = u;
        sum += sizes[i];
        CHECK(dpmem_tag_bytes(p[i]) == sizes[i], "tag_bytes %zu, want %zu", dpmem_tag_bytes(p[i]), sizes[i]);
    }
    du = used_now() - used0;
    printf("  series: tagged %zu B, device used +%zu B (difference %+lld B; per allocation %+lld … %+lld B)\n",
           sum, du, (long long)du - (long long)sum, rmin, rmax);
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) - live0 == sum, "tagged %zu, want %zu", dpmem_live_bytes_in(DPMEM_DEVICE) - live0, sum);
    if (!relaxed) DEVICE_CHECK((size_t)llabs((long long)du - (long long)sum) <= N * 2 * MiB, "device used +%zu vs tagged %zu", du, sum);
    for (int i = 0; i < N; i++) CUDA_CHECK(dpmem_cuda_free(p[i]));
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) == live0, "live after frees %zu, want %zu", dpmem_live_bytes_in(DPMEM_DEVICE), live0);
    if (!relaxed) DEVICE_CHECK(used_now() <= used0 + 2 * MiB, "device used %zu after frees, was %zu", used_now(), used0);
}

/* ---- snapshot figures, cuBLAS workspace ------------------------------------------------------------ */

static size_t snap_tracked, snap_used_lo, snap_used_hi;

static void check_snapshot_and_cublas(void) {
    void *big, *ws = NULL;
    cublasHandle_t h;
    size_t cublas0 = dpmem_live_bytes("cublas");
    CUDA_CHECK(dpmem_cuda_malloc(&big, 64 * MiB, "activations/big"));
    snap_used_lo = used_now();
    snap_tracked = dpmem_live_bytes_in(DPMEM_DEVICE);
    dpmem_snapshot("gpu snapshot");
    snap_used_hi = used_now();
    CUDA_CHECK(dpmem_cuda_free(big));

    CUBLAS_CHECK(cublasCreate(&h));
    CUBLAS_CHECK(dpmem_cublas_set_workspace(h, &ws, 4 * MiB));
    CHECK(ws != NULL && dpmem_tag_bytes(ws) == 4 * MiB, "workspace not tagged");
    CHECK(dpmem_live_bytes("cublas") == cublas0 + 4 * MiB, "cublas bytes %zu", dpmem_live_bytes("cublas"));
    {   /* the workspace is usable: a small GEMM runs */
        float *a;
        const float one = 1, zero = 0;
        CUDA_CHECK(DPMEM_CUDA_MALLOC(a, 3 * 64 * 64 * sizeof(float), "activations/gemm"));
        CUDA_CHECK(cudaMemset(a, 0, 3 * 64 * 64 * sizeof(float)));
        CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one, a, 64, a + 4096, 64, &zero, a + 8192, 64));
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(DPMEM_CUDA_FREE(a));
    }
    CUBLAS_CHECK(cublasDestroy(h));
    CUDA_CHECK(dpmem_cuda_free(ws));
    CHECK(dpmem_live_bytes("cublas") == cublas0, "cublas bytes after free %zu", dpmem_live_bytes("cublas"));
}

/* ---- GPU time of scopes -------------------------------------------------------------------------- */

static uint64_t scope_host_ns, snapshot_ns;

static void check_timing(void) {
    CHECK(dpmem_cuda_timing(1) == 0, "timing did not start");
    spin(1000, 0);                                     /* load the module before measuring */
    CUDA_CHECK(cudaDeviceSynchronize());
    uint64_t t0 = dpmem_now_ns();
    {
        DPMEM_SCOPE("gpu_spin_25ms");
        spin(20000000ull, 0);
        {
            DPMEM_SCOPE("gpu_spin_5ms");
            spin(5000000ull, 0);
        }
    }
    scope_host_ns = dpmem_now_ns() - t0;
    t0 = dpmem_now_ns();
    dpmem_snapshot("while the GPU spins");
    snapshot_ns = dpmem_now_ns() - t0;
    /* their polls met pending events (cudaErrorNotReady): nothing may be left for the next launch check */
    CHECK(cudaGetLastError() == cudaSuccess, "timed scopes or the snapshot left an error as the thread's last error");
    printf("  scopes around 25 ms of GPU work took %.3f ms on the host; a snapshot meanwhile %.3f ms\n",
           scope_host_ns / 1e6, snapshot_ns / 1e6);
    if (!relaxed) {
        CHECK(scope_host_ns < 10000000ull, "the scopes waited for the GPU: %llu ns", (unsigned long long)scope_host_ns);
        CHECK(snapshot_ns < 10000000ull, "the snapshot waited for the GPU: %llu ns", (unsigned long long)snapshot_ns);
    }
    for (int i = 0; i < 3000; i++) {
        DPMEM_SCOPE("gpu_tiny");
        spin(1000, 0);
    }
    dpmem_cuda_flush();
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(dpmem_cuda_timing(0) == 0, "timing did not stop");
}

/* ---- async, pinned, managed ---------------------------------------------------------------------- */

static void check_spaces(void) {
    cudaStream_t s;
    void *a, *h, *m;
    float *f;
    size_t d0 = dpmem_live_bytes_in(DPMEM_DEVICE), p0 = dpmem_live_bytes_in(DPMEM_PINNED),
           m0 = dpmem_live_bytes_in(DPMEM_MANAGED);
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(dpmem_cuda_malloc_async(&a, 8 * MiB, "activations/async", s));
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) == d0 + 8 * MiB && dpmem_tag_bytes(a) == 8 * MiB, "async alloc");
    CUDA_CHECK(cudaMemsetAsync(a, 0, 8 * MiB, s));
    CUDA_CHECK(dpmem_cuda_free_async(a, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) == d0, "async free");

    CUDA_CHECK(dpmem_cuda_malloc_host(&h, 4 * MiB, "pinned/staging"));
    CHECK(dpmem_live_bytes_in(DPMEM_PINNED) == p0 + 4 * MiB && dpmem_live_bytes_in(DPMEM_DEVICE) == d0, "pinned alloc");
    memset(h, 1, 4 * MiB);
    CUDA_CHECK(dpmem_cuda_free_host(h));
    CHECK(dpmem_live_bytes_in(DPMEM_PINNED) == p0, "pinned free");

    CUDA_CHECK(dpmem_cuda_malloc_managed(&m, 2 * MiB, "optimizer/managed"));
    CHECK(dpmem_live_bytes_in(DPMEM_MANAGED) == m0 + 2 * MiB, "managed alloc");
    CUDA_CHECK(cudaMemset(m, 0, 2 * MiB));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(dpmem_cuda_free(m));
    CHECK(dpmem_live_bytes_in(DPMEM_MANAGED) == m0, "managed free");

    CUDA_CHECK(DPMEM_CUDA_MALLOC_ASYNC(f, 1000 * sizeof(float), "grads/macro", s));
    CHECK(dpmem_tag_bytes(f) == 1000 * sizeof(float), "macro async");
    CUDA_CHECK(DPMEM_CUDA_FREE_ASYNC(f, s));
    CUDA_CHECK(DPMEM_CUDA_MALLOC_HOST(f, 1000 * sizeof(float), "pinned/macro"));
    CHECK(dpmem_live_bytes_in(DPMEM_PINNED) == p0 + 4000, "macro host");
    CUDA_CHECK(DPMEM_CUDA_FREE_HOST(f));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaStreamDestroy(s));
}

/* ---- a sub-allocator's pool (dpmem_cuda_nvtx_pool) ---------------------------------------------- */

__global__ void fill_kernel(unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

/* Blocks tagged inside one raw cudaMalloc declared as a pool, written by a kernel, untagged, the pool
   released. Under compute-sanitizer --nvtx yes (test_cuda_memcheck.sh) the heap and its regions must
   be accepted, and the writes, inside live blocks, are not errors. */
static void check_pool(void) {
    unsigned char *pool;
    size_t d0 = dpmem_live_bytes_in(DPMEM_DEVICE);
    CUDA_CHECK(cudaMalloc((void **)&pool, 4 * MiB));
    CHECK(dpmem_cuda_nvtx_pool(pool, 4 * MiB) == 0, "pool refused");
    dpmem_cuda_tag(pool, MiB, "activations/pool_block0", DPMEM_DEVICE);
    dpmem_cuda_tag(pool + 2 * MiB, 512 * 1024, "activations/pool_block1", DPMEM_DEVICE);
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) == d0 + MiB + 512 * 1024, "pool blocks: %zu B live, want %zu",
          dpmem_live_bytes_in(DPMEM_DEVICE) - d0, MiB + 512 * 1024);
    fill_kernel<<<64, 256>>>(pool, MiB, 1);
    CUDA_CHECK(cudaGetLastError());
    fill_kernel<<<64, 256>>>(pool + 2 * MiB, 512 * 1024, 2);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(dpmem_cuda_untag(pool) == MiB && dpmem_cuda_untag(pool + 2 * MiB) == 512 * 1024, "pool blocks untagged");
    CHECK(dpmem_cuda_nvtx_pool_release(pool) == 0, "pool release");
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) == d0, "live after the pool");
    CUDA_CHECK(cudaFree(pool));
}

static void check_sampler(void) {
    CHECK(dpmem_cuda_sampler(5) == 0, "sampler did not start");
    usleep(60000);
    CHECK(dpmem_cuda_sampler(0) == 0, "sampler did not stop");
}

/* ---- the log of all the above -------------------------------------------------------------------- */

static void check_log(const char *path, size_t total) {
    LogFile lf;
    char err[1024];
    size_t snaps = 0, spin25 = 0, spin5 = 0, tiny = 0, samples = 0, pinned_allocs = 0;
    uint64_t busy_snapshot_ts = 0;
    if (log_read(path, &lf, err, sizeof err) != 0) { CHECK(0, "reading the log: %s", err); return; }
    CHECK(lf.closed, "the log was not closed");
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        const char *name = log_str(&lf, e->id);
        if (e->type == 9 && strcmp(name, "gpu snapshot") == 0) {
            snaps++;
            uint64_t used = lr_u64(e->payload), tot = lr_u64(e->payload + 8), tracked = lr_u64(e->payload + 16);
            printf("  snapshot: device used %llu of %llu B, tagged %llu B, untracked %lld B\n", (unsigned long long)used,
                   (unsigned long long)tot, (unsigned long long)tracked, (long long)used - (long long)tracked);
            CHECK(tot == total, "snapshot device_total %llu, want %zu", (unsigned long long)tot, total);
            CHECK(tracked == snap_tracked, "snapshot device_tracked %llu, want %zu", (unsigned long long)tracked, snap_tracked);
            DEVICE_CHECK(used >= snap_used_lo && used <= snap_used_hi, "snapshot device_used %llu outside [%zu, %zu]",
                  (unsigned long long)used, snap_used_lo, snap_used_hi);
        }
        if (e->type == 9 && strcmp(name, "while the GPU spins") == 0) busy_snapshot_ts = e->ts;
        if (e->type == 10) {
            uint32_t thread = lr_u32(e->payload);
            uint64_t begin = lr_u64(e->payload + 8), gpu = lr_u64(e->payload + 16);
            CHECK(test_cuda_find_begin(&lf, e->id, thread, begin) != NULL, "GPU_TIME of %s has no BEGIN at its ts", name);
            if (strcmp(name, "gpu_spin_25ms") == 0) {
                spin25++;
                printf("  GPU time of gpu_spin_25ms: %.3f ms\n", gpu / 1e6);
                if (!relaxed) CHECK(gpu >= 25000000ull && gpu < 28000000ull, "gpu_spin_25ms took %llu ns", (unsigned long long)gpu);
                if (!relaxed) CHECK(busy_snapshot_ts && e->ts > busy_snapshot_ts, "gpu_spin_25ms was written before the busy snapshot");
            } else if (strcmp(name, "gpu_spin_5ms") == 0) {
                spin5++;
                printf("  GPU time of gpu_spin_5ms: %.3f ms\n", gpu / 1e6);
                if (!relaxed) CHECK(gpu >= 5000000ull && gpu < 7000000ull, "gpu_spin_5ms took %llu ns", (unsigned long long)gpu);
            } else if (strcmp(name, "gpu_tiny") == 0) {
                tiny++;
                /* > 0 only: %globaltimer and event resolution (~0.5 µs) blur a 1 µs spin */
                CHECK(gpu > 0 && gpu < 100000000ull, "gpu_tiny took %llu ns", (unsigned long long)gpu);
            }
        }
        if (e->type == 12) {
            samples++;
            CHECK(lr_u64(e->payload + 8) == total && lr_u64(e->payload) <= total, "DEVICE sample figures");
        }
        if (e->type == 6 && e->aux == DPMEM_PINNED) pinned_allocs++;
    }
    CHECK(snaps == 1, "%zu snapshots 'gpu snapshot'", snaps);
    CHECK(spin25 == 1 && spin5 == 1, "GPU_TIME events: %zu for gpu_spin_25ms, %zu for gpu_spin_5ms", spin25, spin5);
    CHECK(tiny == 3000, "%zu GPU_TIME events for 3000 gpu_tiny scopes", tiny);
    CHECK(samples >= 5, "%zu DEVICE samples in 60 ms at 5 ms", samples);
    CHECK(pinned_allocs == 2, "%zu ALLOC events in the pinned space, want 2", pinned_allocs);
    printf("  sampler: %zu DEVICE events in 60 ms at 5 ms\n", samples);
    log_free(&lf);
}

/* The held device-wide failures: failures of the kit when no other process held device memory in
   either listing, else skipped with the reason (1: some were skipped). */
static int judge_device_checks(const gpu_apps *before, const char *bus) {
    gpu_apps after;
    char why[1024];
    if (!device_nheld) return 0;
    gpu_apps_query(bus, &after);
    if (gpu_apps_quiet(before, &after, (long)getpid(), why, sizeof why)) {
        for (int i = 0; i < device_nheld; i++) {
            fprintf(stderr, "FAIL %s (%s: counted against the kit's tags)\n", device_held[i],
                    *why ? why : "no other process held memory on this GPU");
            failures++;
        }
        return 0;
    }
    printf("SKIP %d device-wide check(s): another process holds device memory on this GPU (%s); "
           "not attributable to the kit:\n", device_nheld, why);
    for (int i = 0; i < device_nheld; i++) printf("  %s\n", device_held[i]);
    snprintf(device_held[0], sizeof device_held[0], "%s", why);
    return 1;
}

int main(int argc, char **argv) {
    int ndev = 0, dev = 0, skipped;
    char path[600], bus[64] = "";
    gpu_apps apps_before;
    if (argc > 3 && strcmp(argv[1], "oom") == 0) return test_cuda_oom_child(argv[2], (size_t)strtoull(argv[3], NULL, 10));
    cudaError_t count_err = cudaGetDeviceCount(&ndev);
    if (count_err != cudaSuccess || ndev == 0) {
        char why[160];
        (void)cudaGetLastError();
        printf("SKIP test_cuda_gpu: no CUDA device: %s: tagged totals vs cudaMemGetInfo, GPU scope times, "
               "OOM post-mortem, async/pinned/managed variants, sampler not checked\n",
               kcuda_no_device_reason(count_err, why, sizeof why));
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "leak") == 0) {
        void *p;
        CUDA_CHECK(dpmem_cuda_malloc(&p, MiB, "params/leaked_on_purpose"));
        return 0;
    }
    gpu_lock_take("test_cuda_gpu", stderr);            /* held to exit: no other GPU test of ours meanwhile */
    relaxed = argc > 1 && strcmp(argv[1], "clean") == 0;
    test_cuda_path(path, sizeof path, "cuda_gpu.log");
    CUDA_CHECK(cudaFree(0));                           /* create the context before measuring */
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
    gpu_apps_query(bus, &apps_before);                 /* who else holds memory on this device */
    if (dpmem_open(path) != 0) { fprintf(stderr, "FAIL: cannot open %s\n", path); return 1; }
    CHECK(dpmem_cuda_init() == 0, "init found no device");
    {
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        printf("device: %s, %.1f GiB\n", prop.name, total_now() / 1073741824.0);
    }
    check_totals();
    check_snapshot_and_cublas();
    check_timing();
    check_spaces();
    check_pool();
    check_sampler();
    dpmem_close();
    check_log(path, total_now());
    unlink(path);
    if (!relaxed) test_cuda_oom_check(argv[0], total_now() + GiB, total_now(), 0);
    skipped = judge_device_checks(&apps_before, bus);
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    if (skipped) {
        printf("SKIP test_cuda_gpu: %d device-wide check(s) not attributable (another process holds device memory: %s); "
               "every other check passed\n", device_nheld, device_held[0]);
        return 77;
    }
    printf("test_cuda_gpu: all checks passed\n");
    return 0;
}
