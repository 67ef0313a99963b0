/* init.c — the initialisation op's wrapper (kernels.h: init_normal). The values are kernels/noise.h's
   normal stream, drawn where the tensor lives (kernels/cpu/init.c, kernels/cuda/init.cu), so a device
   backend needs no host copy of its weights and every backend starts from the same floats.
   Not here: which stream a tensor takes (the model's choice: samples/llama/llama.c). */
#include "kernels.h"

int init_normal(KBackend *b, float *x, size_t n, double std, uint64_t seed, uint64_t stream) {
    if (n) b->ops->init_normal(b, x, n, std, seed, stream);
    return 0;
}
