/* test_kernels_bf16.c — the CPU backend's mixed precision (kernels.h) against fp32 references.
   1. Rounding: every one of the 65536 bf16 values widens and narrows back to itself; fp32 values
      halfway between two bf16 values round to the even one; NaN stays a (quiet) NaN, ±Inf stays,
      the largest float rounds to Inf (as torch); widen/narrow over arrays equal the scalar ones.
   2. Narrowing in place equals narrowing into another buffer, for sizes around the serial head and
      the parallel rounds (kernels/cpu/convert.c), on 1 and 2 threads.
   3. gemm_ex with bf16 operands against a double product of the same (bf16) values, every
      transpose, beta 0, 1 and 0.5, fp32 and bf16 output, shapes crossing the 512-wide blocks of the
      widening path and a batch with strides. Tolerance: the fp32 dot-product bound
      K·2^-24·Σ|a b| for an fp32 output, plus half a bf16 ulp of the value (at most 2^-8 relative)
      for a bf16 one. Both paths: cblas_sbgemm (this test exports its own, since Debian's OpenBLAS does
      not: the dispatch finds it with dlsym, the scratch drops to the output's fp32 twin), then the
      widening blocks (the test runs itself again with DPMEM_CPU_SBGEMM=0).
   4. Conversion at the op boundary: each `_ex` op on bf16 buffers gives exactly the bf16 rounding of
      the fp32 op on the widened inputs (bit for bit, statistics and weight gradients too), also when
      it works in pieces (more than 2^20 elements: its twins are one piece each; RMSNorm's weight
      gradient is then summed piece by piece, 1e-4 relative), and frees its workspace/widen.* twins.
   Not here: the model (test_llama_precision), DP (test_dp_precision), CUDA (test_cuda_kernels.cu). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static uint64_t rng = 7;
static double urand(void) {   /* uniform [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * 0x1.0p-52 - 1.0;
}
/* n random values already representable in bf16, stored as bf16 */
static uint16_t *brand(size_t n, double scale) {
    uint16_t *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = kbf16_from_f32((float)(urand() * scale));
    return x;
}

/* ---- the fake sbgemm (exported with -rdynamic): widen, then sgemm ---------------------------------- */
static int sbgemm_calls = 0;
void cblas_sbgemm(OPENBLAS_CONST enum CBLAS_ORDER Order, OPENBLAS_CONST enum CBLAS_TRANSPOSE TransA,
                  OPENBLAS_CONST enum CBLAS_TRANSPOSE TransB, OPENBLAS_CONST blasint M, OPENBLAS_CONST blasint N,
                  OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha, OPENBLAS_CONST bfloat16 *A, OPENBLAS_CONST blasint lda,
                  OPENBLAS_CONST bfloat16 *B, OPENBLAS_CONST blasint ldb, OPENBLAS_CONST float beta, float *C,
                  OPENBLAS_CONST blasint ldc) {
    __atomic_add_fetch(&sbgemm_calls, 1, __ATOMIC_RELAXED);
    /* exactly the elements the product reads: (rows - 1) full leading dimensions and one row */
    const int ar = TransA == CblasTrans ? K : M, ac = TransA == CblasTrans ? M : K;
    const int br = TransB == CblasTrans ? N : K, bc = TransB == CblasTrans ? K : N;
    const size_t na = ar > 0 ? (size_t)(ar - 1) * lda + ac : 0, nb = br > 0 ? (size_t)(br - 1) * ldb + bc : 0;
    float *a = malloc(na * sizeof *a + 4), *b = malloc(nb * sizeof *b + 4);
    for (size_t i = 0; i < na; i++) a[i] = kbf16_to_f32(A[i]);
    for (size_t i = 0; i < nb; i++) b[i] = kbf16_to_f32(B[i]);
    cblas_sgemm(Order, TransA, TransB, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
    free(a); free(b);
}

/* ---- 1, 2: rounding and conversions ----------------------------------------------------------------- */
static void test_rounding(KBackend *kb) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kbf16_to_f32((uint16_t)h);
        if (isnan(f)) { bad += !isnan(kbf16_to_f32(kbf16_from_f32(f))); continue; }
        bad += kbf16_from_f32(f) != h;
    }
    CHECK(bad == 0, "%d bf16 values do not survive widen+narrow", bad);
    /* halfway cases: bf16 value h and h+1 (same sign, finite), the midpoint rounds to the even one */
    int ties = 0, tbad = 0;
    for (uint32_t h = 0x0001; h < 0x7f7f; h += 97) {
        float lo = kbf16_to_f32((uint16_t)h), hi = kbf16_to_f32((uint16_t)(h + 1));
        uint32_t ul, uh; memcpy(&ul, &lo, 4); memcpy(&uh, &hi, 4);
        uint32_t um = (ul + uh) / 2;    /* the midpoint's bits: same exponent range, exact halfway */
        float mid; memcpy(&mid, &um, 4);
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        tbad += kbf16_from_f32(mid) != even || kbf16_from_f32(-mid) != (uint16_t)(even | 0x8000);
        ties++;
    }
    CHECK(tbad == 0, "%d of %d halfway values not rounded to even", tbad, ties);
    CHECK(isnan(kbf16_to_f32(kbf16_from_f32(NAN))) && (kbf16_from_f32(NAN) & 0x0040), "NaN must stay a quiet NaN");
    CHECK(kbf16_from_f32(INFINITY) == 0x7f80 && kbf16_from_f32(-INFINITY) == 0xff80, "±Inf must stay");
    CHECK(kbf16_from_f32(3.4028235e38f) == 0x7f80, "the largest float rounds to Inf, got 0x%04x", kbf16_from_f32(3.4028235e38f));
    CHECK(kbf16_from_f32(1.0f + 0x1p-8f) == 0x3f80 && kbf16_from_f32(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81 &&
          kbf16_from_f32(1.0f + 0x3p-8f) == 0x3f82, "rounding near 1 (bf16 ulp 2^-7): 1 + 2^-8 ties to 1, 1 + 3·2^-8 to 1 + 2^-6");
    /* arrays */
    const size_t n = 100003;
    float *x = malloc(n * sizeof *x), *w = malloc(n * sizeof *w);
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) x[i] = (float)(urand() * 1e3);
    x[5] = NAN; x[6] = INFINITY; x[7] = -0.0f;
    kb->ops->narrow(kb, h, x, n);
    kb->ops->widen(kb, w, h, n);
    size_t mism = 0;
    for (size_t i = 0; i < n; i++) {
        mism += h[i] != kbf16_from_f32(x[i]);
        float want = kbf16_to_f32(h[i]);
        mism += !(w[i] == want || (isnan(w[i]) && isnan(want))) || (i == 7 && !signbit(w[i]));
    }
    CHECK(mism == 0, "array widen/narrow differ from the scalar conversions at %zu places", mism);
    printf("ok   rounding: 65536 round trips, %d ties to even, NaN/Inf/overflow/-0, arrays of %zu\n", ties, n);
    free(x); free(w); free(h);
}

static void test_narrow_inplace(void) {
    const size_t sizes[] = { 0, 1, 2, 3, 4095, 4096, 4097, 8191, 8193, 70001, 262144 };
    for (int nt = 1; nt <= 2; nt++) {
        KBackend kb;
        kbackend_cpu_init(&kb, nt);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            size_t n = sizes[s];
            float *x = malloc((n ? n : 1) * sizeof *x);
            uint16_t *want = malloc((n ? n : 1) * sizeof *want);
            for (size_t i = 0; i < n; i++) x[i] = (float)(urand() * 100);
            kb.ops->narrow(&kb, want, x, n);
            kb.ops->narrow_inplace(&kb, x, n);
            CHECK(n == 0 || !memcmp(x, want, n * sizeof *want), "narrow in place, n = %zu, %d threads: differs", n, nt);
            free(x); free(want);
        }
        kbackend_destroy(&kb);
    }
    printf("ok   narrowing in place = narrowing into a second buffer, n up to 262144, 1 and 2 threads\n");
}

/* ---- 3: gemm_ex -------------------------------------------------------------------------------------- */
static void gemm_case(KBackend *kb, int ta, int tb, int M, int N, int K, float beta, KDtype c, int batch) {
    const int lda = ta ? M + 3 : K + 1, ldb = tb ? K + 2 : N + 5, ldc = N + 1;
    const long long sA = (long long)(ta ? K : M) * lda, sB = (long long)(tb ? N : K) * ldb, sC = (long long)M * ldc;
    uint16_t *A = brand((size_t)sA * batch, 1.0), *B = brand((size_t)sB * batch, 1.0);
    void *C = malloc((size_t)sC * batch * KDT_SIZE(c));
    double *C0 = malloc((size_t)sC * batch * sizeof *C0);
    for (size_t i = 0; i < (size_t)sC * batch; i++) {   /* C's old values, representable in its type */
        float v = (float)urand();
        if (c == KDT_BF16) { ((uint16_t *)C)[i] = kbf16_from_f32(v); C0[i] = kbf16_to_f32(((uint16_t *)C)[i]); }
        else { ((float *)C)[i] = v; C0[i] = v; }
    }
    const float alpha = 0.75f;
    size_t live0 = kb->live;
    if (gemm_ex(kb, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch, KDT_BF16, c)) {
        printf("FAIL gemm_ex: %s\n", kbackend_error(kb)); failures++; return;
    }
    CHECK(kb->live == live0, "gemm_ex left %zu bytes of scratch", kb->live - live0);
    size_t bad = 0;
    double worst = 0;
    for (int q = 0; q < batch; q++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    double a = kbf16_to_f32(A[q * sA + (ta ? (size_t)k * lda + i : (size_t)i * lda + k)]);
                    double b = kbf16_to_f32(B[q * sB + (tb ? (size_t)j * ldb + k : (size_t)k * ldb + j)]);
                    s += a * b; mag += fabs(a * b);
                }
                size_t at = (size_t)(q * sC) + (size_t)i * ldc + j;
                double want = alpha * s + beta * C0[at];
                double tol = (K + 2) * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * C0[at])) + 1e-30;
                double got = c == KDT_BF16 ? kbf16_to_f32(((uint16_t *)C)[at]) : ((float *)C)[at];
                if (c == KDT_BF16) tol += 0x1p-8 * fabs(want) * 1.0001;   /* half a bf16 ulp */
                double r = fabs(got - want) / tol;
                if (!(r <= 1.0)) bad++;
                if (r > worst) worst = r;
            }
    CHECK(bad == 0, "gemm_ex %c%c M=%d N=%d K=%d beta %g %s batch %d: %zu outside the bound (worst %.2f)", ta ? 'T' : 'N',
          tb ? 'T' : 'N', M, N, K, beta, c == KDT_BF16 ? "bf16" : "fp32", batch, bad, worst);
    free(A); free(B); free(C); free(C0);
}

static void test_gemm(int sb) {
    KBackend kb;
    kbackend_cpu_init(&kb, 2);
    CHECK(kcpu_have_sbgemm() == sb, "kcpu_have_sbgemm() = %d, want %d", kcpu_have_sbgemm(), sb);
    /* the scratch follows the path */
    KShape s = { .M = 700, .N = 600, .K = 1030, .ab = KDT_BF16, .c = KDT_F32 }, s16 = s;
    s16.c = KDT_BF16;
    size_t want = sb ? 0 : (512 * 512 + 512 * 512) * sizeof(float);
    CHECK(kb.ops->scratch_bytes(&kb, KOP_GEMM_EX, &s) == want, "GEMM_EX scratch %zu, want %zu",
          kb.ops->scratch_bytes(&kb, KOP_GEMM_EX, &s), want);
    want = sb ? (size_t)700 * 600 * sizeof(float) : (3 * 512 * 512) * sizeof(float);
    CHECK(kb.ops->scratch_bytes(&kb, KOP_GEMM_EX, &s16) == want, "GEMM_EX scratch (bf16 out) %zu, want %zu",
          kb.ops->scratch_bytes(&kb, KOP_GEMM_EX, &s16), want);
    sbgemm_calls = 0;
    int cases = 0, failed0 = failures;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int c = 0; c < 2; c++) {
                const float betas[3] = { 0.0f, 1.0f, 0.5f };
                for (int k = 0; k < 3; k++) { gemm_case(&kb, ta, tb, 13, 9, 21, betas[k], (KDtype)c, 1); cases++; }
                gemm_case(&kb, ta, tb, 600, 40, 1030, 1.0f, (KDtype)c, 1); cases++;    /* crosses M and K block edges */
                gemm_case(&kb, ta, tb, 20, 530, 30, 0.5f, (KDtype)c, 1); cases++;      /* crosses N block edges */
                gemm_case(&kb, ta, tb, 7, 5, 0, 0.5f, (KDtype)c, 1); cases++;          /* K = 0: C = beta C */
                gemm_case(&kb, ta, tb, 17, 33, 40, 0.0f, (KDtype)c, 3); cases++;       /* batched, strided */
            }
    CHECK(sb ? sbgemm_calls > 0 : sbgemm_calls == 0, "%s path: cblas_sbgemm called %d times", sb ? "sbgemm" : "widening", sbgemm_calls);
    if (failures == failed0)
        printf("ok   gemm_ex, %s path: %d cases within the fp32 bound (sbgemm called %d times)\n", sb ? "sbgemm" : "widening",
               cases, sbgemm_calls);
    kbackend_destroy(&kb);
}

/* ---- 4: conversion at the op boundary ---------------------------------------------------------------- */
/* bf16 buffer of n random values, and its exact fp32 twin */
typedef struct { uint16_t *h; float *f; size_t n; } Pair;
static Pair pair(size_t n, double scale) {
    Pair p = { brand(n, scale), malloc((n ? n : 1) * sizeof(float)), n };
    for (size_t i = 0; i < n; i++) p.f[i] = kbf16_to_f32(p.h[i]);
    return p;
}
static void pfree(Pair *p) { free(p->h); free(p->f); }
/* the bf16 buffer equals the rounding of the fp32 one */
static int same(const uint16_t *h, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) if (h[i] != kbf16_from_f32(f[i])) return 0;
    return 1;
}

static void test_boundary(void) {
    KBackend kb;
    kbackend_cpu_init(&kb, 2);
    const int B = 2, T = 19, NH = 4, NKV = 2, HS = 8, C = NH * HS, N = B * T, V = 50;
    const size_t nq = (size_t)N * NH * HS, nk = (size_t)N * NKV * HS, nc = (size_t)N * C;
    const KRope rope = { 10000.0f, 0, 0, 0, 0 };
    size_t live0 = kb.live;
    int n_ops = 0;
    {   /* rmsnorm forward and backward */
        Pair x = pair(nc, 2.0), dy = pair(nc, 1.0), dx = pair(nc, 1.0);
        float *w = malloc(C * sizeof *w), *rs = malloc(N * sizeof *rs), *rs2 = malloc(N * sizeof *rs2);
        float *dw = calloc(C, sizeof *dw), *dw2 = calloc(C, sizeof *dw2), *of = malloc(nc * sizeof *of);
        uint16_t *oh = malloc(nc * sizeof *oh);
        for (int i = 0; i < C; i++) w[i] = (float)(1 + 0.1 * urand());
        rmsnorm_forward(&kb, of, rs, x.f, w, N, C, 1e-6f);
        rmsnorm_forward_ex(&kb, KDT_BF16, (float *)oh, rs2, (float *)x.h, w, N, C, 1e-6f);
        CHECK(same(oh, of, nc) && !memcmp(rs, rs2, N * sizeof *rs), "rmsnorm_forward_ex != rounding of the fp32 op");
        rmsnorm_backward(&kb, dx.f, dw, dy.f, x.f, w, rs, N, C);
        rmsnorm_backward_ex(&kb, KDT_BF16, (float *)dx.h, dw2, (float *)dy.h, (float *)x.h, w, rs, N, C);
        CHECK(same(dx.h, dx.f, nc) && !memcmp(dw, dw2, C * sizeof *dw), "rmsnorm_backward_ex != rounding of the fp32 op");
        pfree(&x); pfree(&dy); pfree(&dx); free(w); free(rs); free(rs2); free(dw); free(dw2); free(of); free(oh);
        n_ops += 2;
    }
    {   /* rope, in place */
        Pair q = pair(nq, 1.0);
        rope_forward(&kb, q.f, B, T, NH, HS, rope);
        rope_forward_ex(&kb, KDT_BF16, (float *)q.h, B, T, NH, HS, rope);
        CHECK(same(q.h, q.f, nq), "rope_forward_ex != rounding of the fp32 op");
        Pair d = pair(nq, 1.0);
        rope_backward(&kb, d.f, B, T, NH, HS, rope);
        rope_backward_ex(&kb, KDT_BF16, (float *)d.h, B, T, NH, HS, rope);
        CHECK(same(d.h, d.f, nq), "rope_backward_ex != rounding of the fp32 op");
        pfree(&q); pfree(&d);
        n_ops += 2;
    }
    {   /* attention forward and backward */
        Pair q = pair(nq, 1.0), k = pair(nk, 1.0), v = pair(nk, 1.0), dout = pair(nq, 1.0);
        float *of = malloc(nq * sizeof *of), *lse = malloc((size_t)B * NH * T * sizeof *lse), *lse2 = malloc((size_t)B * NH * T * sizeof *lse2);
        uint16_t *oh = malloc(nq * sizeof *oh);
        attention_forward(&kb, of, lse, q.f, k.f, v.f, B, T, NH, NKV, HS);
        attention_forward_ex(&kb, KDT_BF16, (float *)oh, lse2, (float *)q.h, (float *)k.h, (float *)v.h, B, T, NH, NKV, HS);
        CHECK(same(oh, of, nq) && !memcmp(lse, lse2, (size_t)B * NH * T * sizeof *lse), "attention_forward_ex != rounding of the fp32 op");
        /* the backward on the fp32 op's rounded output (what a bf16 model saved) */
        float *o32 = malloc(nq * sizeof *o32);
        for (size_t i = 0; i < nq; i++) o32[i] = kbf16_to_f32(oh[i]);
        float *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
        uint16_t *dqh = malloc(nq * 2), *dkh = malloc(nk * 2), *dvh = malloc(nk * 2);
        attention_backward(&kb, dq, dk, dv, dout.f, q.f, k.f, v.f, o32, lse, B, T, NH, NKV, HS);
        attention_backward_ex(&kb, KDT_BF16, (float *)dqh, (float *)dkh, (float *)dvh, (float *)dout.h, (float *)q.h,
                              (float *)k.h, (float *)v.h, (float *)oh, lse, B, T, NH, NKV, HS);
        CHECK(same(dqh, dq, nq) && same(dkh, dk, nk) && same(dvh, dv, nk), "attention_backward_ex != rounding of the fp32 op");
        pfree(&q); pfree(&k); pfree(&v); pfree(&dout);
        free(of); free(lse); free(lse2); free(oh); free(o32); free(dq); free(dk); free(dv); free(dqh); free(dkh); free(dvh);
        n_ops += 2;
    }
    {   /* swiglu forward and backward */
        const size_t n = 1001;
        Pair g = pair(n, 3.0), u = pair(n, 1.0), dh = pair(n, 1.0);
        float *hf = malloc(n * 4), *dg = malloc(n * 4), *du = malloc(n * 4);
        uint16_t *hh = malloc(n * 2), *dgh = malloc(n * 2), *duh = malloc(n * 2);
        swiglu_forward(&kb, hf, g.f, u.f, n);
        swiglu_forward_ex(&kb, KDT_BF16, (float *)hh, (float *)g.h, (float *)u.h, n);
        CHECK(same(hh, hf, n), "swiglu_forward_ex != rounding of the fp32 op");
        swiglu_backward(&kb, dg, du, dh.f, g.f, u.f, n);
        swiglu_backward_ex(&kb, KDT_BF16, (float *)dgh, (float *)duh, (float *)dh.h, (float *)g.h, (float *)u.h, n);
        CHECK(same(dgh, dg, n) && same(duh, du, n), "swiglu_backward_ex != rounding of the fp32 op");
        pfree(&g); pfree(&u); pfree(&dh); free(hf); free(dg); free(du); free(hh); free(dgh); free(duh);
        n_ops += 2;
    }
    {   /* embedding forward (fp32 table) and backward (fp32 table gradient) */
        float *wte = malloc((size_t)V * C * 4), *of = malloc(nc * 4), *dw = calloc((size_t)V * C, 4), *dw2 = calloc((size_t)V * C, 4);
        uint16_t *oh = malloc(nc * 2);
        int *tok = malloc(N * sizeof *tok);
        for (size_t i = 0; i < (size_t)V * C; i++) wte[i] = (float)urand();
        for (int i = 0; i < N; i++) tok[i] = (int)((urand() + 1) * 0.5 * V) % V;
        embedding_forward(&kb, of, tok, wte, N, C);
        embedding_forward_ex(&kb, KDT_BF16, (float *)oh, tok, wte, N, C);
        CHECK(same(oh, of, nc), "embedding_forward_ex != rounding of the fp32 op");
        Pair d = pair(nc, 1.0);
        embedding_backward(&kb, dw, tok, d.f, N, C, V);
        embedding_backward_ex(&kb, KDT_BF16, dw2, tok, (float *)d.h, N, C, V);
        CHECK(!memcmp(dw, dw2, (size_t)V * C * 4), "embedding_backward_ex != the fp32 op on the widened gradient");
        pfree(&d); free(wte); free(of); free(dw); free(dw2); free(oh); free(tok);
        n_ops += 2;
    }
    {   /* more than one piece (2^20 elements): element-wise results still exact, RMSNorm's weight
           gradient summed piece by piece (fp32 rounding apart), the twins one piece each */
        const size_t n = ((size_t)1 << 20) + 12345;
        Pair g = pair(n, 3.0), u = pair(n, 1.0);
        float *hf = malloc(n * 4);
        uint16_t *hh = malloc(n * 2);
        swiglu_forward(&kb, hf, g.f, u.f, n);
        size_t peak0 = kb.peak;
        kb.peak = kb.live;
        swiglu_forward_ex(&kb, KDT_BF16, (float *)hh, (float *)g.h, (float *)u.h, n);
        CHECK(same(hh, hf, n), "swiglu_forward_ex in pieces != rounding of the fp32 op");
        CHECK(kb.peak - kb.live == 3 * ((size_t)1 << 20) * 4, "swiglu_forward_ex: twins of %zu bytes, want 3 pieces of 2^20 floats",
              kb.peak - kb.live);
        kb.peak = peak0 > kb.peak ? peak0 : kb.peak;
        const int Cr = 32, Nr = (int)(((size_t)1 << 20) / Cr) + 7;
        const size_t nr = (size_t)Nr * Cr;
        Pair x = pair(nr, 2.0), dy = pair(nr, 1.0), dx = pair(nr, 1.0);
        float *w = malloc(Cr * 4), *rs = malloc(Nr * 4), *rs2 = malloc(Nr * 4), *dw = calloc(Cr, 4), *dw2 = calloc(Cr, 4);
        float *of = malloc(nr * 4);
        uint16_t *oh = malloc(nr * 2);
        for (int i = 0; i < Cr; i++) w[i] = (float)(1 + 0.1 * urand());
        rmsnorm_forward(&kb, of, rs, x.f, w, Nr, Cr, 1e-6f);
        rmsnorm_forward_ex(&kb, KDT_BF16, (float *)oh, rs2, (float *)x.h, w, Nr, Cr, 1e-6f);
        CHECK(same(oh, of, nr) && !memcmp(rs, rs2, (size_t)Nr * 4), "rmsnorm_forward_ex in pieces != rounding of the fp32 op");
        rmsnorm_backward(&kb, dx.f, dw, dy.f, x.f, w, rs, Nr, Cr);
        rmsnorm_backward_ex(&kb, KDT_BF16, (float *)dx.h, dw2, (float *)dy.h, (float *)x.h, w, rs, Nr, Cr);
        int dwok = 1;
        for (int i = 0; i < Cr; i++) dwok &= fabs(dw[i] - dw2[i]) <= 1e-4 * (fabs(dw[i]) + 1);
        CHECK(same(dx.h, dx.f, nr) && dwok, "rmsnorm_backward_ex in pieces: input gradient not exact or weight gradient off");
        pfree(&g); pfree(&u); pfree(&x); pfree(&dy); pfree(&dx);
        free(hf); free(hh); free(w); free(rs); free(rs2); free(dw); free(dw2); free(of); free(oh);
        n_ops += 3;
    }
    CHECK(kb.live == live0, "the _ex ops left %zu bytes of workspace", kb.live - live0);
    printf("ok   conversion at the op boundary: %d ops give exactly the rounded fp32 results, no workspace left\n", n_ops);
    kbackend_destroy(&kb);
}

int main(int argc, char **argv) {
    (void)argc;
    const char *e = getenv("DPMEM_CPU_SBGEMM");
    const int second = e && !strcmp(e, "0");
    KBackend kb;
    kbackend_cpu_init(&kb, 2);
    if (!second) {
        test_rounding(&kb);
        test_narrow_inplace();
        test_boundary();
    }
    kbackend_destroy(&kb);
    test_gemm(!second);
    if (!second && !failures) {
        /* the widening path: this program again, without the sbgemm it exports */
        fflush(stdout);
        if (setenv("DPMEM_CPU_SBGEMM", "0", 1) == 0) execv("/proc/self/exe", argv);
        printf("FAIL: could not run the widening path (execv)\n");
        failures++;
    } else if (!second) printf("(the widening path is not checked: the sbgemm path failed)\n");
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("all bf16 kernel checks passed\n");
    return 0;
}
