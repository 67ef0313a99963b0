/* lora.c — LoRA adapters in merged form, or unmerged beside a bf16 base (see lora.h): build, merge,
   the unmerged form's forward and input-gradient additions, the side products hs and dh,
   gradient accumulation, all through the kernels.h ops so that every backend (and a plan run) sees
   the same tagged allocations. Not here: the choice of targets, the optimizer (dp/dp_sgd.c). */
#include "lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tagname(const char *name, const char *suffix) {
    static char tag[160];
    snprintf(tag, sizeof tag, "lora/%s.%s", name, suffix);
    return tag;
}

static float *tagged(KBackend *kb, size_t n, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s.%s", cat, name, suffix);
    return kbuf_alloc(kb, n * sizeof(float), tag);
}

size_t lora_param_count(const LoraAdapter *l) { return (size_t)l->r * l->IC + (size_t)l->OC * l->r; }

int lora_build(LoraAdapter *l, KBackend *kb, const char *name, int param_index, int IC, int OC, int r,
               float alpha, int adam, unsigned long long seed, KDtype dt) {
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->param_index = param_index;
    l->IC = IC; l->OC = OC; l->r = r; l->scale = alpha / (float)r; l->dt = dt;
    size_t na = (size_t)r * IC, nb = (size_t)OC * r;
    if (!(l->A = tagged(kb, na, "lora", name, "lora_A")) || !(l->B = tagged(kb, nb, "lora", name, "lora_B")) ||
        !(l->dA = tagged(kb, na, "grads", name, "lora_A")) || !(l->dB = tagged(kb, nb, "grads", name, "lora_B")))
        return -1;
    if (adam && (!(l->mA = tagged(kb, na, "optimizer", name, "lora_A.exp_avg")) ||
                 !(l->vA = tagged(kb, na, "optimizer", name, "lora_A.exp_avg_sq")) ||
                 !(l->mB = tagged(kb, nb, "optimizer", name, "lora_B.exp_avg")) ||
                 !(l->vB = tagged(kb, nb, "optimizer", name, "lora_B.exp_avg_sq"))))
        return -1;
    if (dt == KDT_BF16 && (!(l->A16 = kbuf_alloc(kb, na * KDT_SIZE(dt), tagname(name, "lora_A.bf16"))) ||
                           !(l->B16 = kbuf_alloc(kb, nb * KDT_SIZE(dt), tagname(name, "lora_B.bf16")))))
        return -1;
    if (!kbackend_computes(kb)) return 0;
    /* B = 0, grads, m, v zeroed (a backend's memory need not come zeroed: kernels.h); A from a
       splitmix64 stream of the seed */
    float *zero[] = { l->B, l->dA, l->dB, l->mA, l->vA, l->mB, l->vB };
    const size_t nz[] = { nb, na, nb, na, na, nb, nb };
    for (int i = 0; i < 7; i++) if (zero[i] && fill_buffer(kb, zero[i], 0.0f, nz[i]) != 0) return -1;
    float *host = malloc(na * sizeof *host);
    if (!host) { snprintf(kb->err, sizeof kb->err, "out of host memory for the LoRA init of %s", name); return -1; }
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull + (uint64_t)param_index;
    float bound = 1.0f / sqrtf((float)IC);
    for (size_t i = 0; i < na; i++) {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; z = (z ^ (z >> 27)) * 0x94D049BB133111EBull; z ^= z >> 31;
        host[i] = bound * (float)((double)(z >> 40) / 8388608.0 - 1.0);
    }
    int rc = kbuf_upload(kb, l->A, host, na * sizeof *host);
    free(host);
    return rc;
}

void lora_free(LoraAdapter *l, KBackend *kb) {
    float **all[] = { &l->B16, &l->A16, &l->vB, &l->mB, &l->vA, &l->mA, &l->dB, &l->dA, &l->B, &l->A };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) { kbuf_free(kb, *all[i]); *all[i] = NULL; }
}

int lora_merge(LoraAdapter *l, KBackend *kb, float *W, float sign) {
    /* W[OC, IC] += (sign·s) B[OC, r] A[r, IC] */
    return gemm_strided_batched(kb, 0, 0, l->OC, l->IC, l->r, sign * l->scale, l->B, l->r, 0, l->A, l->IC, 0,
                                1.0f, W, l->IC, 0, 1);
}

/* The adapters' GEMM operands: the bf16 copies refreshed from the fp32 masters under bf16 (as autocast
   casts at each use), the masters themselves in fp32. */
static int operands(LoraAdapter *l, KBackend *kb, const float **A, const float **B) {
    *A = l->A; *B = l->B;
    if (l->dt != KDT_BF16) return 0;
    if (narrow_buffer(kb, l->A16, l->A, (size_t)l->r * l->IC) || narrow_buffer(kb, l->B16, l->B, (size_t)l->OC * l->r))
        return -1;
    *A = l->A16; *B = l->B16;
    return 0;
}

static float *side_scratch(LoraAdapter *l, KBackend *kb, int N) {
    char tag[160];
    snprintf(tag, sizeof tag, "workspace/lora.%s.side", l->name);
    return kbuf_alloc(kb, (size_t)N * l->r * KDT_SIZE(l->dt), tag);
}

int lora_forward_add(LoraAdapter *l, KBackend *kb, float *y, const float *x, int N) {
    const KDtype dt = l->dt;
    const float *A, *B;
    if (operands(l, kb, &A, &B)) return -1;
    float *h = side_scratch(l, kb, N);
    if (!h) return -1;
    /* h[N, r] = s·x[N, IC] A[r, IC]ᵀ (rounded to dt, as PEFT's lora_A output under autocast), then
       y[N, OC] += h B[OC, r]ᵀ */
    int rc = gemm_ex(kb, 0, 1, N, l->r, l->IC, l->scale, x, l->IC, 0, A, l->IC, 0, 0.0f, h, l->r, 0, 1, dt, dt) ||
             gemm_ex(kb, 0, 1, N, l->OC, l->r, 1.0f, h, l->r, 0, B, l->r, 0, 1.0f, y, l->OC, 0, 1, dt, dt) ? -1 : 0;
    kbuf_free(kb, h);
    return rc;
}

int lora_backward_input_add(LoraAdapter *l, KBackend *kb, float *dx, const float *dy, int N) {
    const KDtype dt = l->dt;
    const float *A, *B;
    if (operands(l, kb, &A, &B)) return -1;
    float *dh = side_scratch(l, kb, N);
    if (!dh) return -1;
    /* dh[N, r] = s·dy[N, OC] B[OC, r], then dx[N, IC] += dh A[r, IC] */
    int rc = gemm_ex(kb, 0, 0, N, l->r, l->OC, l->scale, dy, l->OC, 0, B, l->r, 0, 0.0f, dh, l->r, 0, 1, dt, dt) ||
             gemm_ex(kb, 0, 0, N, l->IC, l->r, 1.0f, dh, l->r, 0, A, l->IC, 0, 1.0f, dx, l->IC, 0, 1, dt, dt) ? -1 : 0;
    kbuf_free(kb, dh);
    return rc;
}

int lora_side(LoraAdapter *l, KBackend *kb, float *hs, float *dh, const float *x, const float *dy, int N) {
    /* hs[N, r] = s·x[N, IC] A[r, IC]ᵀ;  dh[N, r] = s·dy[N, OC] B[OC, r] */
    const KDtype dt = l->dt;
    const float *A, *B;
    if (operands(l, kb, &A, &B)) return -1;
    if (hs && gemm_ex(kb, 0, 1, N, l->r, l->IC, l->scale, x, l->IC, 0, A, l->IC, 0, 0.0f, hs, l->r, 0, 1, dt, dt))
        return -1;
    if (dh && gemm_ex(kb, 0, 0, N, l->r, l->OC, l->scale, dy, l->OC, 0, B, l->r, 0, 0.0f, dh, l->r, 0, 1, dt, dt))
        return -1;
    return 0;
}

int lora_accumulate(LoraAdapter *l, KBackend *kb, const float *x, const float *dy, const float *hs,
                    const float *dh, int N) {
    if (matmul_backward_weight_ex(kb, l->dt, l->dB, dy, hs, N, l->r, l->OC)) return -1;   /* dB[OC, r] += dyᵀ hs */
    return matmul_backward_weight_ex(kb, l->dt, l->dA, dh, x, N, l->IC, l->r);           /* dA[r, IC] += dhᵀ x */
}
