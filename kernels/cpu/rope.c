/* rope.c — rotary position embedding in Hugging Face's rotate-half convention, in place on
   x[B,T,NH,HS], position = t: for i < HS/2, with angle t * inv_freq_i (krope_inv_freq: theta^(-2i/HS),
   llama3-scaled when the config asks, in fp32 as transformers computes it), (x_i, x_{i+HS/2}) is
   rotated by the angle. The backward rotates back.
   Not here: position offsets (KV cache), RoPE variants other than llama3 scaling. */
#include "kernels_cpu.h"
#include "vmath.h"
#include <math.h>

/* Each position's angles once (in chunks of up to 256 pairs), for every sequence and head at that
   position: cosf/sinf per angle were most of the op's time when recomputed per sequence; the
   rotation itself then runs in vector lanes along the head. */
KCPU_CLONES
static void rope_apply(KBackend *b, float *x, int B, int T, int NH, int HS, KRope rope, float sign) {
    int half = HS / 2;
    #pragma omp parallel for num_threads(b->nthreads) schedule(static) if(KCPU_PARALLEL((size_t)B * T * NH * HS))
    for (int t = 0; t < T; t++) {
        float cs[256], sn[256];
        for (int i0 = 0; i0 < half; i0 += 256) {
            const int n = half - i0 < 256 ? half - i0 : 256;
            for (int k = 0; k < n; k++) {
                float ang = (float)t * krope_inv_freq(rope, i0 + k, HS);
                cs[k] = cosf(ang);
                sn[k] = sign * sinf(ang);
            }
            for (int bb = 0; bb < B; bb++)
                for (int h = 0; h < NH; h++) {
                    float *v = x + ((size_t)bb * T + t) * NH * HS + (size_t)h * HS + i0;
                    #pragma omp simd
                    for (int k = 0; k < n; k++) {
                        float x1 = v[k], x2 = v[k + half];
                        v[k] = x1 * cs[k] - x2 * sn[k];
                        v[k + half] = x2 * cs[k] + x1 * sn[k];
                    }
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
