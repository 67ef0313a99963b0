/* test_cuda_disabled.c — dpmem_cuda.h under DPMEM_DISABLE: every form still makes the user's CUDA
   allocation (the bare call, with its error returned), and nothing else is called. The companion
   script test_cuda_disabled.sh checks the object's undefined symbols: the bare CUDA allocation calls
   and no dpmem_, nvtx, cudaEvent or cudaMemGetInfo symbol. With a GPU the calls must succeed; without
   one they must fail with the error the bare call gives. */
#define DPMEM_DISABLE
#define DPMEM_IMPLEMENTATION
#define DPMEM_CUDA_CUBLAS
#include "dpmem_cuda.h"
#include <stdio.h>

static int failures;
static void expect(const char *what, cudaError_t got, cudaError_t want) {
    if (got != want) { fprintf(stderr, "FAIL %s: %d (%s), want %d\n", what, (int)got, cudaGetErrorName(got), (int)want); failures++; }
    (void)cudaGetLastError();
}

int main(void) {
    float *d = NULL, *a = NULL, *h = NULL, *m = NULL;
    void *v = NULL;
    int ndev = 0;
    cudaError_t want = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0 ? cudaSuccess : cudaMalloc(&v, 16);
    (void)cudaGetLastError();
    dpmem_cuda_init();
    dpmem_cuda_nvtx(1, 1);
    if (dpmem_cuda_timing(1) != 0 || dpmem_cuda_sampler(5) != 0) { fprintf(stderr, "FAIL: disabled calls not 0\n"); failures++; }
    dpmem_cuda_set_stream(0);
    expect("DPMEM_CUDA_MALLOC", DPMEM_CUDA_MALLOC(d, 1024, "params/x"), want);
    expect("DPMEM_CUDA_MALLOC_ASYNC", DPMEM_CUDA_MALLOC_ASYNC(a, 1024, "params/y", 0), want);
    expect("DPMEM_CUDA_MALLOC_HOST", DPMEM_CUDA_MALLOC_HOST(h, 1024, "params/z"), want);
    expect("DPMEM_CUDA_MALLOC_MANAGED", DPMEM_CUDA_MALLOC_MANAGED(m, 1024, "params/w"), want);
    expect("dpmem_cuda_malloc", dpmem_cuda_malloc(&v, 64, "params/v"), want);
    dpmem_cuda_tag(d, 1024, "params/x", DPMEM_DEVICE);
    if (dpmem_cuda_untag(d) != 0) { fprintf(stderr, "FAIL: untag counted bytes\n"); failures++; }
    if (dpmem_cuda_nvtx_pool(d, 1024) != 0 || dpmem_cuda_nvtx_pool_release(d) != 0) {
        fprintf(stderr, "FAIL: disabled pool calls not 0\n");
        failures++;
    }
    if (want == cudaSuccess) {
        expect("DPMEM_CUDA_FREE", DPMEM_CUDA_FREE(d), cudaSuccess);
        expect("DPMEM_CUDA_FREE_ASYNC", DPMEM_CUDA_FREE_ASYNC(a, 0), cudaSuccess);
        expect("DPMEM_CUDA_FREE_HOST", DPMEM_CUDA_FREE_HOST(h), cudaSuccess);
        expect("DPMEM_CUDA_FREE (managed)", DPMEM_CUDA_FREE(m), cudaSuccess);
        expect("dpmem_cuda_free", dpmem_cuda_free(v), cudaSuccess);
        cudaDeviceSynchronize();
    }
    dpmem_cuda_flush();
    dpmem_cuda_on_gpu_time(NULL, NULL);
    dpmem_cuda_shutdown();
    if (failures) return 1;
    printf("test_cuda_disabled: the bare CUDA calls, results as expected (%s)\n", want == cudaSuccess ? "GPU" : "no GPU");
    return 0;
}
