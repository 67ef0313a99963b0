/* train_cuda.c — registers the CUDA backend (kernels/cuda) with the training loop. Linked as an
   object (not from an archive) into trainers built where nvcc exists; without it the trainers are
   CPU/plan only and say so. Not here: anything CUDA itself (kernels/cuda). */
#include "train.h"
#include "cuda/kernels_cuda.h"

static int cuda_init(KBackend *b) { return kbackend_cuda_init(b, -1); }

__attribute__((constructor)) static void train_cuda_register(void) {
    train_cuda_backend_init = cuda_init;
    train_cuda_available = kcuda_device_available;
}
