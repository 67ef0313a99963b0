/* cuda_sanitize_plant.cu — bugs planted for compute-sanitizer, so that the sanitizer tests prove
   their verdict (tests/sanitizer_summary.sh) still sees a real finding:
     race   two warps write and read one shared word with no barrier between (racecheck: a hazard)
     oob    a kernel writes one int past the end of its buffer (memcheck: an invalid global write)
   Each mode runs its kernel and exits 0: the finding must come from the tool, not from the program.
   Without a GPU: exit 77. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* volatile: the read is a real shared-memory load (without it the compiler forwards each thread's own
   store to its read, and racecheck, seeing no conflicting load, judged the first H200 run clean) */
__global__ void race(int *out) {
    __shared__ volatile int word;
    word = (int)threadIdx.x;                           /* every thread (8 warps) writes ... */
    out[threadIdx.x] = word;                           /* ... and reads, no __syncthreads between */
}

/* n elements in buf: the thread with i == n writes one past the end (the first H200 run's version
   allocated 256 elements for i <= 255: no thread ever reached the end) */
__global__ void oob(int *buf, int n) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i <= n) buf[i] = i;                            /* <= : one past the end */
}

int main(int argc, char **argv) {
    int ndev = 0, *d = NULL;
    if (argc != 2 || (strcmp(argv[1], "race") != 0 && strcmp(argv[1], "oob") != 0)) {
        fprintf(stderr, "usage: %s race|oob\n", argv[0]);
        return 2;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP cuda_sanitize_plant: no CUDA device\n");
        return 77;
    }
    const int n = strcmp(argv[1], "race") == 0 ? 256 : 200;
    CUDA_CHECK(cudaMalloc((void **)&d, (size_t)n * sizeof(int)));
    if (n == 256) race<<<1, 256>>>(d);
    else oob<<<1, 256>>>(d, n);                        /* 256 threads over 200 elements: i = 200 writes past the end */
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(d));
    return 0;
}
