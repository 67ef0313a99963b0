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

/* The CUDA backend, and the kit's CUDA layer: device figures in every snapshot, GPU time of the
   phases (on unless DPMEM_CUDA_TIMING=0; a handful of events per step), pending times written when
   the log closes. Buffers are tagged by kbuf_alloc like on every backend. */
static int cuda_init(KBackend *b) {
    /* data parallel: one GPU per rank of a node (NCCL needs distinct devices) */
    if (kbackend_cuda_init(b, g_comm.world > 1 ? g_comm.local_rank : -1) != 0) {
        if (g_comm.world > 1) fprintf(stderr, "note: rank %d takes GPU %d of its node (NCCL needs one GPU per rank)\n",
                                      g_comm.rank, g_comm.local_rank);
        return -1;
    }
    if (dpmem_cuda_init() == 0) {
        const char *t = getenv("DPMEM_CUDA_TIMING");
        if (!t || strcmp(t, "0") != 0) dpmem_cuda_timing(1);
    }
    return 0;
}

__attribute__((constructor)) static void train_cuda_register(void) {
    train_cuda_backend_init = cuda_init;
    train_cuda_available = kcuda_device_available;
}
