/* rope.c — rotary position embedding in Hugging Face's rotate-half convention, in place on
   x[B,T,NH,HS], position = t: for i < HS/2, with angle t * inv_freq_i (krope_inv_freq: theta^(-2i/HS),
   llama3-scaled when the config asks, in fp32 as transformers computes it), (x_i, x_{i+HS/2}) is
   rotated by the angle. The backward rotates back.
   Not here: position offsets (KV cache), RoPE variants other than llama3 scaling. */
#include "kernels_cpu.h"
#include <math.h>

static void rope_apply(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope, float sign) {
    int half = HS / 2;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)B * T * NH * HS))
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        float *row = x + (size_t)bt * NH * HS;
        for (int i = 0; i < half; i++) {
            float inv_freq = krope_inv_freq(rope, i, HS);
            float ang = (float)t * inv_freq, c = cosf(ang), s = sign * sinf(ang);
            for (int h = 0; h < NH; h++) {
                float *v = row + (size_t)h * HS;
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c - x2 * s;
                v[i + half] = x2 * c + x1 * s;
            }
        }
    }
}

void rope_forward_cpu(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope) {
    rope_apply(b, x, B, T, NH, HS, rope, 1.0f);
}

/* The rotation is orthogonal: its transpose is the rotation by -angle. */
void rope_backward_cpu(KBackend *b, float *dx, int B, int T, int NH, int HS, KRope rope) {
    rope_apply(b, dx, B, T, NH, HS, rope, -1.0f);
}
