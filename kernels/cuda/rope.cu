/* rope.cu — rotary position embedding on the GPU, in place on x[B,T,NH,HS], Hugging Face's
   rotate-half convention, position = t, frequencies from krope_inv_freq (kernels.h: the very function
   the CPU calls, llama3 scaling included). One thread per (row, head, pair i < HS/2). The backward
   rotates by the opposite angle. Accurate sinf/cosf (no fast math: angles reach T radians).
   x is fp32 or bf16 (E: storage.cuh), the rotation in fp32 either way.
   Not here: position offsets (KV cache). */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "storage.cuh"

template <typename E>
__global__ void rope_kernel(E *x, int B, int T, int NH, int HS, KRope rope, float sign) {
    int half = HS / 2;
    size_t total = (size_t)B * T * NH * half;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(idx % half);
        size_t bth = idx / half;             /* (b*T + t)*NH + h */
        int t = (int)((bth / NH) % T);
        float inv_freq = krope_inv_freq(rope, i, HS);
        float ang = (float)t * inv_freq, c = cosf(ang), s = sign * sinf(ang);
        E *v = x + bth * HS;
        float x0 = ld(v, i), x1 = ld(v, i + half);
        st(v, i, x0 * c - x1 * s);
        st(v, i + half, x1 * c + x0 * s);
    }
}

template <typename E>
static void rope_apply(E *x, int B, int T, int NH, int HS, KRope rope, float sign) {
    size_t total = (size_t)B * T * NH * (HS / 2);
    if (!total) return;
    rope_kernel<<<kcuda_blocks(total, 256), 256>>>(x, B, T, NH, HS, rope, sign);
    cudaLaunchCheck();
}

void rope_forward_cuda(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope) {
    (void)b; rope_apply(x, B, T, NH, HS, rope, 1.0f);
}
void rope_backward_cuda(KBackend *b, float *dx, int B, int T, int NH, int HS, KRope rope) {
    (void)b; rope_apply(dx, B, T, NH, HS, rope, -1.0f);
}
void rope_forward_bf16_cuda(KBackend *b, void *x, int B, int T, int NH, int HS, KRope rope) {
    (void)b; rope_apply((uint16_t *)x, B, T, NH, HS, rope, 1.0f);
}
void rope_backward_bf16_cuda(KBackend *b, void *dx, int B, int T, int NH, int HS, KRope rope) {
    (void)b; rope_apply((uint16_t *)dx, B, T, NH, HS, rope, -1.0f);
}
