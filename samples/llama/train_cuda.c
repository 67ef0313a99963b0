/* train_cuda.c — registers the CUDA backend (kernels/cuda) with the training loop. Linked as an
   object (not from an archive) into trainers built where nvcc exists; without it the trainers are
   CPU/plan only and say so. Not here: anything CUDA itself (kernels/cuda). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "train.h"
#include "cuda/kernels_cuda.h"
#define DPMEM_CUDA_IMPLEMENTATION   /* dpmem.h's own implementation is in the trainer's main file */
#include "dpmem_cuda.h"

/* The kit's GPU time of every scope, forwarded to the loop's table (train.h: TrainGpuTime). Runs
   under the kit's lock: train_gpu_time_add calls no dpmem function. */
static void on_gpu_time(void *user, uint32_t name, uint32_t parent, uint64_t begin_ts, uint64_t gpu_ns) {
    (void)begin_ts;
    train_gpu_time_add((TrainGpuTime *)user, name, parent, gpu_ns);
}
static int gpu_timer_start(TrainGpuTime *g) {
    dpmem_cuda_flush();   /* times of scopes before this go nowhere; none may reach g after a stop */
    dpmem_cuda_on_gpu_time(g ? on_gpu_time : NULL, g);
    return 0;
}
static void gpu_timer_flush(void) { dpmem_cuda_flush(); }

static const char *device_name(void) {
    static char name[256];
    struct cudaDeviceProp p;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        fprintf(stderr, "note: the GPU's name is unknown (%s): no MFU from the peak table\n", cudaGetErrorString(cudaGetLastError()));
        return NULL;
    }
    snprintf(name, sizeof name, "%s", p.name);
    return name;
}
/* The model's GEMMs: bf16 operands under --precision bf16, else the backend's setting (DPMEM_CUDA_GEMM). */
static const char *device_gemm(const TrainConfig *c) { return c->model.precision ? "bf16" : kcuda_gemm_precision_name(); }

/* The CUDA backend, and the kit's CUDA layer: device figures in every snapshot, GPU time of the
   phases (on unless DPMEM_CUDA_TIMING=0; a handful of events per step; the closing table, step time
   and tokens/s are then the GPU's), pending times written when the log closes. Buffers are tagged by
   kbuf_alloc like on every backend. */
static int cuda_init(KBackend *b) {
    /* data parallel: one GPU per rank of a node (NCCL needs distinct devices) */
    if (kbackend_cuda_init(b, g_comm.world > 1 ? g_comm.local_rank : -1) != 0) {
        if (g_comm.world > 1) fprintf(stderr, "note: rank %d takes GPU %d of its node (NCCL needs one GPU per rank)\n",
                                      g_comm.rank, g_comm.local_rank);
        return -1;
    }
    if (dpmem_cuda_init() == 0) {
        const char *t = getenv("DPMEM_CUDA_TIMING");
        if ((!t || strcmp(t, "0") != 0) && dpmem_cuda_timing(1) == 0) {
            train_gpu_timer_start = gpu_timer_start;
            train_gpu_timer_flush = gpu_timer_flush;
        }
    }
    /* where device memory comes from: the report explains the pool's cached blocks by it */
    dpmem_meta("cuda.alloc", kcuda_alloc_pooled() ? "pool" : "sync");
    train_device_name = device_name;
    train_device_gemm = device_gemm;
    return 0;
}

__attribute__((constructor)) static void train_cuda_register(void) {
    train_cuda_backend_init = cuda_init;
    train_cuda_available = kcuda_device_available;
}
