/* test_cuda_bench.c — what dpmem_cuda.h costs, as ratios against a baseline measured in the same run.

   With a GPU:
     - a tagged cudaMalloc/cudaFree pair (dpmem_cuda_malloc/free) vs a bare pair, 1 MiB;
     - a scope (DPMEM_SCOPE around one tiny kernel launch) with GPU timing on vs off.
   Always (no GPU needed): the layer's bookkeeping per tagged buffer, dpmem_cuda_tag/untag, vs dpmem.h's
   own dpmem_tag_alloc_space/dpmem_tag_free, with NVTX regions and counters off (the default when no
   tool is attached) and forced on with no tool listening (what the NVTX no-op path costs).
   Prints tables; exits 0 unless something it measures fails outright. Not a test: no pass/fail bounds. */
#define DPMEM_IMPLEMENTATION
#include "dpmem_cuda.h"
#include "kernels/cuda/cuda_no_device.h"

#include <stdio.h>
#include <string.h>

static double per_op_ns(uint64_t t0, uint64_t t1, int n) { return (double)(t1 - t0) / n; }

static void row(const char *name, double ns, double base) {
    printf("| %-52s | %10.1f | %6.2fx |\n", name, ns, ns / base);
}

/* Best of 5 rounds: the machine is shared, the minimum is the cost. */
#define BEST_OF_5(result, n, body)                                                                 \
    do {                                                                                           \
        result = 1e30;                                                                             \
        for (int round_ = 0; round_ < 5; round_++) {                                               \
            uint64_t t0_ = dpmem_now_ns();                                                         \
            for (int i_ = 0; i_ < (n); i_++) { body; }                                             \
            double ns_ = per_op_ns(t0_, dpmem_now_ns(), (n));                                      \
            if (ns_ < result) result = ns_;                                                        \
        }                                                                                          \
    } while (0)

static void bench_bookkeeping(void) {
    static char bufs[64][16];
    const int n = 20000;
    double base, off, on;
    BEST_OF_5(base, n, {
        dpmem_tag_alloc_space(bufs[i_ & 63], 4096, "params/bench", DPMEM_DEVICE);
        dpmem_tag_free(bufs[i_ & 63]);
    });
    dpmem_cuda_nvtx(0, 0);
    BEST_OF_5(off, n, {
        dpmem_cuda_tag(bufs[i_ & 63], 4096, "params/bench", DPMEM_DEVICE);
        dpmem_cuda_untag(bufs[i_ & 63]);
    });
    dpmem_cuda_nvtx(1, 1);
    BEST_OF_5(on, n, {
        dpmem_cuda_tag(bufs[i_ & 63], 4096, "params/bench", DPMEM_DEVICE);
        dpmem_cuda_untag(bufs[i_ & 63]);
    });
    dpmem_cuda_nvtx(0, 0);
    printf("\nbookkeeping per tagged buffer (tag + untag), %d categories live, no NVTX tool attached\n",
           dpmem_category_count());
    printf("| %-52s | %10s | %7s |\n", "what", "ns/pair", "ratio");
    printf("|------------------------------------------------------|------------|---------|\n");
    row("dpmem_tag_alloc_space + dpmem_tag_free (baseline)", base, base);
    row("dpmem_cuda_tag + untag, NVTX off (default, no tool)", off, base);
    row("dpmem_cuda_tag + untag, NVTX regions+counters forced", on, base);
}


static int bench_gpu(void) {
    const int n = 2000;
    double bare, tagged;
    void *p = NULL;
    cudaError_t err = cudaSuccess;
    if (cudaFree(0) != cudaSuccess) return -1;
    BEST_OF_5(bare, n, {
        if ((err = cudaMalloc(&p, 1 << 20)) != cudaSuccess) break;
        cudaFree(p);
    });
    if (err != cudaSuccess) { fprintf(stderr, "cudaMalloc: %s\n", cudaGetErrorString(err)); return -1; }
    BEST_OF_5(tagged, n, {
        if ((err = dpmem_cuda_malloc(&p, 1 << 20, "params/bench")) != cudaSuccess) break;
        dpmem_cuda_free(p);
    });
    if (err != cudaSuccess) { fprintf(stderr, "dpmem_cuda_malloc: %s\n", cudaGetErrorString(err)); return -1; }
    printf("\ncudaMalloc/cudaFree pair, 1 MiB\n");
    printf("| %-52s | %10s | %7s |\n", "what", "ns/pair", "ratio");
    printf("|------------------------------------------------------|------------|---------|\n");
    row("cudaMalloc + cudaFree (baseline)", bare, bare);
    row("dpmem_cuda_malloc + dpmem_cuda_free", tagged, bare);

    /* A scope around an async memset (a tiny launch): host cost per scope, timing off vs on. */
    {
        const int m = 20000;
        double off, on;
        void *d;
        if (cudaMalloc(&d, 256) != cudaSuccess) return -1;
        dpmem_cuda_timing(0);
        BEST_OF_5(off, m, { DPMEM_SCOPE("bench_scope"); cudaMemsetAsync(d, 0, 256, 0); });
        cudaDeviceSynchronize();
        if (dpmem_cuda_timing(1) != 0) return -1;
        BEST_OF_5(on, m, { DPMEM_SCOPE("bench_scope"); cudaMemsetAsync(d, 0, 256, 0); });
        dpmem_cuda_flush();
        dpmem_cuda_timing(0);
        cudaDeviceSynchronize();
        cudaFree(d);
        printf("\nscope around one cudaMemsetAsync, host time per scope\n");
        printf("| %-52s | %10s | %7s |\n", "what", "ns/scope", "ratio");
        printf("|------------------------------------------------------|------------|---------|\n");
        row("DPMEM_SCOPE + launch, GPU timing off (baseline)", off, off);
        row("DPMEM_SCOPE + launch, GPU timing on", on, off);
    }
    return 0;
}

int main(void) {
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    bench_bookkeeping();
    if (err != cudaSuccess || ndev == 0) {
        char why[160];
        printf("\nno CUDA device: %s: the cudaMalloc/cudaFree and GPU-timing tables need one\n",
               kcuda_no_device_reason(err, why, sizeof why));
        return 0;
    }
    if (bench_gpu() != 0) { fprintf(stderr, "bench_cuda: a CUDA call failed\n"); return 1; }
    return 0;
}
