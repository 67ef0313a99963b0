/* cuda_common.cuh — what every .cu file of kernels/cuda shares: error checks with file and line (as llm.c),
   the process's cuBLAS handle, launch helpers and warp/block reductions.
   Not here: any op (one file per concept beside this one). */
#ifndef KCUDA_COMMON_CUH
#define KCUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels_cuda.h"

static inline void kcuda_check(cudaError_t err, const char *file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "[CUDA ERROR] at %s:%d: %s (%s)\n", file, line, cudaGetErrorString(err), cudaGetErrorName(err));
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(err) kcuda_check((err), __FILE__, __LINE__)

static inline void kcuda_cublas_check(cublasStatus_t st, const char *file, int line) {
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "[cuBLAS ERROR] at %s:%d: %s (%d)\n", file, line, cublasGetStatusString(st), (int)st);
        exit(EXIT_FAILURE);
    }
}
#define cublasCheck(st) kcuda_cublas_check((st), __FILE__, __LINE__)

/* After every launch: a bad configuration is reported where it happened, not at the next sync. */
#define cudaLaunchCheck() cudaCheck(cudaGetLastError())

/* The handle every GEMM uses (created by the first kbackend_cuda_init or the first DP GEMM). */
cublasHandle_t kcuda_cublas(void);
/* The compute type of fp32 GEMMs under the current TF32 setting. */
cublasComputeType_t kcuda_compute_type(void);
/* A device float holding 1.0f (beta of device-pointer-mode GEMMs). */
const float *kcuda_device_one(void);

static inline unsigned kcuda_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 16u ? 65535u * 16u : (b ? b : 1));  /* grid-stride beyond this */
}

__device__ __forceinline__ float kcuda_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double kcuda_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float kcuda_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sums and max (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
   `sh` is 32 slots of shared memory; the function synchronizes before reusing it. */
__device__ __forceinline__ double kcuda_block_sum_d(double v, double *sh) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = kcuda_warp_sum_d(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0;
    return kcuda_warp_sum_d(v);
}
__device__ __forceinline__ float kcuda_block_max(float v, float *sh) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = kcuda_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return kcuda_warp_max(v);
}

#endif
