/* test_cuda_kernels.cu — every CUDA op (kernels/cuda) against its CPU twin (kernels/cpu), in the
   style of llm.c's dev/cuda: random inputs on odd shapes (T = 17 and 70 so that attention crosses
   tiles, GQA with NH = 4 and NKV = 2, C = 67, V = 101), every GPU output poisoned with NaN bytes
   before the run (an element the kernel forgets to write fails), and validate_result() allowing an
   absolute plus a relative error whose size is justified next to each call. Then the DP kernels
   (per-sample norms by every method against the CPU and against each other, clipping, book-keeping,
   the DP step with sigma = 0 and a huge clip norm against the plain gradient), the noise stream
   against kernels/cpu/noise.c bit for bit, the secure noise (ChaCha20 on the grid: group "secure")
   against kernels/cpu/secure_noise.c bit for bit, the weights' initialisation (init_normal) against the CPU's,
   a plan run for CUDA against a real run (same tagged allocations, same order), and mixed precision:
   the bf16 conversions bit for bit, gemm_ex with bf16 operands, the DP kernels on bf16 activations
   against the fp32 CPU kernels (test_bf16).

   Tolerances. fp32 with a different summation order: relative error ≤ n·2⁻²⁴ in the worst case for
   an n-term sum, ~√n·2⁻²⁴ in practice; our sums have n ≤ 128 (attention HS, V=101 tiles) so 1e-5
   relative is ~100 ulp of margin. expf/sinf/cosf differ between glibc and CUDA by ≤ 2 ulp.
   TF32 GEMMs (10-bit mantissa inputs): |error| ≤ 2⁻¹⁰·Σ_k |a_ik b_kj| per element, checked with that
   bound computed on the host; bf16 GEMMs (8-bit mantissas): 2⁻⁷·Σ_k |a_ik b_kj|. Sums in double (reductions, norms): 1e-10 relative for reductions.

   Exit 0 pass, 77 SKIP (no CUDA device: prints what it could not check), 1 on any failure.
   Not here: timings (bench/bench_cuda_kernels.cu), the training loop (test of --device cuda). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "kernels_cuda.h"   /* first: it includes kernels.h and dp_kernels.h with C linkage */
#include <Random123/philox.h>
extern "C" {                 /* C headers without linkage guards */
#include "cpu/kernels_cpu.h"
#include "noise.h"
#include "secure_noise.h"
}
#include "check.h"
#include "cuda_no_device.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define cudaCheck(e) do { cudaError_t e_ = (e); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: CUDA error %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

static KBackend cpu, gpu;

/* ---- random numbers (xorshift: reproducible, no libc rand) ------------------------------------ */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void) {   /* [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *rand_host(size_t n, float scale) {
    float *h = (float *)malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) h[i] = urand() * scale;
    return h;
}
static int *rand_tokens(size_t n, int V) {
    int *t = (int *)malloc(n * sizeof(int) + 1);
    for (size_t i = 0; i < n; i++) t[i] = (int)(((urand() + 1.0f) * 0.5f) * V) % V;
    return t;
}

/* ---- buffers on both backends ------------------------------------------------------------------ */
static float *on_cpu(const float *h, size_t n) {
    float *p = (float *)kbuf_alloc(&cpu, n * sizeof(float), "test/cpu");
    if (h) memcpy(p, h, n * sizeof(float));
    return p;
}
static float *on_gpu(const float *h, size_t n) {
    float *p = (float *)kbuf_alloc(&gpu, n * sizeof(float), "test/gpu");
    if (h) kbuf_upload(&gpu, p, h, n * sizeof(float));
    else cudaCheck(cudaMemset(p, 0xFF, n * sizeof(float)));   /* poison: all-ones bytes are a NaN */
    return p;
}
static int *ints_on(KBackend *b, const int *h, size_t n) {
    int *p = (int *)kbuf_alloc(b, n * sizeof(int), "test/tokens");
    kbuf_upload(b, p, h, n * sizeof(int));
    return p;
}
static float *from_gpu(const float *d, size_t n) {
    float *h = (float *)malloc(n * sizeof(float) + 1);
    cudaCheck(cudaDeviceSynchronize());
    kbuf_download(&gpu, h, d, n * sizeof(float));
    return h;
}

/* llm.c's validate_result: |gpu - cpu| ≤ atol + rtol·|cpu| everywhere, NaN never; prints the first
   few misses and the largest error. Returns 1 when it passed. */
static int validate_result(const float *gpu_dev, const float *cpu_ref, const char *name, size_t n, float atol, float rtol) {
    float *g = from_gpu(gpu_dev, n);
    size_t bad = 0; double maxerr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)g[i] - cpu_ref[i]);
        int ok = isfinite(g[i]) == isfinite(cpu_ref[i]) && (!isfinite(cpu_ref[i]) || d <= atol + rtol * fabs(cpu_ref[i]));
        if (isfinite(d) && d > maxerr) maxerr = d;
        if (!ok && bad++ < 5) fprintf(stderr, "  %s[%zu]: gpu %.9g cpu %.9g\n", name, i, g[i], cpu_ref[i]);
    }
    free(g);
    CHECK__COUNT(check_count);
    if (bad) { CHECK__COUNT(check_failures); fprintf(stderr, "FAIL %s: %zu of %zu elements off (max |err| %.3g)\n", name, bad, n, maxerr); }
    else printf("ok   %-34s n=%-8zu max |err| %.3g\n", name, n, maxerr);
    return bad == 0;
}

/* ---- the ops ------------------------------------------------------------------------------------ */
static void test_gemm(void) {
    const int M = 37, N = 29, K = 67, batch = 3;
    for (int prec = KCUDA_GEMM_FP32; prec <= KCUDA_GEMM_BF16; prec++)
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++) {
                kcuda_set_gemm_precision(prec);
                int lda = ta ? M : K, ldb = tb ? K : N;
                size_t sa = (size_t)M * K, sb = (size_t)K * N, sc = (size_t)M * N;
                float *A = rand_host(sa * batch, 1), *B = rand_host(sb * batch, 1), *C = rand_host(sc * batch, 1);
                float *cA = on_cpu(A, sa * batch), *cB = on_cpu(B, sb * batch), *cC = on_cpu(C, sc * batch);
                float *gA = on_gpu(A, sa * batch), *gB = on_gpu(B, sb * batch), *gC = on_gpu(C, sc * batch);
                gemm_strided_batched(&cpu, ta, tb, M, N, K, 0.7f, cA, lda, sa, cB, ldb, sb, 0.3f, cC, N, sc, batch);
                gemm_strided_batched(&gpu, ta, tb, M, N, K, 0.7f, gA, lda, sa, gB, ldb, sb, 0.3f, gC, N, sc, batch);
                /* per-element bound: fp32 K·2⁻²⁴·Σ|ab| (+ beta·C rounding), tf32 2⁻¹⁰·Σ|ab|, bf16 2⁻⁷·Σ|ab| */
                const double rel = prec == KCUDA_GEMM_TF32 ? 1.0 / 1024 : prec == KCUDA_GEMM_BF16 ? 1.0 / 128 : K / 16777216.0;
                float *g = from_gpu(gC, sc * batch);
                size_t bad = 0;
                for (int bi = 0; bi < batch; bi++)
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            double s = 0;
                            for (int k = 0; k < K; k++) {
                                float a = ta ? A[bi * sa + (size_t)k * lda + i] : A[bi * sa + (size_t)i * lda + k];
                                float bb = tb ? B[bi * sb + (size_t)j * ldb + k] : B[bi * sb + (size_t)k * ldb + j];
                                s += fabs((double)a * bb);
                            }
                            double bound = 0.7 * s * rel + 1e-6;
                            size_t e = bi * sc + (size_t)i * N + j;
                            if (!(fabs((double)g[e] - cC[e]) <= bound) && bad++ < 3)
                                fprintf(stderr, "  gemm ta=%d tb=%d %s [%zu]: gpu %.9g cpu %.9g bound %.3g\n",
                                        ta, tb, kcuda_gemm_precision_name(), e, g[e], cC[e], bound);
                        }
                CHECK(bad == 0);
                if (!bad) printf("ok   gemm ta=%d tb=%d %s batch=%d\n", ta, tb, kcuda_gemm_precision_name(), batch);
                free(g); free(A); free(B); free(C);
                kbuf_free(&cpu, cA); kbuf_free(&cpu, cB); kbuf_free(&cpu, cC);
                kbuf_free(&gpu, gA); kbuf_free(&gpu, gB); kbuf_free(&gpu, gC);
            }
    kcuda_set_tf32(0);
}

static void test_elementwise(void) {
    const size_t n = 100003;   /* odd, several blocks */
    float *x = rand_host(n, 3), *y = rand_host(n, 3);
    float *cx = on_cpu(x, n), *cy = on_cpu(y, n), *gx = on_gpu(x, n), *gy = on_gpu(y, n), *gz = on_gpu(NULL, n);
    float *cz = on_cpu(NULL, n);
    /* exact: one rounding per element, the same on both */
    fill_buffer(&cpu, cz, 1.25f, n); fill_buffer(&gpu, gz, 1.25f, n);
    validate_result(gz, cz, "fill", n, 0, 0);
    copy_buffer(&cpu, cz, cx, n); copy_buffer(&gpu, gz, gx, n);
    validate_result(gz, cz, "copy", n, 0, 0);
    add_inplace(&cpu, cy, cx, n); add_inplace(&gpu, gy, gx, n);
    validate_result(gy, cy, "add", n, 0, 0);
    scale_inplace(&cpu, cy, -0.37f, n); scale_inplace(&gpu, gy, -0.37f, n);
    validate_result(gy, cy, "scale", n, 0, 0);
    /* reductions in double, different order: 1e-10 relative */
    double cs, gs, cq, gq;
    reduce_sum(&cpu, cx, n, &cs); reduce_sum(&gpu, gx, n, &gs);
    reduce_sumsq(&cpu, cx, n, &cq); reduce_sumsq(&gpu, gx, n, &gq);
    CHECK(fabs(cs - gs) <= 1e-10 * (fabs(cs) + n));
    CHECK(fabs(cq - gq) <= 1e-10 * cq);
    printf("ok   sum %.12g/%.12g sumsq %.12g/%.12g\n", cs, gs, cq, gq);
    x[5] = NAN; x[n - 1] = INFINITY; x[777] = -INFINITY;
    kbuf_upload(&gpu, gx, x, n * sizeof(float)); memcpy(cx, x, n * sizeof(float));
    size_t cc, gc;
    count_nonfinite(&cpu, cx, n, &cc); count_nonfinite(&gpu, gx, n, &gc);
    CHECK_EQ_U(cc, 3); CHECK_EQ_U(gc, 3);
    /* SwiGLU: expf ≤ 2 ulp apart, a few roundings: 1e-6 relative + 1e-7 */
    float *g = rand_host(n, 4), *u = rand_host(n, 2), *dh = rand_host(n, 1);
    float *cg = on_cpu(g, n), *cu = on_cpu(u, n), *cdh = on_cpu(dh, n), *ch = on_cpu(NULL, n), *cdg = on_cpu(NULL, n), *cdu = on_cpu(NULL, n);
    float *gg = on_gpu(g, n), *gu = on_gpu(u, n), *gdh = on_gpu(dh, n), *gh = on_gpu(NULL, n), *gdg = on_gpu(NULL, n), *gdu = on_gpu(NULL, n);
    swiglu_forward(&cpu, ch, cg, cu, n); swiglu_forward(&gpu, gh, gg, gu, n);
    validate_result(gh, ch, "swiglu_forward", n, 1e-7f, 1e-6f);
    swiglu_backward(&cpu, cdg, cdu, cdh, cg, cu, n); swiglu_backward(&gpu, gdg, gdu, gdh, gg, gu, n);
    validate_result(gdg, cdg, "swiglu_backward dgate", n, 1e-7f, 1e-6f);
    validate_result(gdu, cdu, "swiglu_backward dup", n, 1e-7f, 1e-6f);
    /* AdamW and SGD, three steps (t = 1..3: bias corrections change): FMA contraction on the GPU
       moves a rounding, 1e-6 relative on p over 3 steps */
    float *p = rand_host(n, 1), *gr = rand_host(n, 0.1f);
    float *cp = on_cpu(p, n), *cgr = on_cpu(gr, n), *cm = on_cpu(NULL, n), *cv = on_cpu(NULL, n);
    float *gp = on_gpu(p, n), *ggr = on_gpu(gr, n), *gm = on_gpu(NULL, n), *gv = on_gpu(NULL, n);
    fill_buffer(&gpu, gm, 0, n); fill_buffer(&gpu, gv, 0, n); fill_buffer(&cpu, cm, 0, n); fill_buffer(&cpu, cv, 0, n);
    for (int t = 1; t <= 3; t++) {
        adamw_update(&cpu, cp, cgr, cm, cv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        adamw_update(&gpu, gp, ggr, gm, gv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
    }
    validate_result(gp, cp, "adamw p", n, 1e-7f, 1e-6f);
    validate_result(gm, cm, "adamw m", n, 1e-9f, 1e-6f);
    validate_result(gv, cv, "adamw v", n, 1e-12f, 1e-5f);
    sgd_update(&cpu, cp, cgr, n, 0.01f, 0.1f); sgd_update(&gpu, gp, ggr, n, 0.01f, 0.1f);
    validate_result(gp, cp, "sgd p", n, 1e-7f, 1e-6f);
    free(x); free(y); free(g); free(u); free(dh); free(p); free(gr);
    kbackend_free_all(&cpu);
}

static void test_embedding_rmsnorm_ce(void) {
    const int B = 2, T = 17, N = B * T, C = 67, V = 101;
    int *tok = rand_tokens(N, V);
    tok[3] = tok[20] = tok[7];   /* repeated tokens: the backward must add, not overwrite */
    float *wte = rand_host((size_t)V * C, 1), *dout = rand_host((size_t)N * C, 1), *dw0 = rand_host((size_t)V * C, 1);
    int *ct = ints_on(&cpu, tok, N), *gt = ints_on(&gpu, tok, N);
    float *cw = on_cpu(wte, (size_t)V * C), *gw = on_gpu(wte, (size_t)V * C);
    float *co = on_cpu(NULL, (size_t)N * C), *go = on_gpu(NULL, (size_t)N * C);
    embedding_forward(&cpu, co, ct, cw, N, C); embedding_forward(&gpu, go, gt, gw, N, C);
    validate_result(go, co, "embedding_forward", (size_t)N * C, 0, 0);
    /* backward: each column walks the rows in order on both: the same additions, exact */
    float *cdo = on_cpu(dout, (size_t)N * C), *gdo = on_gpu(dout, (size_t)N * C);
    float *cdw = on_cpu(dw0, (size_t)V * C), *gdw = on_gpu(dw0, (size_t)V * C);
    embedding_backward(&cpu, cdw, ct, cdo, N, C, V); embedding_backward(&gpu, gdw, gt, gdo, N, C, V);
    validate_result(gdw, cdw, "embedding_backward", (size_t)V * C, 0, 0);
    /* tokens outside [0, V): skipped on both (nothing written past the table's V rows: the next row of a
       larger buffer stays as it was) and counted on the device, once per row */
    CHECK(kcuda_bad_tokens() == 0);
    int *badt = (int *)malloc((size_t)N * sizeof *badt);
    memcpy(badt, tok, (size_t)N * sizeof *badt);
    badt[0] = V; badt[5] = -1; badt[N - 1] = V + 3;
    int *cbt = ints_on(&cpu, badt, N), *gbt = ints_on(&gpu, badt, N);
    float *guard = rand_host((size_t)(V + 4) * C, 1);
    float *cgd = on_cpu(guard, (size_t)(V + 4) * C), *ggd = on_gpu(guard, (size_t)(V + 4) * C);
    embedding_backward(&cpu, cgd, cbt, cdo, N, C, V); embedding_backward(&gpu, ggd, gbt, gdo, N, C, V);
    validate_result(ggd, cgd, "embedding_backward, tokens outside [0, V) skipped", (size_t)(V + 4) * C, 0, 0);
    CHECK(memcmp(cgd + (size_t)V * C, guard + (size_t)V * C, (size_t)4 * C * sizeof *guard) == 0);
    CHECK(kcuda_bad_tokens() == 3);
    CHECK(kcuda_bad_tokens() == 0);
    free(badt); free(guard);

    /* RMSNorm: double sums in a different order, then float: 1e-6 relative + 1e-6 */
    float *x = rand_host((size_t)N * C, 2), *w = rand_host(C, 1), *dx0 = rand_host((size_t)N * C, 1), *dwn0 = rand_host(C, 1);
    float *cx = on_cpu(x, (size_t)N * C), *gx = on_gpu(x, (size_t)N * C), *cwn = on_cpu(w, C), *gwn = on_gpu(w, C);
    float *cr = on_cpu(NULL, N), *gr = on_gpu(NULL, N);
    rmsnorm_forward(&cpu, co, cr, cx, cwn, N, C, 1e-5f); rmsnorm_forward(&gpu, go, gr, gx, gwn, N, C, 1e-5f);
    validate_result(go, co, "rmsnorm_forward out", (size_t)N * C, 1e-6f, 1e-6f);
    validate_result(gr, cr, "rmsnorm_forward rstd", N, 0, 1e-6f);
    float *cdx = on_cpu(dx0, (size_t)N * C), *gdx = on_gpu(dx0, (size_t)N * C);
    float *cdwn = on_cpu(dwn0, C), *gdwn = on_gpu(dwn0, C);
    rmsnorm_backward(&cpu, cdx, cdwn, cdo, cx, cwn, cr, N, C);
    rmsnorm_backward(&gpu, gdx, gdwn, gdo, gx, gwn, gr, N, C);
    validate_result(gdx, cdx, "rmsnorm_backward dinp", (size_t)N * C, 1e-5f, 1e-5f);
    /* dw: a 34-term float sum, grouped differently: 1e-5 relative + 1e-5 */
    validate_result(gdwn, cdwn, "rmsnorm_backward dw", C, 1e-5f, 1e-5f);

    /* cross-entropy: the loss in double stats, dlogits in place with sample weights */
    float *logits = rand_host((size_t)N * V, 5), *sw = rand_host(B, 1);
    int *tg = rand_tokens(N, V);
    int *ctg = ints_on(&cpu, tg, N), *gtg = ints_on(&gpu, tg, N);
    float *cl = on_cpu(logits, (size_t)N * V), *gl = on_gpu(logits, (size_t)N * V);
    float *closs = on_cpu(NULL, N), *gloss = on_gpu(NULL, N), *csw = on_cpu(sw, B), *gsw = on_gpu(sw, B);
    crossentropy_forward(&cpu, closs, cl, ctg, N, V); crossentropy_forward(&gpu, gloss, gl, gtg, N, V);
    validate_result(gloss, closs, "crossentropy_forward", N, 1e-5f, 1e-5f);
    crossentropy_backward(&cpu, cl, ctg, 0.03f, csw, B, T, V); crossentropy_backward(&gpu, gl, gtg, 0.03f, gsw, B, T, V);
    validate_result(gl, cl, "crossentropy_backward (weights)", (size_t)N * V, 1e-8f, 1e-5f);
    kbuf_upload(&gpu, gl, logits, (size_t)N * V * 4); memcpy(cl, logits, (size_t)N * V * 4);
    crossentropy_backward(&cpu, cl, ctg, 0.5f, NULL, B, T, V); crossentropy_backward(&gpu, gl, gtg, 0.5f, NULL, B, T, V);
    validate_result(gl, cl, "crossentropy_backward (no weights)", (size_t)N * V, 1e-8f, 1e-5f);
    free(tok); free(wte); free(dout); free(dw0); free(x); free(w); free(dx0); free(dwn0); free(logits); free(sw); free(tg);
    kbackend_free_all(&cpu);
}

static void test_rope(void) {
    const int B = 2, T = 70, NH = 4, HS = 24;
    size_t n = (size_t)B * T * NH * HS;
    KRope plain = { 10000.0f, 0, 0, 0, 0 }, llama3 = { 500000.0f, 32.0f, 1.0f, 4.0f, 8192.0f };
    for (int k = 0; k < 2; k++) {
        KRope r = k ? llama3 : plain;
        float *x = rand_host(n, 1);
        float *cx = on_cpu(x, n), *gx = on_gpu(x, n);
        rope_forward(&cpu, cx, B, T, NH, HS, r); rope_forward(&gpu, gx, B, T, NH, HS, r);
        /* sinf/cosf of angles up to 69 rad: ≤ 2 ulp apart; 2e-6 absolute on |x| ≤ √2 */
        validate_result(gx, cx, k ? "rope_forward llama3" : "rope_forward", n, 2e-6f, 1e-6f);
        rope_backward(&cpu, cx, B, T, NH, HS, r); rope_backward(&gpu, gx, B, T, NH, HS, r);
        validate_result(gx, cx, k ? "rope_backward llama3" : "rope_backward", n, 4e-6f, 1e-6f);
        validate_result(gx, x, "rope round trip = identity", n, 1e-5f, 0);
        free(x);
    }
    kbackend_free_all(&cpu);
}

static void test_attention(int B, int T, int NH, int NKV, int HS) {
    size_t nq = (size_t)B * T * NH * HS, nk = (size_t)B * T * NKV * HS, nl = (size_t)B * NH * T;
    float *q = rand_host(nq, 1), *k = rand_host(nk, 1), *v = rand_host(nk, 1), *dout = rand_host(nq, 1);
    float *cq = on_cpu(q, nq), *ck = on_cpu(k, nk), *cv = on_cpu(v, nk), *cdo = on_cpu(dout, nq);
    float *gq = on_gpu(q, nq), *gk = on_gpu(k, nk), *gv = on_gpu(v, nk), *gdo = on_gpu(dout, nq);
    float *co = on_cpu(NULL, nq), *cl = on_cpu(NULL, nl), *go = on_gpu(NULL, nq), *gl = on_gpu(NULL, nl);
    char name[96];
    attention_forward(&cpu, co, cl, cq, ck, cv, B, T, NH, NKV, HS);
    attention_forward(&gpu, go, gl, gq, gk, gv, B, T, NH, NKV, HS);
    /* online softmax over tiles of 32 (GPU) vs 64 (CPU), HS-term dots in the same order:
       1e-5 relative + 1e-6 on outputs of size ~1 */
    snprintf(name, sizeof name, "attention_forward T=%d HS=%d out", T, HS);
    validate_result(go, co, name, nq, 1e-6f, 1e-5f);
    snprintf(name, sizeof name, "attention_forward T=%d HS=%d lse", T, HS);
    validate_result(gl, cl, name, nl, 1e-5f, 1e-5f);   /* lse ≈ 4: 1e-5 is ~20 ulp */
    float *cdq = on_cpu(NULL, nq), *cdk = on_cpu(NULL, nk), *cdv = on_cpu(NULL, nk);
    float *gdq = on_gpu(NULL, nq), *gdk = on_gpu(NULL, nk), *gdv = on_gpu(NULL, nk);
    attention_backward(&cpu, cdq, cdk, cdv, cdo, cq, ck, cv, co, cl, B, T, NH, NKV, HS);
    attention_backward(&gpu, gdq, gdk, gdv, gdo, gq, gk, gv, go, gl, B, T, NH, NKV, HS);
    /* sums over up to T·NH/NKV terms of mixed sign: 1e-4 relative + 1e-5 absolute */
    snprintf(name, sizeof name, "attention_backward T=%d HS=%d dq", T, HS);
    validate_result(gdq, cdq, name, nq, 1e-5f, 1e-4f);
    snprintf(name, sizeof name, "attention_backward T=%d HS=%d dk", T, HS);
    validate_result(gdk, cdk, name, nk, 1e-5f, 1e-4f);
    snprintf(name, sizeof name, "attention_backward T=%d HS=%d dv", T, HS);
    validate_result(gdv, cdv, name, nk, 1e-5f, 1e-4f);
    free(q); free(k); free(v); free(dout);
    kbackend_free_all(&cpu);
}

/* ---- DP ------------------------------------------------------------------------------------------ */
/* The GPU flash norms in block rows of R (a and g device pointers of dt) into norm2 = n0 + ‖g_b‖², held
   to the CPU twin's `ref`: the scratch is poisoned (NaN: a Gram entry or partial read before it is
   written fails) and followed by a guard that must come back untouched (nothing written past
   kcuda_flash_floats); a second run gives the same bits (fixed-order partial sums, no atomics); the
   IO is that of its schedule (per block row: rows 0..w of a and g read for both GEMM operands, the
   two ri × w Gram blocks written and read back, the partials written and read; the norms written). */
static void check_flash(const float *ga, const float *gg, const float *n0, const float *ref, int B, int T, int IC, int OC,
                        int R, KDtype dt, float rtol, const char *label) {
    const size_t nf = kcuda_flash_floats(B, T, R), guard = 64;
    float *scr = on_gpu(NULL, nf + guard), ones[64];
    for (size_t i = 0; i < guard; i++) ones[i] = 1.0f;
    kbuf_upload(&gpu, scr + nf, ones, sizeof ones);
    float *gn = on_gpu(n0, B);
    DpIO io = { 0, 0 };
    dp_linear_norms_flash_cuda_dt(gn, scr, ga, gg, B, T, IC, OC, R, dt, &io);
    char nm[96];
    snprintf(nm, sizeof nm, "%s T=%d R=%d B=%d", label, T, R, B);
    validate_result(gn, ref, nm, B, 0, rtol);
    float *first = from_gpu(gn, B), *tail = from_gpu(scr + nf, guard);
    size_t touched = 0;
    for (size_t i = 0; i < guard; i++) touched += tail[i] != 1.0f;
    CHECK(touched == 0);
    if (touched) fprintf(stderr, "FAIL %s: %zu guard floats past the scratch overwritten\n", nm, touched);
    kbuf_upload(&gpu, gn, n0, (size_t)B * 4);
    dp_linear_norms_flash_cuda_dt(gn, scr, ga, gg, B, T, IC, OC, R, dt, NULL);
    float *second = from_gpu(gn, B);
    CHECK(memcmp(first, second, (size_t)B * 4) == 0);
    const int Rc = R > T ? T : R;
    uint64_t rd = 0, wr = 0, blocks = 0;
    for (int i0 = 0; i0 < T; i0 += Rc, blocks++) {
        const uint64_t ri = (uint64_t)(T - i0 < Rc ? T - i0 : Rc), w = (uint64_t)i0 + ri;
        rd += (ri + w) * (uint64_t)(IC + OC) * 4 + 2 * ri * w * 4;
        wr += 2 * ri * w * 4;
    }
    const uint64_t parts = blocks * KCUDA_FLASH_PARTS * 8;
    CHECK_EQ_U(io.read, (uint64_t)B * (rd + parts));
    CHECK_EQ_U(io.written, (uint64_t)B * (wr + parts + 4));
    free(first); free(tail); free(second);
    kbuf_free(&gpu, gn); kbuf_free(&gpu, scr);
}

static void test_dp(void) {
    const int B = 3, T = 17, IC = 67, OC = 45, C = 67;
    /* Training GEMMs in bf16: the DP kernels must not follow (they are fp32 whatever the setting,
       so that a clipped gradient never exceeds C by a rounding error), hence fp32 tolerances below. */
    kcuda_set_gemm_precision(KCUDA_GEMM_BF16);
    size_t na = (size_t)B * T * IC, ng = (size_t)B * T * OC;
    float *a = rand_host(na, 1), *g = rand_host(ng, 1), *n0 = rand_host(B, 0);
    for (int b = 0; b < B; b++) n0[b] = 0.5f + b;   /* norm2 accumulates into what is there */
    float *ga = on_gpu(a, na), *gg = on_gpu(g, ng);
    float ref[3];
    float *psg_h = (float *)malloc((size_t)B * OC * IC * sizeof(float));
    memcpy(ref, n0, sizeof ref);
    DpIO cio = {0, 0}, gio = {0, 0};
    dp_linear_norms_direct(ref, psg_h, a, g, B, T, IC, OC, &cio);
    /* the norms: double accumulation of float GEMM outputs; 1e-5 relative */
    float *gn = on_gpu(n0, B), *gpsg = on_gpu(NULL, (size_t)B * OC * IC);
    dp_linear_norms_direct_cuda(gn, gpsg, ga, gg, B, T, IC, OC, &gio);
    validate_result(gn, ref, "dp norms direct", B, 0, 1e-5f);
    validate_result(gpsg, psg_h, "dp per-sample grads", (size_t)B * OC * IC, 1e-5f, 1e-5f);
    CHECK_EQ_U(gio.read, cio.read); CHECK_EQ_U(gio.written, cio.written);
    float *gram = on_gpu(NULL, 2 * (size_t)B * T * T);
    kbuf_upload(&gpu, gn, n0, B * 4);
    dp_linear_norms_ghost_cuda(gn, gram, ga, gg, B, T, IC, OC, NULL);
    validate_result(gn, ref, "dp norms ghost (vs direct)", B, 0, 1e-5f);
    {   /* no samples: nothing happens, as in the CPU loops (a grid with gridDim.y = 0 would be an
           invalid launch, and cudaLaunchCheck would end the program) */
        float *before = from_gpu(gn, B);
        dp_linear_norms_direct_cuda(gn, gpsg, ga, gg, 0, T, IC, OC, NULL);
        dp_linear_norms_ghost_cuda(gn, gram, ga, gg, 0, T, IC, OC, NULL);
        dp_linear_norms_flash_cuda(gn, NULL, ga, gg, 0, T, IC, OC, 32, NULL);
        validate_result(gn, before, "dp norms with B = 0: norm2 untouched", B, 0, 0);
        free(before);
    }
    /* flash in block rows against the CPU twin (its tile 32): one block (R ≥ T), T a multiple of R
       and not (a short last block row), R = 1, and the trainer's R from the budget. The reduction
       reads float4 where rows are 16-byte aligned (sample stride R·T and row width w multiples of 4):
       T = 70 with R = 16 and 64 and T = 135 with R = 32 mix both paths, T = 72 with R = 6 and 10 puts
       the diagonal block's first column (i0 = 6, 10, 30, ...) inside a float4 */
    const int flashT[4] = { 17, 70, 135, 72 };
    const int flashR[4][4] = { { 17, 5, 1, 0 }, { 35, 16, 64, 0 }, { 45, 32, 64, 0 }, { 6, 10, 72, 0 } };
    for (int f = 0; f < 4; f++) {
        const int Tt = flashT[f];
        size_t na2 = (size_t)B * Tt * IC, ng2 = (size_t)B * Tt * OC;
        float *a2 = rand_host(na2, 1), *g2 = rand_host(ng2, 1), ref2[3];
        memcpy(ref2, n0, sizeof ref2);
        float *tile = (float *)malloc(dp_linear_flash_floats(B, Tt, 32, 1) * sizeof(float));
        dp_linear_norms_flash(ref2, tile, a2, g2, B, Tt, IC, OC, 32, 1, NULL);
        float *ga2 = on_gpu(a2, na2), *gg2 = on_gpu(g2, ng2);
        for (int r = 0; r < 4; r++) {
            const int R = flashR[f][r] ? flashR[f][r] : kcuda_flash_rows(B, Tt);
            check_flash(ga2, gg2, n0, ref2, B, Tt, IC, OC, R, KDT_F32, 1e-5f, "dp norms flash");
        }
        free(a2); free(g2); free(tile);
    }
    /* embedding norms: repeated tokens; double accumulation both sides */
    int *tok = rand_tokens((size_t)B * T, 7);   /* a small vocabulary: many equal pairs */
    float *ge = rand_host((size_t)B * T * C, 1), eref[3];
    memcpy(eref, n0, sizeof eref);
    dp_embedding_norms(eref, tok, ge, B, T, C, NULL);
    int *gtok = ints_on(&gpu, tok, (size_t)B * T);
    float *gge = on_gpu(ge, (size_t)B * T * C);
    kbuf_upload(&gpu, gn, n0, B * 4);
    dp_embedding_norms_cuda(gn, gtok, gge, B, T, C, NULL);
    validate_result(gn, eref, "dp norms embedding", B, 0, 1e-6f);
    /* RMSNorm weight: psg [B, C] then Σ psg² */
    float *dout = rand_host((size_t)B * T * C, 1), *inp = rand_host((size_t)B * T * C, 1), *rstd = rand_host((size_t)B * T, 1);
    float *rpsg = (float *)malloc((size_t)B * C * 4), rref[3];
    memcpy(rref, n0, sizeof rref);
    dp_rmsnorm_norms_direct(rref, rpsg, dout, inp, rstd, B, T, C);
    float *gdo = on_gpu(dout, (size_t)B * T * C), *ginp = on_gpu(inp, (size_t)B * T * C), *grs = on_gpu(rstd, (size_t)B * T);
    float *grpsg = on_gpu(NULL, (size_t)B * C);
    kbuf_upload(&gpu, gn, n0, B * 4);
    dp_rmsnorm_norms_direct_cuda(gn, grpsg, gdo, ginp, grs, B, T, C);
    validate_result(grpsg, rpsg, "dp rmsnorm per-sample grads", (size_t)B * C, 1e-6f, 1e-5f);
    validate_result(gn, rref, "dp norms rmsnorm", B, 0, 1e-5f);
    {   /* tied embeddings: the cross term's u = D A and 2 Σ gE·u, and ‖psg‖² of the direct route */
        const int Vt = 11;
        int *ttok = rand_tokens((size_t)B * T, Vt);
        float *lg = rand_host((size_t)B * T * Vt, 1), *ta = rand_host((size_t)B * T * C, 1);
        float *tu = (float *)malloc((size_t)B * T * C * 4), *tscr = (float *)malloc((size_t)T * T * 4), tref[3];
        DpIO c3 = {0, 0}, g3 = {0, 0}, cu = {0, 0};
        dp_tied_cross_u(tu, tscr, ttok, lg, ta, B, T, C, Vt, T, 1, NULL);
        int *gttok = ints_on(&gpu, ttok, (size_t)B * T);
        float *glg = on_gpu(lg, (size_t)B * T * Vt), *gta = on_gpu(ta, (size_t)B * T * C), *gtu = on_gpu(NULL, (size_t)B * T * C);
        /* D's block rows: all of T, a short last block row (17 = 3·5 + 2), one row at a time; the
           scratch poisoned, the output poisoned again before each run */
        const int tiedR[3] = { T, 5, 1 };
        for (int r = 0; r < 3; r++) {
            float *gscr = on_gpu(NULL, kcuda_tied_cross_floats(B, T, tiedR[r], KDT_F32));
            cudaCheck(cudaMemset(gtu, 0xFF, (size_t)B * T * C * 4));
            DpIO gu = {0, 0};
            dp_tied_cross_u_cuda_dt(gtu, gscr, gttok, glg, gta, B, T, C, Vt, tiedR[r], KDT_F32, &gu);
            char nm[48];
            snprintf(nm, sizeof nm, "dp tied cross u R=%d", tiedR[r]);
            validate_result(gtu, tu, nm, (size_t)B * T * C, 1e-5f, 1e-5f);
            cu = (DpIO){ 0, 0 };
            dp_tied_cross_u(tu, tscr, ttok, lg, ta, B, T, C, Vt, tiedR[r], 1, &cu);   /* the CPU's figure at the same R */
            CHECK_EQ_U(gu.read, cu.read); CHECK_EQ_U(gu.written, cu.written);
            kbuf_free(&gpu, gscr);
        }
        memcpy(tref, n0, sizeof tref);
        dp_tied_cross_dot(tref, ge, tu, B, T, C, &c3);
        kbuf_upload(&gpu, gn, n0, B * 4);
        dp_tied_cross_dot_cuda_dt(gn, gge, gtu, B, T, C, KDT_F32, &g3);
        validate_result(gn, tref, "dp tied cross term", B, 1e-6f, 1e-5f);
        CHECK_EQ_U(g3.read, c3.read); CHECK_EQ_U(g3.written, c3.written);
        memcpy(tref, n0, sizeof tref);
        dp_psg_norms(tref, psg_h, B, (size_t)OC * IC);
        kbuf_upload(&gpu, gn, n0, B * 4);
        dp_psg_norms_cuda(gn, gpsg, B, (size_t)OC * IC);
        validate_result(gn, tref, "dp psg norms", B, 0, 1e-5f);
        free(ttok); free(lg); free(ta); free(tu); free(tscr);
    }
    /* clip factors (one NaN norm: dropped), clipped sum, book-keeping */
    float nn[3] = { 4.0f, 0.01f, NAN }, cf[3];
    dp_clip_factors(cf, nn, B, 1.0f);
    float *gnn = on_gpu(nn, B), *gcf = on_gpu(NULL, B);
    dp_clip_factors_cuda(gcf, gnn, B, 1.0f);
    validate_result(gcf, cf, "dp clip factors", B, 0, 1e-7f);
    float *grad0 = rand_host((size_t)OC * IC, 1), *gref = (float *)malloc((size_t)OC * IC * 4);
    memcpy(gref, grad0, (size_t)OC * IC * 4);
    dp_clipped_sum(gref, psg_h, cf, B, (size_t)OC * IC);
    float *ggrad = on_gpu(grad0, (size_t)OC * IC);
    dp_clipped_sum_cuda(ggrad, gpsg, gcf, B, (size_t)OC * IC);
    validate_result(ggrad, gref, "dp clipped sum", (size_t)OC * IC, 1e-5f, 1e-5f);
    /* sample 0's gradient already in grad (book-keeping's split), the others after it */
    memcpy(gref, psg_h, (size_t)OC * IC * 4);
    dp_clipped_sum_first(gref, psg_h + (size_t)OC * IC, cf, B, (size_t)OC * IC);
    kbuf_upload(&gpu, ggrad, psg_h, (size_t)OC * IC * 4);
    dp_clipped_sum_first_cuda(ggrad, gpsg + (size_t)OC * IC, gcf, B, (size_t)OC * IC);
    validate_result(ggrad, gref, "dp clipped sum, sample 0 in grad", (size_t)OC * IC, 1e-5f, 1e-5f);
    memcpy(gref, grad0, (size_t)OC * IC * 4);
    dp_linear_clipped_grad_bk(gref, a, g, cf, B, T, IC, OC);
    kbuf_upload(&gpu, ggrad, grad0, (size_t)OC * IC * 4);
    dp_linear_clipped_grad_bk_cuda(ggrad, ga, gg, gcf, B, T, IC, OC);
    validate_result(ggrad, gref, "dp book-keeping linear", (size_t)OC * IC, 1e-5f, 1e-5f);
    float *dwte0 = rand_host((size_t)7 * C, 1), *eb = (float *)malloc((size_t)7 * C * 4);
    float cf2[3] = { 0.25f, 1.0f, 0.5f };
    memcpy(eb, dwte0, (size_t)7 * C * 4);
    dp_embedding_clipped_grad_bk(eb, tok, ge, cf2, B, T, C);
    float *gdwte = on_gpu(dwte0, (size_t)7 * C), *gcf2 = on_gpu(cf2, B);
    dp_embedding_clipped_grad_bk_cuda(gdwte, gtok, gge, gcf2, B, T, C, 7);
    validate_result(gdwte, eb, "dp book-keeping embedding", (size_t)7 * C, 1e-6f, 1e-6f);
    /* the DP step with sigma = 0 and a huge clip norm is the vanilla step: clip factors are 1, the
       clipped sum is the ordinary weight gradient, the noise step only divides by the batch */
    kcuda_set_gemm_precision(KCUDA_GEMM_FP32);   /* the plain gradient below is a training GEMM */
    float *gones = on_gpu(NULL, B), *gw_dp = on_gpu(NULL, (size_t)OC * IC), *gw_plain = on_gpu(NULL, (size_t)OC * IC);
    kbuf_upload(&gpu, gn, n0, B * 4);
    float *fscr = on_gpu(NULL, kcuda_flash_floats(B, T, kcuda_flash_rows(B, T)));
    dp_linear_norms_flash_cuda(gn, fscr, ga, gg, B, T, IC, OC, kcuda_flash_rows(B, T), NULL);
    dp_clip_factors_cuda(gones, gn, B, 1e30f);
    float onesh[3] = { 1, 1, 1 };
    validate_result(gones, onesh, "dp huge C: clip factors are 1", B, 0, 0);
    fill_buffer(&gpu, gw_dp, 0, (size_t)OC * IC); fill_buffer(&gpu, gw_plain, 0, (size_t)OC * IC);
    dp_linear_clipped_grad_bk_cuda(gw_dp, ga, gg, gones, B, T, IC, OC);
    matmul_backward_weight(&gpu, gw_plain, gg, ga, B * T, IC, OC);
    noise_privatize_cuda(gw_dp, (size_t)OC * IC, 0.0, 1e30, 4.0, 1234, 7, 0);
    scale_inplace(&gpu, gw_plain, 0.25f, (size_t)OC * IC);
    float *plain_h = from_gpu(gw_plain, (size_t)OC * IC);
    validate_result(gw_dp, plain_h, "dp step sigma=0 huge C == vanilla", (size_t)OC * IC, 1e-5f, 1e-5f);
    free(plain_h);
    free(a); free(g); free(n0); free(psg_h); free(tok); free(ge); free(dout); free(inp); free(rstd); free(rpsg);
    free(grad0); free(gref); free(dwte0); free(eb);
}

/* ---- mixed precision ------------------------------------------------------------------------------ */
/* n random values representable in bf16, as bf16 (host) */
static uint16_t *rand_bf16(size_t n, float scale) {
    uint16_t *h = (uint16_t *)malloc(n * sizeof(uint16_t) + 2);
    for (size_t i = 0; i < n; i++) h[i] = kbf16_from_f32(urand() * scale);
    return h;
}
static float *widened(const uint16_t *h, size_t n) {
    float *f = (float *)malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) f[i] = kbf16_to_f32(h[i]);
    return f;
}
static void *bytes_on(KBackend *b, const void *h, size_t bytes) {
    void *p = kbuf_alloc(b, bytes, "test/bf16");
    kbuf_upload(b, p, h, bytes);
    return p;
}

/* The conversions bit for bit against the CPU's; gemm_ex against the CPU's gemm_ex on the same bf16
   operands (fp32 accumulation on both: the fp32 bound K·2⁻²⁴·Σ|ab|, plus one bf16 ulp, 2⁻⁷ relative,
   for a bf16 output that the two sides may round to neighbouring values); the DP kernels on bf16
   activations (`_dt`) against the fp32 CPU kernels on the widened values (1e-5 relative, as above);
   the safe clip factors bit for bit. */
static void test_bf16(void) {
    const size_t n = 100003;
    float *x = rand_host(n, 100);
    x[3] = NAN; x[4] = INFINITY;
    uint16_t *hc = (uint16_t *)malloc(n * 2), *hg = (uint16_t *)malloc(n * 2);
    narrow_cpu(&cpu, hc, x, n);
    float *gx = on_gpu(x, n);
    void *g16 = kbuf_alloc(&gpu, n * 2, "test/bf16");
    gpu.ops->narrow(&gpu, g16, gx, n);
    cudaCheck(cudaDeviceSynchronize());
    kbuf_download(&gpu, hg, g16, n * 2);
    CHECK(memcmp(hc, hg, n * 2) == 0);
    float *gw = on_gpu(NULL, n);
    gpu.ops->widen(&gpu, gw, g16, n);
    float *wc = widened(hc, n);
    validate_result(gw, wc, "bf16 widen", n, 0, 0);
    gpu.ops->narrow_inplace(&gpu, gx, n);   /* in place: the first 2n bytes */
    cudaCheck(cudaDeviceSynchronize());
    kbuf_download(&gpu, hg, gx, n * 2);
    CHECK(memcmp(hc, hg, n * 2) == 0);
    printf("ok   bf16 narrow, widen, narrow in place: bit for bit as the CPU (n=%zu)\n", n);
    free(x); free(hc); free(hg); free(wc);
    kbuf_free(&gpu, gw); kbuf_free(&gpu, g16); kbuf_free(&gpu, gx);

    /* gemm_ex */
    const int M = 37, N = 29, K = 67, batch = 2;
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (int c = 0; c <= 1; c++) {
                const KDtype ct = c ? KDT_BF16 : KDT_F32;
                int lda = ta ? M : K, ldb = tb ? K : N;
                size_t sa = (size_t)M * K, sb = (size_t)K * N, sc = (size_t)M * N;
                uint16_t *A = rand_bf16(sa * batch, 1), *B = rand_bf16(sb * batch, 1);
                uint16_t *C16 = rand_bf16(sc * batch, 1);
                float *C32 = rand_host(sc * batch, 1);
                const void *Ch = c ? (const void *)C16 : (const void *)C32;
                const size_t cbytes = sc * batch * KDT_SIZE(ct);
                void *cA = bytes_on(&cpu, A, sa * batch * 2), *cB = bytes_on(&cpu, B, sb * batch * 2), *cC = bytes_on(&cpu, Ch, cbytes);
                void *gA = bytes_on(&gpu, A, sa * batch * 2), *gB = bytes_on(&gpu, B, sb * batch * 2), *gC = bytes_on(&gpu, Ch, cbytes);
                gemm_ex(&cpu, ta, tb, M, N, K, 0.7f, cA, lda, sa, cB, ldb, sb, 0.3f, cC, N, sc, batch, KDT_BF16, ct);
                gemm_ex(&gpu, ta, tb, M, N, K, 0.7f, gA, lda, sa, gB, ldb, sb, 0.3f, gC, N, sc, batch, KDT_BF16, ct);
                cudaCheck(cudaDeviceSynchronize());
                void *got = malloc(cbytes);
                kbuf_download(&gpu, got, gC, cbytes);
                size_t bad = 0;
                for (int bi = 0; bi < batch; bi++)
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            double s = 0;
                            for (int k = 0; k < K; k++)
                                s += fabs((double)kbf16_to_f32(ta ? A[bi * sa + (size_t)k * lda + i] : A[bi * sa + (size_t)i * lda + k]) *
                                          kbf16_to_f32(tb ? B[bi * sb + (size_t)j * ldb + k] : B[bi * sb + (size_t)k * ldb + j]));
                            size_t e = bi * sc + (size_t)i * N + j;
                            double want = c ? kbf16_to_f32(((uint16_t *)cC)[e]) : ((float *)cC)[e];
                            double have = c ? kbf16_to_f32(((uint16_t *)got)[e]) : ((float *)got)[e];
                            double bound = 0.7 * s * (K + 2) / 16777216.0 + 1e-6 + (c ? fabs(want) / 128 : 0);
                            if (!(fabs(have - want) <= bound) && bad++ < 3)
                                fprintf(stderr, "  gemm_ex ta=%d tb=%d c=%s [%zu]: gpu %.9g cpu %.9g bound %.3g\n", ta, tb,
                                        c ? "bf16" : "fp32", e, have, want, bound);
                        }
                CHECK(bad == 0);
                if (!bad) printf("ok   gemm_ex bf16 operands ta=%d tb=%d, %s output, batch=%d\n", ta, tb, c ? "bf16" : "fp32", batch);
                free(got); free(A); free(B); free(C16); free(C32);
                kbuf_free(&cpu, cC); kbuf_free(&cpu, cB); kbuf_free(&cpu, cA);
                kbuf_free(&gpu, gC); kbuf_free(&gpu, gB); kbuf_free(&gpu, gA);
            }

    /* the DP kernels on bf16 activations */
    const int Bs = 3, T = 70, IC = 67, OC = 45, Cd = 67;
    const size_t na = (size_t)Bs * T * IC, ng = (size_t)Bs * T * OC, ne = (size_t)Bs * T * Cd;
    uint16_t *a16 = rand_bf16(na, 1), *g16h = rand_bf16(ng, 1), *e16 = rand_bf16(ne, 1), *d16 = rand_bf16(ne, 1);
    float *a = widened(a16, na), *g = widened(g16h, ng), *e = widened(e16, ne), *d = widened(d16, ne);
    float *ga = (float *)bytes_on(&gpu, a16, na * 2), *gg = (float *)bytes_on(&gpu, g16h, ng * 2);
    float *ge = (float *)bytes_on(&gpu, e16, ne * 2), *gd = (float *)bytes_on(&gpu, d16, ne * 2);
    float zero[3] = { 0, 0, 0 }, ref[3], rd[3];
    float *psg = (float *)malloc((size_t)Bs * OC * IC * 4);
    memcpy(ref, zero, sizeof ref);
    dp_linear_norms_direct(ref, psg, a, g, Bs, T, IC, OC, NULL);
    float *gn = on_gpu(zero, Bs), *gpsg = on_gpu(NULL, (size_t)Bs * OC * IC), *gram = on_gpu(NULL, 2 * (size_t)Bs * T * T);
    dp_linear_norms_direct_cuda_dt(gn, gpsg, ga, gg, Bs, T, IC, OC, KDT_BF16, NULL);
    validate_result(gn, ref, "dp bf16 norms direct", Bs, 0, 1e-5f);
    validate_result(gpsg, psg, "dp bf16 per-sample grads", (size_t)Bs * OC * IC, 1e-5f, 1e-5f);
    kbuf_upload(&gpu, gn, zero, sizeof zero);
    dp_linear_norms_ghost_cuda_dt(gn, gram, ga, gg, Bs, T, IC, OC, KDT_BF16, NULL);
    validate_result(gn, ref, "dp bf16 norms ghost", Bs, 0, 1e-5f);
    /* flash with bf16 operands (exact products, fp32 sums: the fp32 tolerance) against the direct
       reference: T = 70 in one block, in blocks of 32 (a short last row) and of 7 */
    {
        const int bR[4] = { 70, 32, 7, 0 };
        for (int r = 0; r < 4; r++)
            check_flash(ga, gg, zero, ref, Bs, T, IC, OC, bR[r] ? bR[r] : kcuda_flash_rows(Bs, T), KDT_BF16, 1e-5f, "dp bf16 norms flash");
    }
    int *tok = rand_tokens((size_t)Bs * T, 7), *gtok = ints_on(&gpu, tok, (size_t)Bs * T);
    {   /* the tied cross term's u = D A on bf16 dlogits and a: the gather is exact, the GEMM's products
           exact in fp32 and its sums over T = 70 fp32, so the fp32 tolerance; D whole and in block
           rows of 32 (a short last one) */
        const int Vt = 11;
        uint16_t *lg16 = rand_bf16((size_t)Bs * T * Vt, 1);
        float *lg = widened(lg16, (size_t)Bs * T * Vt), *tu = (float *)malloc(ne * 4), *tscr = (float *)malloc((size_t)T * T * 4);
        int *ttok = rand_tokens((size_t)Bs * T, Vt), *gttok = ints_on(&gpu, ttok, (size_t)Bs * T);
        dp_tied_cross_u(tu, tscr, ttok, lg, e, Bs, T, Cd, Vt, T, 1, NULL);
        float *glg = (float *)bytes_on(&gpu, lg16, (size_t)Bs * T * Vt * 2), *gtu = on_gpu(NULL, ne);
        const int tR[2] = { T, 32 };
        for (int r = 0; r < 2; r++) {
            float *gscr = on_gpu(NULL, kcuda_tied_cross_floats(Bs, T, tR[r], KDT_BF16));
            cudaCheck(cudaMemset(gtu, 0xFF, ne * 4));
            dp_tied_cross_u_cuda_dt(gtu, gscr, gttok, glg, ge, Bs, T, Cd, Vt, tR[r], KDT_BF16, NULL);
            char nm[48];
            snprintf(nm, sizeof nm, "dp bf16 tied cross u R=%d", tR[r]);
            validate_result(gtu, tu, nm, ne, 1e-5f, 1e-5f);
            kbuf_free(&gpu, gscr);
        }
        free(lg16); free(lg); free(tu); free(tscr); free(ttok);
    }
    memcpy(ref, zero, sizeof ref);
    dp_embedding_norms(ref, tok, e, Bs, T, Cd, NULL);
    kbuf_upload(&gpu, gn, zero, sizeof zero);
    dp_embedding_norms_cuda_dt(gn, gtok, ge, Bs, T, Cd, KDT_BF16, NULL);
    validate_result(gn, ref, "dp bf16 norms embedding", Bs, 0, 1e-6f);
    float *rstd = rand_host((size_t)Bs * T, 1), *rpsg = (float *)malloc((size_t)Bs * Cd * 4);
    memcpy(rd, zero, sizeof rd);
    dp_rmsnorm_norms_direct(rd, rpsg, d, e, rstd, Bs, T, Cd);
    float *grs = on_gpu(rstd, (size_t)Bs * T), *grpsg = on_gpu(NULL, (size_t)Bs * Cd);
    kbuf_upload(&gpu, gn, zero, sizeof zero);
    dp_rmsnorm_norms_direct_cuda_dt(gn, grpsg, gd, ge, grs, Bs, T, Cd, KDT_BF16);
    validate_result(grpsg, rpsg, "dp bf16 rmsnorm per-sample grads", (size_t)Bs * Cd, 1e-6f, 1e-5f);
    validate_result(gn, rd, "dp bf16 norms rmsnorm", Bs, 0, 1e-5f);
    float cf[3] = { 0.25f, 0.0f, 0.5f };   /* a dropped sample too */
    float *gcf = on_gpu(cf, Bs), *w0 = rand_host((size_t)OC * IC, 1), *wr = (float *)malloc((size_t)OC * IC * 4);
    memcpy(wr, w0, (size_t)OC * IC * 4);
    dp_linear_clipped_grad_bk(wr, a, g, cf, Bs, T, IC, OC);
    float *gwr = on_gpu(w0, (size_t)OC * IC);
    dp_linear_clipped_grad_bk_cuda_dt(gwr, ga, gg, gcf, Bs, T, IC, OC, KDT_BF16);
    validate_result(gwr, wr, "dp bf16 book-keeping linear", (size_t)OC * IC, 1e-5f, 1e-5f);
    /* the trainer's entry: the factors from the host, read back once per physical batch; the same bits */
    float *gwh = on_gpu(w0, (size_t)OC * IC);
    dp_linear_clipped_grad_bk_hostc_cuda_dt(gwh, ga, gg, cf, Bs, T, IC, OC, KDT_BF16);
    float *gwr_h = from_gpu(gwr, (size_t)OC * IC);
    validate_result(gwh, gwr_h, "dp bf16 book-keeping linear, host factors (bit for bit)", (size_t)OC * IC, 0, 0);
    free(gwr_h);
    float *t0 = rand_host((size_t)7 * Cd, 1), *tr = (float *)malloc((size_t)7 * Cd * 4);
    memcpy(tr, t0, (size_t)7 * Cd * 4);
    dp_embedding_clipped_grad_bk(tr, tok, e, cf, Bs, T, Cd);
    float *gtr = on_gpu(t0, (size_t)7 * Cd);
    dp_embedding_clipped_grad_bk_cuda_dt(gtr, gtok, ge, gcf, Bs, T, Cd, 7, KDT_BF16);
    validate_result(gtr, tr, "dp bf16 book-keeping embedding", (size_t)7 * Cd, 1e-6f, 1e-6f);
    float nn[3] = { 4.0f, 0.01f, NAN }, sc[3];
    dp_clip_factors_safe(sc, nn, 3, 1.0f, DP_BF16_CLIP_MARGIN);
    float *gnn = on_gpu(nn, 3), *gsc = on_gpu(NULL, 3);
    dp_clip_factors_safe_cuda(gsc, gnn, 3, 1.0f, DP_BF16_CLIP_MARGIN);
    validate_result(gsc, sc, "dp safe clip factors (bit for bit)", 3, 0, 0);
    free(a16); free(g16h); free(e16); free(d16); free(a); free(g); free(e); free(d); free(psg); free(tok); free(rstd);
    free(rpsg); free(w0); free(wr); free(t0); free(tr);
}

/* The same seed gives the same noise as kernels/cpu/noise.c: a tensor that starts mid-block (offset 3)
   and ends mid-block, and privatize's scaling. Counted bit for bit; CUDA's double libm may differ by
   an ulp in rare cases, so up to 1 in 10⁴ values may differ by one float ulp, none by more. */
/* ---- native bf16 ops (kernels.h's _bf16 entries, KOps.bf16_native) ---------------------------------
   The GPU runs every model op on bf16 storage itself; the CPU widens into fp32, runs its fp32 op and
   rounds back. Both compute in fp32 from the same bf16 inputs and round each output once, so an
   element-wise op or a norm may differ only where the two fp32 results straddle a rounding boundary:
   at most 1 bf16 ulp, and rarely (≤ 2 % of the elements here). Attention is cuDNN's fused flash
   attention: its softmax probabilities are rounded to bf16 before P·V (and dP, dS likewise in the
   backward), so it is held to ‖gpu − cpu‖ / ‖cpu‖ ≤ 1e-2 (bf16 operands: 1e-3..1e-2, METHOD.md's
   band) and lse (scores from exact bf16 products, fp32 sums) to 1e-4 relative. */
static uint16_t *bf16_from_gpu(const void *d, size_t n) {
    uint16_t *h = (uint16_t *)malloc(n * 2 + 2);
    cudaCheck(cudaDeviceSynchronize());
    kbuf_download(&gpu, h, d, n * 2);
    return h;
}
/* bf16 values as integers ordered like the reals, so that neighbours differ by 1 */
static long bf16_ordinal(uint16_t h) { return (h & 0x8000u) ? -(long)(h & 0x7fffu) : (long)h; }
static void validate_bf16_ulp(const void *gpu_dev, const uint16_t *cpu_ref, const char *name, size_t n) {
    uint16_t *g = bf16_from_gpu(gpu_dev, n);
    size_t off1 = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        float gf = kbf16_to_f32(g[i]), cf = kbf16_to_f32(cpu_ref[i]);
        long d = labs(bf16_ordinal(g[i]) - bf16_ordinal(cpu_ref[i]));
        if (isnan(gf) || isnan(cf) || d > 1) { if (bad++ < 5) fprintf(stderr, "  %s[%zu]: gpu %.6g cpu %.6g\n", name, i, gf, cf); }
        else if (d == 1) off1++;
    }
    free(g);
    CHECK__COUNT(check_count);
    if (bad || off1 * 50 > n) {
        CHECK__COUNT(check_failures);
        fprintf(stderr, "FAIL %s: %zu of %zu elements more than 1 bf16 ulp off, %zu one ulp off (at most 2 %%)\n", name, bad, n, off1);
    } else printf("ok   %-34s n=%-8zu %zu one bf16 ulp apart, none more\n", name, n, off1);
}
/* ‖gpu − cpu‖ / ‖cpu‖ ≤ rel, every element written and finite */
static void validate_bf16_rel(const void *gpu_dev, const uint16_t *cpu_ref, const char *name, size_t n, double rel) {
    uint16_t *g = bf16_from_gpu(gpu_dev, n);
    double num = 0, den = 0; size_t nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        double gf = kbf16_to_f32(g[i]), cf = kbf16_to_f32(cpu_ref[i]);
        if (!isfinite(gf)) nonfinite++;
        num += (gf - cf) * (gf - cf); den += cf * cf;
    }
    free(g);
    double r = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK__COUNT(check_count);
    if (nonfinite || !(r <= rel)) {
        CHECK__COUNT(check_failures);
        fprintf(stderr, "FAIL %s: relative error %.3g (bound %.1g), %zu non-finite\n", name, r, rel, nonfinite);
    } else printf("ok   %-34s n=%-8zu rel err %.3g (bound %.1g)\n", name, n, r, rel);
}
static void *bf16_on_gpu(const uint16_t *h, size_t n) {
    void *p = kbuf_alloc(&gpu, n * 2, "test/bf16");
    if (h) kbuf_upload(&gpu, p, h, n * 2);
    else cudaCheck(cudaMemset(p, 0xFF, n * 2));   /* poison: 0xFFFF is a NaN */
    return p;
}
static uint16_t *bf16_on_cpu(const uint16_t *h, size_t n) {
    uint16_t *p = (uint16_t *)kbuf_alloc(&cpu, n * 2, "test/bf16");
    if (h) memcpy(p, h, n * 2);
    else memset(p, 0xFF, n * 2);
    return p;
}

static void test_bf16_ops(void) {
    CHECK(kops_cuda.bf16_native == 1 && kops_cuda_target.bf16_native == 1 && !kops_cpu.bf16_native);
    const int B = 2, T = 37, N = B * T, C = 96, V = 53, F = 160, NH = 4, HS = 24;
    int *tok = rand_tokens(N, V);
    tok[5] = tok[30] = tok[2];
    int *ct = ints_on(&cpu, tok, N), *gt = ints_on(&gpu, tok, N);
    float *wte = rand_host((size_t)V * C, 1);
    float *cw = on_cpu(wte, (size_t)V * C), *gw = on_gpu(wte, (size_t)V * C);
    /* embedding */
    uint16_t *co = bf16_on_cpu(NULL, (size_t)N * C); void *go = bf16_on_gpu(NULL, (size_t)N * C);
    embedding_forward_ex(&cpu, KDT_BF16, (float *)co, ct, cw, N, C); embedding_forward_ex(&gpu, KDT_BF16, (float *)go, gt, gw, N, C);
    validate_bf16_ulp(go, co, "bf16 embedding_forward", (size_t)N * C);
    uint16_t *dout = rand_bf16((size_t)N * C, 1);
    uint16_t *cdo = bf16_on_cpu(dout, (size_t)N * C); void *gdo = bf16_on_gpu(dout, (size_t)N * C);
    float *cdw = on_cpu(wte, (size_t)V * C), *gdw = on_gpu(wte, (size_t)V * C);
    embedding_backward_ex(&cpu, KDT_BF16, cdw, ct, (float *)cdo, N, C, V); embedding_backward_ex(&gpu, KDT_BF16, gdw, gt, (float *)gdo, N, C, V);
    validate_result(gdw, cdw, "bf16 embedding_backward dW", (size_t)V * C, 0, 0);   /* same additions, same order */
    /* RMSNorm */
    uint16_t *x = rand_bf16((size_t)N * C, 2);
    float *w = rand_host(C, 1), *dw0 = rand_host(C, 1);
    uint16_t *cx = bf16_on_cpu(x, (size_t)N * C); void *gx = bf16_on_gpu(x, (size_t)N * C);
    float *cwn = on_cpu(w, C), *gwn = on_gpu(w, C), *cr = on_cpu(NULL, N), *gr = on_gpu(NULL, N);
    rmsnorm_forward_ex(&cpu, KDT_BF16, (float *)co, cr, (float *)cx, cwn, N, C, 1e-5f);
    rmsnorm_forward_ex(&gpu, KDT_BF16, (float *)go, gr, (float *)gx, gwn, N, C, 1e-5f);
    validate_bf16_ulp(go, co, "bf16 rmsnorm_forward out", (size_t)N * C);
    validate_result(gr, cr, "bf16 rmsnorm_forward rstd", N, 0, 1e-6f);
    uint16_t *dx0 = rand_bf16((size_t)N * C, 1);
    uint16_t *cdx = bf16_on_cpu(dx0, (size_t)N * C); void *gdx = bf16_on_gpu(dx0, (size_t)N * C);
    float *cdwn = on_cpu(dw0, C), *gdwn = on_gpu(dw0, C);
    rmsnorm_backward_ex(&cpu, KDT_BF16, (float *)cdx, cdwn, (float *)cdo, (float *)cx, cwn, cr, N, C);
    rmsnorm_backward_ex(&gpu, KDT_BF16, (float *)gdx, gdwn, (float *)gdo, (float *)gx, gwn, gr, N, C);
    validate_bf16_ulp(gdx, cdx, "bf16 rmsnorm_backward dinp", (size_t)N * C);
    validate_result(gdwn, cdwn, "bf16 rmsnorm_backward dw", C, 1e-5f, 1e-5f);   /* as fp32: 74-term float sums regrouped */
    /* RoPE (in place, llama3 scaling) */
    KRope r = { 500000.0f, 32.0f, 1.0f, 4.0f, 8192.0f };
    const size_t nq = (size_t)N * NH * HS;
    uint16_t *q = rand_bf16(nq, 1);
    uint16_t *cq = bf16_on_cpu(q, nq); void *gq = bf16_on_gpu(q, nq);
    rope_forward_ex(&cpu, KDT_BF16, (float *)cq, B, T, NH, HS, r); rope_forward_ex(&gpu, KDT_BF16, (float *)gq, B, T, NH, HS, r);
    validate_bf16_ulp(gq, cq, "bf16 rope_forward", nq);
    rope_backward_ex(&cpu, KDT_BF16, (float *)cq, B, T, NH, HS, r); rope_backward_ex(&gpu, KDT_BF16, (float *)gq, B, T, NH, HS, r);
    validate_bf16_ulp(gq, cq, "bf16 rope_backward", nq);
    /* SwiGLU, the backward in place on up (dup aliases up, as the model may) */
    const size_t nf = (size_t)N * F;
    uint16_t *ga = rand_bf16(nf, 4), *up = rand_bf16(nf, 2), *dh = rand_bf16(nf, 1);
    uint16_t *cg = bf16_on_cpu(ga, nf), *cu = bf16_on_cpu(up, nf), *cdh = bf16_on_cpu(dh, nf), *ch = bf16_on_cpu(NULL, nf);
    void *gg = bf16_on_gpu(ga, nf), *gu = bf16_on_gpu(up, nf), *gdh = bf16_on_gpu(dh, nf), *gh = bf16_on_gpu(NULL, nf);
    swiglu_forward_ex(&cpu, KDT_BF16, (float *)ch, (float *)cg, (float *)cu, nf);
    swiglu_forward_ex(&gpu, KDT_BF16, (float *)gh, (float *)gg, (float *)gu, nf);
    validate_bf16_ulp(gh, ch, "bf16 swiglu_forward", nf);
    uint16_t *cdg = bf16_on_cpu(NULL, nf); void *gdg = bf16_on_gpu(NULL, nf);
    swiglu_backward_ex(&cpu, KDT_BF16, (float *)cdg, (float *)cu, (float *)cdh, (float *)cg, (float *)cu, nf);
    swiglu_backward_ex(&gpu, KDT_BF16, (float *)gdg, (float *)gu, (float *)gdh, (float *)gg, (float *)gu, nf);
    validate_bf16_ulp(gdg, cdg, "bf16 swiglu_backward dgate", nf);
    validate_bf16_ulp(gu, cu, "bf16 swiglu_backward dup (in place)", nf);
    free(tok); free(wte); free(dout); free(x); free(w); free(dw0); free(dx0); free(q); free(ga); free(up); free(dh);
    kbackend_free_all(&cpu);
}

/* cuDNN's fused attention (bf16) against the CPU's fp32 attention on the same bf16 values. */
static void test_attention_cudnn(int B, int T, int NH, int NKV, int HS) {
    const size_t nq = (size_t)B * T * NH * HS, nk = (size_t)B * T * NKV * HS, nl = (size_t)B * NH * T;
    uint16_t *q = rand_bf16(nq, 1), *k = rand_bf16(nk, 1), *v = rand_bf16(nk, 1), *dout = rand_bf16(nq, 1);
    uint16_t *cq = bf16_on_cpu(q, nq), *ck = bf16_on_cpu(k, nk), *cv = bf16_on_cpu(v, nk), *cdo = bf16_on_cpu(dout, nq);
    void *gq = bf16_on_gpu(q, nq), *gk = bf16_on_gpu(k, nk), *gv = bf16_on_gpu(v, nk), *gdo = bf16_on_gpu(dout, nq);
    uint16_t *co = bf16_on_cpu(NULL, nq); void *go = bf16_on_gpu(NULL, nq);
    float *cl = on_cpu(NULL, nl), *gl = on_gpu(NULL, nl);
    char name[96];
    CHECK(attention_forward_ex(&cpu, KDT_BF16, (float *)co, cl, (float *)cq, (float *)ck, (float *)cv, B, T, NH, NKV, HS) == 0);
    CHECK(attention_forward_ex(&gpu, KDT_BF16, (float *)go, gl, (float *)gq, (float *)gk, (float *)gv, B, T, NH, NKV, HS) == 0);
    snprintf(name, sizeof name, "cudnn attention fwd T=%d NH=%d/%d HS=%d out", T, NH, NKV, HS);
    validate_bf16_rel(go, co, name, nq, 1e-2);
    snprintf(name, sizeof name, "cudnn attention fwd T=%d HS=%d lse", T, HS);
    validate_result(gl, cl, name, nl, 1e-5f, 1e-4f);
    uint16_t *cdq = bf16_on_cpu(NULL, nq), *cdk = bf16_on_cpu(NULL, nk), *cdv = bf16_on_cpu(NULL, nk);
    void *gdq = bf16_on_gpu(NULL, nq), *gdk = bf16_on_gpu(NULL, nk), *gdv = bf16_on_gpu(NULL, nk);
    /* both backwards read their own side's forward output and lse, as in training */
    CHECK(attention_backward_ex(&cpu, KDT_BF16, (float *)cdq, (float *)cdk, (float *)cdv, (float *)cdo, (float *)cq, (float *)ck,
                                (float *)cv, (float *)co, cl, B, T, NH, NKV, HS) == 0);
    CHECK(attention_backward_ex(&gpu, KDT_BF16, (float *)gdq, (float *)gdk, (float *)gdv, (float *)gdo, (float *)gq, (float *)gk,
                                (float *)gv, (float *)go, gl, B, T, NH, NKV, HS) == 0);
    snprintf(name, sizeof name, "cudnn attention bwd T=%d HS=%d dq", T, HS); validate_bf16_rel(gdq, cdq, name, nq, 2e-2);
    snprintf(name, sizeof name, "cudnn attention bwd T=%d HS=%d dk", T, HS); validate_bf16_rel(gdk, cdk, name, nk, 2e-2);
    snprintf(name, sizeof name, "cudnn attention bwd T=%d HS=%d dv", T, HS); validate_bf16_rel(gdv, cdv, name, nk, 2e-2);
    printf("     cuDNN %zu: workspace asked forward %zu B, backward %zu B; planned %zu / %zu B\n", kcuda_cudnn_version(),
           kcuda_attention_cudnn_asked(0), kcuda_attention_cudnn_asked(1),
           kcuda_attention_cudnn_workspace(B, T, NH, NKV, HS, 0), kcuda_attention_cudnn_workspace(B, T, NH, NKV, HS, 1));
    free(q); free(k); free(v); free(dout);
    kbackend_free_all(&cpu);
}

/* The DP noise's transform on extreme words, on the device (CUDA's log, sqrt, sin, cos): u = 2⁻⁶⁵
   gives NOISE_DP_Z_MAX, u ≈ 2⁻³² the old 6.66 cut, u ≈ 2⁻⁴⁴ at θ = π/2 its sine lane. */
__global__ void dp_tail_kernel(double *out) {
    noise_dp_box_muller(0, 0, 0, &out[0], &out[1]);
    noise_dp_box_muller(0, 0xFFFFFFFFu, 0, &out[2], &out[3]);
    noise_dp_box_muller(0, 1u << 20, 0x40000000u, &out[4], &out[5]);
}

static void test_noise(void) {
    {
        double *dz, gz[6], cz[6];
        cudaCheck(cudaMalloc(&dz, sizeof gz));
        dp_tail_kernel<<<1, 1>>>(dz);
        cudaCheck(cudaGetLastError());
        cudaCheck(cudaMemcpy(gz, dz, sizeof gz, cudaMemcpyDeviceToHost));
        cudaCheck(cudaFree(dz));
        noise_dp_box_muller(0, 0, 0, &cz[0], &cz[1]);
        noise_dp_box_muller(0, 0xFFFFFFFFu, 0, &cz[2], &cz[3]);
        noise_dp_box_muller(0, 1u << 20, 0x40000000u, &cz[4], &cz[5]);
        double worst = 0;
        for (int i = 0; i < 6; i++) worst = fmax(worst, fabs(gz[i] - cz[i]));
        printf("ok?  noise tails on the device: |z| max %.15g (bound %.15g), u ~ 2^-32: %.12g, u ~ 2^-44: %.12g; "
               "largest |gpu - cpu| %.3g\n", gz[0], NOISE_DP_Z_MAX, gz[2], gz[5], worst);
        CHECK(fabs(gz[0] - NOISE_DP_Z_MAX) < 1e-12 && gz[0] <= NOISE_DP_Z_MAX + 1e-12 && gz[5] > 7.8 && worst < 1e-12);
    }
    const size_t n = 100001;
    const uint64_t seed = 0x1234567890abcdefull, step = 42, offset = 3;
    float *h = (float *)calloc(n, sizeof(float));
    noise_add_gaussian(h, n, 0.75, seed, step, offset);
    float *d = on_gpu(NULL, n);
    fill_buffer(&gpu, d, 0, n);
    noise_add_gaussian_cuda(d, n, 0.75, seed, step, offset);
    float *g = from_gpu(d, n);
    size_t exact = 0, one_ulp = 0, worse = 0;
    for (size_t i = 0; i < n; i++) {
        if (g[i] == h[i]) exact++;
        else if (fabsf(g[i] - h[i]) <= fabsf(nextafterf(h[i], INFINITY) - h[i])) one_ulp++;
        else if (worse++ < 3) fprintf(stderr, "  noise[%zu]: gpu %.9g cpu %.9g\n", i, g[i], h[i]);
    }
    printf("ok?  noise: %zu of %zu bit-identical, %zu one ulp apart, %zu worse\n", exact, n, one_ulp, worse);
    CHECK(worse == 0);
    CHECK(one_ulp * 10000 <= n);
    /* privatize: (g + σ C z) / B */
    float *x = rand_host(n, 1), *hx = (float *)malloc(n * 4);
    memcpy(hx, x, n * 4);
    noise_privatize(hx, n, 1.1, 0.5, 8.0, seed, step + 1, 12345);
    kbuf_upload(&gpu, d, x, n * 4);
    noise_privatize_cuda(d, n, 1.1, 0.5, 8.0, seed, step + 1, 12345);
    validate_result(d, hx, "noise_privatize", n, 1e-7f, 2e-7f);
    free(h); free(g); free(x); free(hx);
}

/* The DP step's fused noise + AdamW (dp_update.cu) against the GPU's separate path (noise_privatize_cuda,
   then adamw_update): p, m, v and the kept noised g bit for bit; σ = 0 and σ > 0, a tensor that starts
   and ends inside a Philox block. Against the CPU's fused twin (dp_update.c) with the tolerances of the
   noise (an ulp in rare ties) and of AdamW above. */
static void test_noisy_adamw(void) {
    const size_t n = 70001;
    const uint64_t offset = 1000003;
    float *p = rand_host(n, 1), *g = rand_host(n, 4), *m = rand_host(n, 0.1f), *v = rand_host(n, 0.01f);
    for (size_t i = 0; i < n; i++) v[i] = v[i] * v[i];
    for (int sg = 0; sg < 2; sg++) {
        const DpNoise nz = { sg ? 1.1 : 0.0, 0.75, 6.0, 0xC0FFEEull, 41 };
        const DpAdamW opt = { 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4 };
        float *sp = on_gpu(p, n), *sg_ = on_gpu(g, n), *sm = on_gpu(m, n), *sv = on_gpu(v, n);   /* separate */
        float *fp = on_gpu(p, n), *fg = on_gpu(g, n), *fm = on_gpu(m, n), *fv = on_gpu(v, n);   /* fused */
        noise_privatize_cuda(sg_, n, nz.sigma, nz.max_grad_norm, nz.logical_batch, nz.seed, nz.step, offset);
        adamw_update(&gpu, sp, sg_, sm, sv, n, opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.t);
        dp_noisy_adamw_cuda(fp, fg, fm, fv, n, offset, &nz, &opt, 1);
        float *h[4] = { from_gpu(sp, n), from_gpu(sg_, n), from_gpu(sm, n), from_gpu(sv, n) };
        validate_result(fp, h[0], sg ? "fused noise+adamw p (bit for bit)" : "fused adamw, sigma 0, p (bit for bit)", n, 0, 0);
        validate_result(fg, h[1], "fused noise+adamw noised g (bit for bit)", n, 0, 0);
        validate_result(fm, h[2], "fused noise+adamw m (bit for bit)", n, 0, 0);
        validate_result(fv, h[3], "fused noise+adamw v (bit for bit)", n, 0, 0);
        /* the CPU's fused twin */
        float *cp = (float *)malloc(4 * n * sizeof *cp), *cg = cp + n, *cm = cg + n, *cv = cm + n;
        memcpy(cp, p, n * 4); memcpy(cg, g, n * 4); memcpy(cm, m, n * 4); memcpy(cv, v, n * 4);
        dp_noisy_adamw(cp, cg, cm, cv, n, offset, &nz, &opt, 1, 2);
        validate_result(fp, cp, "fused noise+adamw p vs the CPU", n, 1e-7f, 1e-6f);
        validate_result(fm, cm, "fused noise+adamw m vs the CPU", n, 1e-9f, 1e-6f);
        validate_result(fv, cv, "fused noise+adamw v vs the CPU", n, 1e-12f, 1e-5f);
        for (int k = 0; k < 4; k++) free(h[k]);
        free(cp);
        float *bufs[8] = { sp, sg_, sm, sv, fp, fg, fm, fv };
        for (int k = 0; k < 8; k++) kbuf_free(&gpu, bufs[k]);
    }
    free(p); free(g); free(m); free(v);
}

/* The secure noise (--secure-noise, secure_noise.cu, built with -fmad=false) against the CPU's
   (kernels/cpu/secure_noise.c): the privatized values bit for bit, at an offset inside a ChaCha20 block
   and a length that ends inside one, σ > 0 and σ = 0; both use noise.h's polynomial ln, sin and cos and
   round every product on its own, so nothing may differ (unlike the Philox stream's CUDA libm). The fused
   update with it against the GPU's separate path (secure privatize, then adamw_update) bit for bit, and
   against the CPU's privatize + AdamW with the AdamW tolerances of test_noisy_adamw. */
static void test_secure_noise(void) {
    const size_t n = 100001;
    const uint64_t offset = 1000003, step = 17;
    SecureKey key;
    for (int i = 0; i < 8; i++) key.k[i] = 0x9E3779B9u * (uint32_t)(i + 1);
    for (int sg = 0; sg < 2; sg++) {
        const double sigma = sg ? 1.1 : 0.0;
        float *x = rand_host(n, 3), *hx = (float *)malloc(n * 4);
        memcpy(hx, x, n * 4);
        secure_noise_privatize(hx, n, sigma, 0.5, 8.0, &key, step, offset);
        float *d = on_gpu(x, n);
        secure_noise_privatize_cuda(d, n, sigma, 0.5, 8.0, key.k, step, offset);
        validate_result(d, hx, sg ? "secure noise privatize, CPU = GPU bit for bit" : "secure privatize, sigma 0 (bit for bit)", n, 0, 0);
        kbuf_free(&gpu, d);
        free(x); free(hx);
    }
    float *p = rand_host(n, 1), *g = rand_host(n, 4), *m = rand_host(n, 0.1f), *v = rand_host(n, 0.01f);
    for (size_t i = 0; i < n; i++) v[i] = v[i] * v[i];
    const DpNoise nz = { 1.1, 0.75, 6.0, 0, step };
    const DpAdamW opt = { 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4 };
    float *sp = on_gpu(p, n), *sg_ = on_gpu(g, n), *sm = on_gpu(m, n), *sv = on_gpu(v, n);   /* separate */
    float *fp = on_gpu(p, n), *fg = on_gpu(g, n), *fm = on_gpu(m, n), *fv = on_gpu(v, n);   /* fused */
    secure_noise_privatize_cuda(sg_, n, nz.sigma, nz.max_grad_norm, nz.logical_batch, key.k, step, offset);
    adamw_update(&gpu, sp, sg_, sm, sv, n, opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.t);
    secure_noisy_adamw_cuda(fp, fg, fm, fv, n, offset, &nz, key.k, &opt);
    float *h[3] = { from_gpu(sp, n), from_gpu(sm, n), from_gpu(sv, n) };
    validate_result(fp, h[0], "fused secure noise+adamw p (bit for bit)", n, 0, 0);
    validate_result(fm, h[1], "fused secure noise+adamw m (bit for bit)", n, 0, 0);
    validate_result(fv, h[2], "fused secure noise+adamw v (bit for bit)", n, 0, 0);
    float *cp = (float *)malloc(4 * n * sizeof *cp), *cg = cp + n, *cm = cg + n, *cv = cm + n;
    memcpy(cp, p, n * 4); memcpy(cg, g, n * 4); memcpy(cm, m, n * 4); memcpy(cv, v, n * 4);
    secure_noise_privatize(cg, n, nz.sigma, nz.max_grad_norm, nz.logical_batch, &key, step, offset);
    adamw_update(&cpu, cp, cg, cm, cv, n, opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.t);
    validate_result(fp, cp, "fused secure noise+adamw p vs the CPU", n, 1e-7f, 1e-6f);
    validate_result(fm, cm, "fused secure noise+adamw m vs the CPU", n, 1e-9f, 1e-6f);
    validate_result(fv, cv, "fused secure noise+adamw v vs the CPU", n, 1e-12f, 1e-5f);
    for (int k = 0; k < 3; k++) free(h[k]);
    free(cp);
    float *bufs[8] = { sp, sg_, sm, sv, fp, fg, fm, fv };
    for (int k = 0; k < 8; k++) kbuf_free(&gpu, bufs[k]);
    free(p); free(g); free(m); free(v);
}

/* Weights drawn on the GPU (init_normal, kernels/cuda/init.cu) against the CPU's (kernels/cpu/init.c)
   for tensors of a few sizes, streams and std: a CPU run and a GPU run start from the same weights.
   Tolerance, as test_noise's and for the same reason: both twins compute z by noise.h's noise_normal4,
   but the GPU's double log/sin/cos are CUDA's and the CPU's are noise.h's own, each within an ulp of
   the true value; a one-ulp difference in a double changes (float)(std · z) only when std · z falls
   within an ulp of a float rounding boundary. So no value may differ by more than one float ulp and
   at most 1 in 10⁴ by one (none expected: noise.h measured 0 of 10⁸ against glibc). */
static void test_init(void) {
    static const struct { size_t n; double std; uint64_t seed, stream; } cases[] = {
        { 1, 0.02, 1234, 0x494E495400000001ull },        /* one value: a partial Philox block */
        { 7, 0.02, 1234, 0x494E4954a5a5a5a5ull },
        { 16384 + 5, 0.02, 99, 0x494E4954deadbeefull },   /* a CPU chunk and a partial one */
        { 2048 * 2048 + 3, 0.02, 0x1234567890abcdefull, 0x494E495412345678ull },   /* a 1B layer's q_proj, odd */
        { 100001, 1.0, 7, 42 },                           /* std 1: z itself */
    };
    size_t total = 0, exact_all = 0, one_all = 0, worse_all = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const size_t n = cases[c].n;
        float *h = (float *)malloc(n * sizeof(float));
        init_normal(&cpu, h, n, cases[c].std, cases[c].seed, cases[c].stream);
        float *d = on_gpu(NULL, n);
        fill_buffer(&gpu, d, NAN, n);   /* every value must be written */
        init_normal(&gpu, d, n, cases[c].std, cases[c].seed, cases[c].stream);
        float *g = from_gpu(d, n);
        size_t exact = 0, one_ulp = 0, worse = 0;
        for (size_t i = 0; i < n; i++) {
            if (memcmp(&g[i], &h[i], sizeof h[i]) == 0) exact++;
            else if (fabsf(g[i] - h[i]) <= fabsf(nextafterf(h[i], INFINITY) - h[i])) one_ulp++;
            else if (worse++ < 3) fprintf(stderr, "  init[%zu] of %zu: gpu %.9g cpu %.9g\n", i, n, g[i], h[i]);
        }
        CHECK(worse == 0);
        CHECK(one_ulp * 10000 <= n);
        total += n; exact_all += exact; one_all += one_ulp; worse_all += worse;
        free(h); free(g);
    }
    printf("ok?  init_normal: %zu of %zu bit-identical, %zu one ulp apart, %zu worse\n", exact_all, total, one_all, worse_all);
}

/* A plan run for CUDA and a real CUDA run of the same ops allocate the same tags and bytes in the
   same order (--plan-for cuda predicts a CUDA run exactly). */
typedef struct { char tag[48]; size_t bytes; } Ev;
typedef struct { Ev ev[64]; int n; } Trace;
static void record(void *user, const char *tag, size_t bytes, int is_alloc) {
    Trace *t = (Trace *)user;
    if (t->n == 64) return;
    snprintf(t->ev[t->n].tag, sizeof t->ev[t->n].tag, "%s%s", is_alloc ? "+" : "-", tag);
    t->ev[t->n++].bytes = bytes;
}
static void op_sequence(KBackend *b) {
    const int B = 2, T = 17, NH = 4, NKV = 2, HS = 24, C = 67, V = 101, N = B * T;
    float *x = (float *)kbuf_alloc(b, (size_t)N * V * 4, "activations/x");
    float *y = (float *)kbuf_alloc(b, (size_t)N * V * 4, "activations/y");
    int *t = (int *)kbuf_alloc(b, (size_t)N * 4, "activations/tokens");
    double s;
    if (kbackend_computes(b)) { fill_buffer(b, x, 0.01f, (size_t)N * V); fill_buffer(b, y, 0.02f, (size_t)N * V); }
    reduce_sumsq(b, x, (size_t)N * V, &s);
    rmsnorm_backward(b, x, y, x, y, y, y, N, C);
    attention_forward(b, x, y, x, x, x, B, T, NH, NKV, HS);
    attention_backward(b, y, y, y, x, x, x, x, x, x, B, T, NH, NKV, HS);
    /* bf16 (cuDNN, with its workspace): q = k = v = dout = out = x's first half as bf16 zeros, lse in
       x's second half, the outputs side by side in y */
    const size_t nq = (size_t)N * NH * HS, nk = (size_t)N * NKV * HS;
    float *lse = x + (size_t)N * V / 2;
    if (kbackend_computes(b)) zero_ex(b, KDT_BF16, x, nq);
    attention_forward_ex(b, KDT_BF16, y, lse, x, x, x, B, T, NH, NKV, HS);
    attention_backward_ex(b, KDT_BF16, y, kact_at(y, nq, KDT_BF16), kact_at(y, nq + nk, KDT_BF16), x, x, x, x, x, lse,
                          B, T, NH, NKV, HS);
    crossentropy_forward(b, y, x, t, N, V);
    crossentropy_backward(b, x, t, 1.0f, NULL, B, T, V);
    embedding_backward(b, x, t, y, N, C, V);
    kbuf_free(b, t); kbuf_free(b, y); kbuf_free(b, x);
}
static void test_plan_matches_run(void) {
    KBackend plan;
    Trace tp = { {}, 0 }, tr = { {}, 0 };
    CHECK(kbackend_cuda_plan_init(&plan) == 0);
    plan.trace = record; plan.trace_user = &tp;
    gpu.trace = record; gpu.trace_user = &tr;
    op_sequence(&plan);
    op_sequence(&gpu);
    gpu.trace = NULL;
    kcuda_sync_check("plan vs run sequence");
    CHECK(tp.n == tr.n && tp.n > 6);
    int same = tp.n == tr.n;
    for (int i = 0; same && i < tp.n; i++)
        if (strcmp(tp.ev[i].tag, tr.ev[i].tag) || tp.ev[i].bytes != tr.ev[i].bytes) {
            same = 0;
            fprintf(stderr, "  event %d: plan %s %zu, run %s %zu\n", i, tp.ev[i].tag, tp.ev[i].bytes, tr.ev[i].tag, tr.ev[i].bytes);
        }
    CHECK(same);
    CHECK_EQ_U(plan.peak, gpu.peak);   /* run first: the GPU backend held only its workspace before */
    if (same) printf("ok   plan for cuda == cuda run: %d allocation events\n", tp.n);
    kbackend_destroy(&plan);
}

/* Checks that need no device: every entry of the table is set, and the real table and the plan
   target agree on name, memory space and scratch sizes. */
static void test_table(void) {
    const char *names[] = { "alloc", "free", "meminfo", "upload", "download", "scratch_bytes", "gemm", "fill", "copy", "add",
        "scale", "sum", "sumsq", "count_nonfinite", "embedding_forward", "embedding_backward", "rmsnorm_forward",
        "rmsnorm_backward", "rope_forward", "rope_backward", "attention_forward", "attention_backward",
        "swiglu_forward", "swiglu_backward", "crossentropy_forward", "crossentropy_backward", "adamw", "sgd",
        "gemm_ex", "widen", "narrow", "narrow_inplace", "copy_bytes", "zero_bytes", "init_normal" };
    const char *first = (const char *)&kops_cuda.alloc, *end = (const char *)(&kops_cuda.init_normal + 1);
    size_t n = (size_t)(end - first) / sizeof(void (*)(void));
    CHECK_EQ_U(n, sizeof names / sizeof *names);   /* KOps grew: add the new entry here and to kops_cuda */
    for (size_t i = 0; i < n; i++) {
        void (*fp)(void);
        memcpy(&fp, first + i * sizeof fp, sizeof fp);
        if (!fp) fprintf(stderr, "kops_cuda.%s is NULL\n", i < sizeof names / sizeof *names ? names[i] : "?");
        CHECK(fp != NULL);
    }
    CHECK(strcmp(kops_cuda.name, kops_cuda_target.name) == 0);
    CHECK(kops_cuda.space == kops_cuda_target.space && kops_cuda.space == DPMEM_DEVICE);
    CHECK(kops_cuda.scratch_bytes == kops_cuda_target.scratch_bytes);
    CHECK(kops_cuda.bf16_native == kops_cuda_target.bf16_native);
    if (kops_cuda.bf16_native) {   /* every native bf16 entry is set */
        const void *e[] = { (const void *)kops_cuda.embedding_forward_bf16, (const void *)kops_cuda.embedding_backward_bf16,
            (const void *)kops_cuda.rmsnorm_forward_bf16, (const void *)kops_cuda.rmsnorm_backward_bf16,
            (const void *)kops_cuda.rope_forward_bf16, (const void *)kops_cuda.rope_backward_bf16,
            (const void *)kops_cuda.attention_forward_bf16, (const void *)kops_cuda.attention_backward_bf16,
            (const void *)kops_cuda.swiglu_forward_bf16, (const void *)kops_cuda.swiglu_backward_bf16 };
        for (size_t i = 0; i < sizeof e / sizeof *e; i++) CHECK(e[i] != NULL);
    }
}

/* Groups to run: all without arguments, else those named (e.g. `test_cuda_kernels attention dp`),
   for debugging one kernel or a faster compute-sanitizer run. */
static int want(int argc, char **argv, const char *group) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], group)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    static const char *const groups[] = { "plan", "gemm", "elementwise", "norms", "rope", "attention", "dp", "noise", "secure", "init",
                                         "bf16", "bf16ops", "cudnn" };
    for (int i = 1; i < argc; i++) {
        int ok = 0;
        for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) ok |= !strcmp(argv[i], groups[g]);
        if (!ok) {
            fprintf(stderr, "test_cuda_kernels: unknown group '%s' (plan gemm elementwise norms rope attention dp noise secure init bf16 bf16ops cudnn)\n", argv[i]);
            return 2;
        }
    }
    test_table();
    if (check_failures) return check_exit("test_cuda_kernels");
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev == 0) {
        char why[160];
        printf("SKIP: no CUDA device: %s: the CUDA ops, DP kernels, noise and weight initialisation were not checked against the CPU\n",
               kcuda_no_device_reason(err, why, sizeof why));
        return 77;
    }
    kbackend_cpu_init(&cpu, 2);
    if (kbackend_cuda_init(&gpu, -1) != 0) { fprintf(stderr, "kbackend_cuda_init: %s\n", kbackend_error(&gpu)); return 1; }
    kcuda_set_tf32(0);
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    if (want(argc, argv, "plan")) test_plan_matches_run();   /* first: the backend holds only its workspace */
    if (want(argc, argv, "gemm")) test_gemm();
    if (want(argc, argv, "elementwise")) test_elementwise();
    if (want(argc, argv, "norms")) test_embedding_rmsnorm_ce();
    if (want(argc, argv, "rope")) test_rope();
    if (want(argc, argv, "attention")) {
        test_attention(2, 17, 4, 2, 24);    /* one key tile, GQA */
        test_attention(2, 70, 4, 2, 40);    /* three tiles with a partial one, DM = 2 */
        test_attention(1, 45, 2, 1, 128);   /* the 3B head size, DM = 4, group of 2 */
        test_attention(1, 33, 3, 3, 64);    /* MHA, the 1B head size */
        test_attention(2, 37, 4, 2, 18);    /* HS % 4 != 0: the scalar dot-product path */
        test_attention(1, 40, 2, 2, 44);    /* HS % 8 == 4: the pad of 8 */
    }
    if (want(argc, argv, "dp")) test_dp();
    if (want(argc, argv, "noise")) { test_noise(); test_noisy_adamw(); }
    if (want(argc, argv, "secure")) test_secure_noise();
    if (want(argc, argv, "init")) test_init();
    if (want(argc, argv, "bf16")) test_bf16();
    if (want(argc, argv, "bf16ops")) test_bf16_ops();
    if (want(argc, argv, "cudnn")) {
        test_attention_cudnn(2, 70, 4, 2, 64);     /* GQA, a partial tile */
        test_attention_cudnn(1, 45, 2, 1, 128);    /* the 3B head size */
        test_attention_cudnn(1, 256, 32, 8, 64);   /* the 1B heads */
    }
    kbackend_free_all(&gpu);
    kcuda_sync_check("end of test");
    kbackend_destroy(&gpu);
    kbackend_destroy(&cpu);
    return check_exit("test_cuda_kernels");
}
