/* bench_cuda_kernels.cu — time of the CUDA backend's kernels at LLaMA-1B layer shapes, each beside a
   baseline measured in the same run: the cuBLAS GEMM of the same layer (what a step must pay anyway).
   Rows: attention forward/backward, fp32 (attention.cu) and bf16 (cuDNN, TFLOP/s and % of the dense
   bf16 peak), T = 4096 and 16384, vs the q-projection GEMM; native bf16 element-wise ops as GB/s;
   per-sample norms (direct, ghost, flash) and book-keeping vs the layer's weight-gradient GEMM; flash
   on bf16 activations at 1B shapes (2048x2048 and 2048x8192, T = 4096) and the tied lm_head's cross
   term vs the same layer's bf16 weight-gradient GEMM; book-keeping at physical batch 1 (the 1b
   preset's layer shapes: per-sample gradient, its sum of squares, the clipped sums, the bk GEMM, and
   their sum over the model against its weight-gradient GEMMs; RMSNorm's per-sample gradients, the
   embedding's clipped scatter); RMSNorm, cross-entropy,
   AdamW and noise as effective GB/s. Median of 5 timed runs after one warm-up, CUDA events.
   Without a GPU it prints one SKIP line and exits 0 (make bench must not fail on a laptop).
   Not here: correctness (tests/test_cuda_kernels.cu), whole training steps (the trainers' logs). */
#include "kernels_cuda.h"
extern "C" {
#include "llama/mfu.h"   /* the trainers' table of dense peaks by device name (samples/llama/mfu.c) */
}
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define cudaCheck(e) do { cudaError_t e_ = (e); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: CUDA error %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

static KBackend gpu;

static float *buf(size_t n, const char *tag) {
    float *p = (float *)kbuf_alloc(&gpu, n * sizeof(float), tag);
    if (!p) { fprintf(stderr, "bench: %s\n", kbackend_error(&gpu)); exit(1); }
    return p;
}

/* Frees every buffer, the workspace and the cuBLAS handle, then makes a new backend (checked: a failed
   init would leave gpu without a workspace and every later row would time an uninitialized backend). */
static void fresh_backend(void) {
    kbackend_destroy(&gpu);
    if (kbackend_cuda_init(&gpu, -1) != 0) { fprintf(stderr, "bench: %s\n", kbackend_error(&gpu)); exit(1); }
}

/* dW [M, N] = gᵀ a with bf16 operands and an fp32 output (the bf16 step's weight gradient), checked. */
static void wgrad_bf16(float *dw, const float *g, const float *a, int M, int N, int K) {
    if (gemm_ex(&gpu, 1, 0, M, N, K, 1.0f, g, M, 0, a, N, 0, 0.0f, dw, N, 0, 1, KDT_BF16, KDT_F32)) {
        fprintf(stderr, "bench: %s\n", kbackend_error(&gpu));
        exit(1);
    }
}

/* T token ids spread over [0, V) (Knuth's multiplicative hash of the position), on the GPU. */
static int *tokens_on_gpu(int T, int V) {
    int *tok = (int *)kbuf_alloc(&gpu, (size_t)T * sizeof(int), "bench/tokens");
    int *th = (int *)malloc((size_t)T * sizeof(int));
    if (!tok || !th) { fprintf(stderr, "bench: %s\n", tok ? "out of host memory" : kbackend_error(&gpu)); exit(1); }
    for (int t = 0; t < T; t++) th[t] = (int)(((uint64_t)t * 2654435761u) % (uint64_t)V);
    kbuf_upload(&gpu, tok, th, (size_t)T * sizeof(int));
    free(th);
    return tok;
}

static int cmp(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }

/* Median milliseconds of fn over 5 runs (after a warm-up). */
#define TIME_MS(result, ...) do { \
    cudaEvent_t e0_, e1_; float t_[5]; \
    cudaCheck(cudaEventCreate(&e0_)); cudaCheck(cudaEventCreate(&e1_)); \
    { __VA_ARGS__; } cudaCheck(cudaDeviceSynchronize()); \
    for (int r_ = 0; r_ < 5; r_++) { cudaCheck(cudaEventRecord(e0_)); { __VA_ARGS__; } cudaCheck(cudaEventRecord(e1_)); \
        cudaCheck(cudaEventSynchronize(e1_)); cudaCheck(cudaEventElapsedTime(&t_[r_], e0_, e1_)); } \
    qsort(t_, 5, sizeof(float), cmp); result = t_[2]; \
    cudaCheck(cudaEventDestroy(e0_)); cudaCheck(cudaEventDestroy(e1_)); } while (0)

static const char *pct(double tflops, double peak) {
    static char s[4][32]; static int i;
    i = (i + 1) % 4;
    if (peak > 0) snprintf(s[i], sizeof s[i], " (%.0f %% of %.0f)", 100.0 * tflops / peak, peak); else s[i][0] = 0;
    return s[i];
}

static void row(const char *what, float ms, float base_ms, const char *extra) {
    printf("| %-44s | %10.3f | %7.2fx | %s |\n", what, ms, ms / base_ms, extra);
}

int main(void) {
    if (!kcuda_device_available()) {
        printf("SKIP: no CUDA device: CUDA kernel timings not measured\n");
        return 0;
    }
    if (kbackend_cuda_init(&gpu, -1) != 0) { fprintf(stderr, "bench: %s\n", kbackend_error(&gpu)); return 1; }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, GEMMs in %s (DPMEM_CUDA_GEMM)\n", prop.name, kcuda_gemm_precision_name());
    const int C = 2048, NH = 32, NKV = 8, HS = 64;
    char extra[192];

    printf("\n| attention (1B shapes, B=1) | ms | vs q-proj GEMM | |\n|---|---|---|---|\n");
    for (int T = 4096; T <= 16384; T *= 4) {
        size_t nq = (size_t)T * NH * HS, nk = (size_t)T * NKV * HS;
        float *x = buf((size_t)T * C, "bench/x"), *w = buf((size_t)C * C, "bench/w"), *y = buf((size_t)T * C, "bench/y");
        float *q = buf(nq, "bench/q"), *k = buf(nk, "bench/k"), *v = buf(nk, "bench/v"), *o = buf(nq, "bench/o");
        float *lse = buf((size_t)NH * T, "bench/lse"), *dq = buf(nq, "bench/dq"), *dk = buf(nk, "bench/dk"), *dv = buf(nk, "bench/dv");
        fill_buffer(&gpu, q, 0.01f, nq); fill_buffer(&gpu, k, 0.02f, nk); fill_buffer(&gpu, v, 0.03f, nk);
        float base, fwd, bwd;
        TIME_MS(base, matmul_forward(&gpu, y, x, w, T, C, C, 0.0f));
        TIME_MS(fwd, attention_forward(&gpu, o, lse, q, k, v, 1, T, NH, NKV, HS));
        TIME_MS(bwd, attention_backward(&gpu, dq, dk, dv, o, q, k, v, o, lse, 1, T, NH, NKV, HS));
        double flops = 4.0 * T * (double)T / 2 * NH * HS;   /* QKᵀ and PV, causal half */
        snprintf(extra, sizeof extra, "T=%d base %.3f ms, %.1f TFLOP/s", T, base, flops / fwd / 1e9);
        row("attention_forward", fwd, base, extra);
        snprintf(extra, sizeof extra, "T=%d", T);
        row("attention_backward", bwd, base, extra);
        fresh_backend();
    }

    /* --precision bf16: cuDNN's fused attention on bf16 storage (random inputs: never time zeros),
       beside the bf16 GEMM of the q projection; TFLOP/s over the causal half (forward 4·T²/2·NH·HS,
       backward 2.5× that: five products to the forward's two) and % of the device's dense bf16 peak */
    const double peak = mfu_peak_tflops(prop.name, "bf16", NULL);   /* 0: not in the table */
    printf("\n| attention bf16, cuDNN fused (B=1) | ms | vs q-proj bf16 GEMM | |\n|---|---|---|---|\n");
    const int shapes[2][3] = { { 16, 16, 128 }, { 32, 8, 64 } };   /* the 1b preset; llama3.2-1b */
    for (int sh = 0; sh < 2; sh++)
        for (int T = 4096; T <= 16384; T *= 4) {
            const int nh = shapes[sh][0], nkv = shapes[sh][1], hs = shapes[sh][2];
            size_t nq = (size_t)T * nh * hs, nk = (size_t)T * nkv * hs;
            float *tmp = buf(nq, "bench/random");
            void *q16 = kbuf_alloc(&gpu, nq * 2, "bench/q"), *k16 = kbuf_alloc(&gpu, nk * 2, "bench/k"), *v16 = kbuf_alloc(&gpu, nk * 2, "bench/v");
            void *o16 = kbuf_alloc(&gpu, nq * 2, "bench/o"), *do16 = kbuf_alloc(&gpu, nq * 2, "bench/do");
            void *dq16 = kbuf_alloc(&gpu, nq * 2, "bench/dq"), *dk16 = kbuf_alloc(&gpu, nk * 2, "bench/dk"), *dv16 = kbuf_alloc(&gpu, nk * 2, "bench/dv");
            void *x16 = kbuf_alloc(&gpu, (size_t)T * C * 2, "bench/x"), *w16 = kbuf_alloc(&gpu, (size_t)C * C * 2, "bench/w");
            void *y16 = kbuf_alloc(&gpu, (size_t)T * C * 2, "bench/y");
            float *lse = buf((size_t)nh * T, "bench/lse");
            void *fill[] = { q16, k16, v16, do16, x16, w16 };
            size_t fill_n[] = { nq, nk, nk, nq, (size_t)T * C, (size_t)C * C };
            for (int f = 0; f < 6; f++) {
                fill_buffer(&gpu, tmp, 0.0f, fill_n[f]);
                noise_add_gaussian_cuda(tmp, fill_n[f], 1.0, 99 + f, 1, 0);
                narrow_buffer(&gpu, (float *)fill[f], tmp, fill_n[f]);
            }
            float base, fwd, bwd;
            TIME_MS(base, matmul_forward_ex(&gpu, KDT_BF16, KDT_BF16, (float *)y16, (const float *)x16, (const float *)w16, T, C, C, 0.0f));
            TIME_MS(fwd, attention_forward_ex(&gpu, KDT_BF16, (float *)o16, lse, (float *)q16, (float *)k16, (float *)v16, 1, T, nh, nkv, hs));
            TIME_MS(bwd, attention_backward_ex(&gpu, KDT_BF16, (float *)dq16, (float *)dk16, (float *)dv16, (float *)do16, (float *)q16,
                                               (float *)k16, (float *)v16, (float *)o16, lse, 1, T, nh, nkv, hs));
            const double flops = 4.0 * T * (double)T / 2 * nh * hs;
            const double gemm_tf = 2.0 * T * (double)C * C / base / 1e9;
            snprintf(extra, sizeof extra, "T=%d NH=%d/%d HS=%d: %.0f TFLOP/s%s; GEMM %.3f ms %.0f TFLOP/s", T, nh, nkv, hs,
                     flops / fwd / 1e9, pct(flops / fwd / 1e9, peak), base, gemm_tf);
            row("attention_forward (cuDNN, bf16)", fwd, base, extra);
            snprintf(extra, sizeof extra, "T=%d NH=%d/%d HS=%d: %.0f TFLOP/s%s", T, nh, nkv, hs, 2.5 * flops / bwd / 1e9,
                     pct(2.5 * flops / bwd / 1e9, peak));
            row("attention_backward (cuDNN, bf16)", bwd, base, extra);
            fresh_backend();
        }
    printf("     cuDNN %zu; workspace asked: forward %zu B, backward %zu B (the last shape)\n", kcuda_cudnn_version(),
           kcuda_attention_cudnn_asked(0), kcuda_attention_cudnn_asked(1));

    printf("\n| native bf16 element-wise (1b: N=4096, C=2048, F=5632) | ms | GB/s | |\n|---|---|---|---|\n");
    {
        const int N = 4096, F = 5632;
        const size_t nc = (size_t)N * C, nf = (size_t)N * F;
        void *a = kbuf_alloc(&gpu, nf * 2, "bench/a"), *b2 = kbuf_alloc(&gpu, nf * 2, "bench/b"), *c2 = kbuf_alloc(&gpu, nf * 2, "bench/c");
        float *w = buf(C, "bench/w"), *r = buf(N, "bench/rstd");
        fill_buffer(&gpu, w, 1.0f, C);
        zero_ex(&gpu, KDT_BF16, (float *)a, nf); zero_ex(&gpu, KDT_BF16, (float *)b2, nf);
        float t, t32;
        TIME_MS(t, rmsnorm_forward_ex(&gpu, KDT_BF16, (float *)c2, r, (float *)a, w, N, C, 1e-5f));
        printf("| rmsnorm_forward bf16 | %.3f | %.0f | |\n", t, 2.0 * nc * 2 / t / 1e6);
        TIME_MS(t, swiglu_forward_ex(&gpu, KDT_BF16, (float *)c2, (float *)a, (float *)b2, nf));
        printf("| swiglu_forward bf16 | %.3f | %.0f | |\n", t, 3.0 * nf * 2 / t / 1e6);
        TIME_MS(t, swiglu_backward_ex(&gpu, KDT_BF16, (float *)c2, (float *)b2, (float *)a, (float *)a, (float *)b2, nf));
        printf("| swiglu_backward bf16 | %.3f | %.0f | |\n", t, 5.0 * nf * 2 / t / 1e6);
        TIME_MS(t, rope_forward_ex(&gpu, KDT_BF16, (float *)a, 1, N, 16, 128, (KRope){ 10000.0f, 0, 0, 0, 0 }));
        printf("| rope_forward bf16 (16 heads x 128) | %.3f | %.0f | |\n", t, 2.0 * nc * 2 / t / 1e6);
        float *f32 = buf(nc, "bench/f32");
        TIME_MS(t32, rmsnorm_forward(&gpu, f32, r, f32, w, N, C, 1e-5f));
        printf("| rmsnorm_forward fp32 (for comparison) | %.3f | %.0f | |\n", t32, 2.0 * nc * 4 / t32 / 1e6);
        fresh_backend();
    }

    printf("\n| per-sample norms, linear 2048x2048 | ms | vs weight-grad GEMM | |\n|---|---|---|---|\n");
    const int Bs[2] = { 4, 1 }, Ts[2] = { 1024, 4096 };
    for (int c = 0; c < 2; c++) {
        int B = Bs[c], T = Ts[c], IC = C, OC = C;
        float *a = buf((size_t)B * T * IC, "bench/a"), *g = buf((size_t)B * T * OC, "bench/g"), *dw = buf((size_t)OC * IC, "bench/dw");
        float *n2 = buf(B, "bench/norm2"), *cf = buf(B, "bench/c");
        fill_buffer(&gpu, a, 0.01f, (size_t)B * T * IC); fill_buffer(&gpu, g, 0.01f, (size_t)B * T * OC); fill_buffer(&gpu, cf, 0.5f, B);
        float base, direct = 0, ghost = 0, flash, bk;
        TIME_MS(base, matmul_backward_weight(&gpu, dw, g, a, B * T, IC, OC));
        float *psg = buf((size_t)B * OC * IC, "per_sample_grads/bench");
        TIME_MS(direct, dp_linear_norms_direct_cuda(n2, psg, a, g, B, T, IC, OC, NULL));
        kbuf_free(&gpu, psg);
        float *gram = buf(2 * (size_t)B * T * T, "ghost/bench.gram");
        TIME_MS(ghost, dp_linear_norms_ghost_cuda(n2, gram, a, g, B, T, IC, OC, NULL));
        kbuf_free(&gpu, gram);
        const int R = kcuda_flash_rows(B, T);
        float *tile = buf(kcuda_flash_floats(B, T, R), "ghost/bench.tile");
        TIME_MS(flash, dp_linear_norms_flash_cuda(n2, tile, a, g, B, T, IC, OC, R, NULL));
        kbuf_free(&gpu, tile);
        TIME_MS(bk, dp_linear_clipped_grad_bk_cuda(dw, a, g, cf, B, T, IC, OC));
        snprintf(extra, sizeof extra, "B=%d T=%d base %.3f ms, scratch %.0f MiB", B, T, base, (double)B * OC * IC * 4 / 1048576);
        row("direct (per-sample grads + sum of squares)", direct, base, extra);
        snprintf(extra, sizeof extra, "B=%d T=%d scratch %.0f MiB (Gram matrices)", B, T, 2.0 * B * T * T * 4 / 1048576);
        row("ghost (materialized Grams)", ghost, base, extra);
        snprintf(extra, sizeof extra, "B=%d T=%d R=%d scratch %.1f MiB (fp32 GEMMs, no TF32)", B, T, R,
                 (double)kcuda_flash_floats(B, T, R) * 4 / 1048576);
        row("flash (Gram block rows by cuBLAS)", flash, base, extra);
        snprintf(extra, sizeof extra, "B=%d T=%d (B GEMMs, alpha = c_b)", B, T);
        row("book-keeping clipped gradient", bk, base, extra);
        fresh_backend();
    }

    /* flash on bf16 activations (the trainer's --precision bf16 path): the Gram block rows on tensor
       cores, beside the same layer's weight-gradient GEMM with the same operands (bf16, fp32
       accumulation and output: what the vanilla bf16 step pays for this layer). "Gram TFLOP/s": the
       GEMM work flash performs (2·ri·w·(IC+OC) per block row, the diagonal blocks whole) over its time. */
    printf("\n| flash norms, bf16, 1B shapes, B=1 T=4096 | ms | vs weight-grad GEMM (bf16) | |\n|---|---|---|---|\n");
    {
        const int T = 4096, B = 1, shapes[2][2] = { { 2048, 2048 }, { 2048, 8192 } };
        uint32_t bits = 0x3C233C23u;   /* two bf16 halves of 0.00995 each: sane values in both */
        float v16;
        memcpy(&v16, &bits, 4);
        for (int c = 0; c < 2; c++) {
            const int IC = shapes[c][0], OC = shapes[c][1];
            float *a = buf((size_t)B * T * IC / 2, "bench/a.bf16"), *g = buf((size_t)B * T * OC / 2, "bench/g.bf16");
            float *dw = buf((size_t)OC * IC, "bench/dw"), *n2 = buf(B, "bench/norm2");
            fill_buffer(&gpu, a, v16, (size_t)B * T * IC / 2); fill_buffer(&gpu, g, v16, (size_t)B * T * OC / 2);
            const int R = kcuda_flash_rows(B, T);
            float *tile = buf(kcuda_flash_floats(B, T, R), "ghost/bench.tile");
            float base, flash;
            TIME_MS(base, wgrad_bf16(dw, g, a, OC, IC, B * T));
            TIME_MS(flash, dp_linear_norms_flash_cuda_dt(n2, tile, a, g, B, T, IC, OC, R, KDT_BF16, NULL));
            double work = 0;
            for (int i0 = 0; i0 < T; i0 += R) {
                const double ri = T - i0 < R ? T - i0 : R;
                work += 2.0 * ri * (i0 + ri) * (IC + OC) * B;
            }
            snprintf(extra, sizeof extra, "%dx%d R=%d scratch %.1f MiB; GEMM %.3f ms %.0f TFLOP/s; Gram %.0f TFLOP/s",
                     OC, IC, R, (double)kcuda_flash_floats(B, T, R) * 4 / 1048576, base, 2.0 * T * IC * OC * B / base / 1e9,
                     work / flash / 1e9);
            row("flash bf16 (Gram block rows, tensor cores)", flash, base, extra);
            fresh_backend();
        }
        /* the tied lm_head's cross term at llama3.2-1b's shapes (V = 128256, C = 2048): u = D A */
        const int C1 = 2048, V = 128256;
        float *lg = buf((size_t)T * V / 2, "bench/dlogits.bf16"), *a = buf((size_t)T * C1 / 2, "bench/a.bf16");
        float *u = buf((size_t)T * C1, "bench/u"), *dw = buf((size_t)V * C1, "bench/dw");
        int *tok = tokens_on_gpu(T, V);
        fill_buffer(&gpu, lg, v16, (size_t)T * V / 2); fill_buffer(&gpu, a, v16, (size_t)T * C1 / 2);
        const int R = kcuda_tied_rows(1, T, KDT_BF16);
        float *rows = buf(kcuda_tied_cross_floats(1, T, R, KDT_BF16), "ghost/bench.tied.tile");
        float base, tied;
        TIME_MS(base, wgrad_bf16(dw, lg, a, V, C1, T));
        TIME_MS(tied, dp_tied_cross_u_cuda_dt(u, rows, tok, lg, a, 1, T, C1, V, R, KDT_BF16, NULL));
        snprintf(extra, sizeof extra, "T=%d C=%d V=%d R=%d; lm_head GEMM %.3f ms; u %.0f TFLOP/s", T, C1, V, R, base,
                 2.0 * T * (double)T * C1 / tied / 1e9);
        row("tied cross term u = D A, bf16", tied, base, extra);
        fresh_backend();
    }

    /* DP with book-keeping at physical batch 1 (the 1b preset, bf16, T = 4096), per layer shape: what
       its `clip` phase runs for one sample where the per-sample gradient is kept (q, k, v, o, gate,
       up: IC <= T) — the per-sample gradient GEMM with its sum of squares (direct), then the clipped
       sum into the gradient (sample 0 in place: "first"; later samples: "sum") — and where it is not
       (down: IC > T; lm_head: its dlogits borrowed) the book-keeping GEMM with alpha = c_b. Each beside
       the layer's weight-gradient GEMM (what vanilla pays), then the sum over the model's layers. */
    printf("\n| book-keeping, physical batch 1, bf16, 1b (C=2048 F=5632 V=32000 L=20), T=4096 | ms | vs weight-grad GEMM | |\n|---|---|---|---|\n");
    {
        const int T = 4096, L = 20;
        const struct { const char *name; int IC, OC, count, kept; } sh[4] = {
            { "q/k/v/o 2048x2048", 2048, 2048, 4 * L, 1 }, { "gate/up 2048->5632", 2048, 5632, 2 * L, 1 },
            { "down 5632->2048", 5632, 2048, L, 0 }, { "lm_head 2048->32000", 2048, 32000, 1, 0 } };
        uint32_t bits = 0x3C233C23u;
        float v16;
        memcpy(&v16, &bits, 4);
        double tot_base = 0, tot_first = 0, tot_sum = 0;
        for (int c = 0; c < 4; c++) {
            const int IC = sh[c].IC, OC = sh[c].OC;
            const size_t P = (size_t)IC * OC;
            float *a = buf((size_t)T * IC / 2, "bench/a.bf16"), *g = buf((size_t)T * OC / 2, "bench/g.bf16");
            float *dw = buf(P, "bench/dw"), *psg = buf(P, "per_sample_grads/bench"), *n2 = buf(1, "bench/norm2");
            float *cf = buf(1, "bench/c"), ch = 0.5f;
            fill_buffer(&gpu, a, v16, (size_t)T * IC / 2); fill_buffer(&gpu, g, v16, (size_t)T * OC / 2);
            fill_buffer(&gpu, cf, ch, 1); fill_buffer(&gpu, psg, 0.01f, P); fill_buffer(&gpu, dw, 0.01f, P);
            float base, direct, sq, first, sum, bkg;
            TIME_MS(base, wgrad_bf16(dw, g, a, OC, IC, T));
            TIME_MS(direct, dp_linear_norms_direct_cuda_dt(n2, psg, a, g, 1, T, IC, OC, KDT_BF16, NULL));
            TIME_MS(sq, dp_psg_norms_cuda(n2, psg, 1, P));
            TIME_MS(first, dp_clipped_sum_first_cuda(dw, psg, cf, 1, P));
            TIME_MS(sum, dp_clipped_sum_cuda(dw, psg, cf, 1, P));
            TIME_MS(bkg, dp_linear_clipped_grad_bk_hostc_cuda_dt(dw, a, g, &ch, 1, T, IC, OC, KDT_BF16));
            snprintf(extra, sizeof extra, "%s, x%d in the model; GEMM %.3f ms", sh[c].name, sh[c].count, base);
            row("direct norms (per-sample grad GEMM + sum sq)", direct, base, extra);
            snprintf(extra, sizeof extra, "%s; %.0f GB/s", sh[c].name, P * 4.0 / sq / 1e6);
            row("  of which the sum of squares", sq, base, extra);
            snprintf(extra, sizeof extra, "%s; %.0f GB/s", sh[c].name, P * 8.0 / first / 1e6);
            row("clipped sum, sample 0 in place", first, base, extra);
            snprintf(extra, sizeof extra, "%s; %.0f GB/s", sh[c].name, P * 12.0 / sum / 1e6);
            row("clipped sum, a later sample", sum, base, extra);
            snprintf(extra, sizeof extra, "%s; host factors, no read-back", sh[c].name);
            row("book-keeping GEMM (alpha = c_b)", bkg, base, extra);
            tot_base += (double)sh[c].count * base;
            /* a kept layer: direct + the clipped sum; the others: the norm (mixed: direct-streamed) + bk GEMM */
            tot_first += sh[c].count * (double)(sh[c].kept ? direct + first : direct + bkg);
            tot_sum += sh[c].count * (double)(sh[c].kept ? direct + sum : direct + bkg);
            fresh_backend();
        }
        snprintf(extra, sizeof extra, "the linear layers' weight-gradient GEMMs %.2f ms a sample (their sum)", tot_base);
        row("linear layers' clip work a sample, sample 0", (float)tot_first, (float)tot_base, extra);
        snprintf(extra, sizeof extra, "what DP adds a sample: %.2f ms (sample 0), %.2f ms (later samples)",
                 tot_first - tot_base, tot_sum - tot_base);
        row("linear layers' clip work, a later sample", (float)tot_sum, (float)tot_base, extra);
        /* the other weights: 41 RMSNorm weights (per-sample gradients, B x C: in place of the plain
           weight gradient) and the embedding (its clipped scatter, the same column walk as the plain
           embedding backward), beside a GEMM of the q projection's size for scale */
        const int C1 = 2048, V = 32000;
        float *dout = buf((size_t)T * C1 / 2, "bench/dout.bf16"), *inp = buf((size_t)T * C1 / 2, "bench/inp.bf16");
        float *rstd = buf(T, "bench/rstd"), *psg = buf(C1, "per_sample_grads/bench.rms"), *n2 = buf(1, "bench/norm2");
        float *dwte = buf((size_t)V * C1, "bench/dwte"), *cf = buf(1, "bench/c"), *dw = buf((size_t)C1 * C1, "bench/dw");
        int *tok = tokens_on_gpu(T, V);
        fill_buffer(&gpu, dout, v16, (size_t)T * C1 / 2); fill_buffer(&gpu, inp, v16, (size_t)T * C1 / 2);
        fill_buffer(&gpu, rstd, 1.0f, T); fill_buffer(&gpu, cf, 0.5f, 1); fill_buffer(&gpu, dwte, 0.0f, (size_t)V * C1);
        float base, rms, emb;
        TIME_MS(base, wgrad_bf16(dw, dout, inp, C1, C1, T));
        TIME_MS(rms, dp_rmsnorm_norms_direct_cuda_dt(n2, psg, dout, inp, rstd, 1, T, C1, KDT_BF16));
        TIME_MS(emb, dp_embedding_clipped_grad_bk_cuda_dt(dwte, tok, dout, cf, 1, T, C1, V, KDT_BF16));
        snprintf(extra, sizeof extra, "C=%d, x%d in the model: %.2f ms a sample; %.0f GB/s", C1, 2 * L + 1, (2 * L + 1) * rms,
                 2.0 * T * C1 * 2 / rms / 1e6);
        row("rmsnorm per-sample gradient + sum sq", rms, base, extra);
        snprintf(extra, sizeof extra, "N=%d C=%d (the plain embedding backward walks the same way)", T, C1);
        row("embedding clipped scatter (bk)", emb, base, extra);
        fresh_backend();
    }

    printf("\n| memory-bound kernels | ms | GB/s | |\n|---|---|---|---|\n");
    {
        const int N = 16384, V = 32768;
        float *x = buf((size_t)N * C, "bench/x"), *o = buf((size_t)N * C, "bench/o"), *w = buf(C, "bench/w"), *r = buf(N, "bench/rstd");
        fill_buffer(&gpu, x, 0.5f, (size_t)N * C); fill_buffer(&gpu, w, 1.0f, C);
        float t;
        TIME_MS(t, rmsnorm_forward(&gpu, o, r, x, w, N, C, 1e-5f));
        printf("| rmsnorm_forward N=%d C=%d | %.3f | %.0f | |\n", N, C, t, 2.0 * N * C * 4 / t / 1e6);
        fresh_backend();
        float *lg = buf((size_t)4096 * V, "bench/logits"), *ls = buf(4096, "bench/losses");
        int *tg = (int *)kbuf_alloc(&gpu, 4096 * sizeof(int), "bench/targets");
        fill_buffer(&gpu, lg, 0.1f, (size_t)4096 * V);
        TIME_MS(t, crossentropy_forward(&gpu, ls, lg, tg, 4096, V));
        printf("| crossentropy_forward N=4096 V=%d | %.3f | %.0f | |\n", V, t, 4096.0 * V * 4 / t / 1e6);
        fresh_backend();
        size_t P = (size_t)1 << 28;   /* 268M parameters */
        float *p = buf(P, "bench/p"), *g = buf(P, "bench/g"), *m = buf(P, "bench/m"), *vv = buf(P, "bench/v");
        TIME_MS(t, adamw_update(&gpu, p, g, m, vv, P, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1));
        printf("| adamw 2^28 params | %.3f | %.0f | |\n", t, 7.0 * P * 4 / t / 1e6);
        TIME_MS(t, noise_add_gaussian_cuda(g, P, 1.0, 1234, 1, 0));
        printf("| Philox noise 2^28 coords | %.3f | %.0f | |\n", t, 2.0 * P * 4 / t / 1e6);
        /* the DP step's update: privatize (noise, then the 1/L scale) and AdamW as the trainer runs them,
           against the fused pass (dp_update.cu); GB/s as the bytes each moves (44 and 28 a parameter) */
        const DpNoise nz = { 1.0, 1.0, 2.0, 1234, 1 };
        const DpAdamW opt = { 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1 };
        float sep, fused;
        TIME_MS(sep, (noise_privatize_cuda(g, P, nz.sigma, nz.max_grad_norm, nz.logical_batch, nz.seed, nz.step, 0),
                      adamw_update(&gpu, p, g, m, vv, P, opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.t)));
        printf("| DP update 2^28 params: noise_privatize + adamw | %.3f | %.0f | |\n", sep, 11.0 * P * 4 / sep / 1e6);
        TIME_MS(fused, dp_noisy_adamw_cuda(p, g, m, vv, P, 0, &nz, &opt, 0));
        printf("| DP update 2^28 params: fused (dp_noisy_adamw_cuda) | %.3f | %.0f | %.2fx the separate path |\n", fused,
               7.0 * P * 4 / fused / 1e6, fused / sep);
        /* --secure-noise: ChaCha20 on the grid (secure_noise.cu) beside Philox, separate and fused; the extra
           time per 2^30 coordinates (a 1b model has 1.16e9) is what a 1b step pays for it */
        const uint32_t key[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
        float philox_p, secure_p, secure_f;
        TIME_MS(philox_p, noise_privatize_cuda(g, P, nz.sigma, nz.max_grad_norm, nz.logical_batch, nz.seed, nz.step, 0));
        TIME_MS(secure_p, secure_noise_privatize_cuda(g, P, nz.sigma, nz.max_grad_norm, nz.logical_batch, key, nz.step, 0));
        printf("| privatize 2^28 coords: Philox | %.3f | %.0f | |\n", philox_p, 3.0 * P * 4 / philox_p / 1e6);
        printf("| privatize 2^28 coords: secure (ChaCha20, grid) | %.3f | %.0f | %.2fx Philox's; +%.2f ms per 2^30 coords |\n", secure_p,
               2.0 * P * 4 / secure_p / 1e6, secure_p / philox_p, 4.0 * (secure_p - philox_p));
        TIME_MS(secure_f, secure_noisy_adamw_cuda(p, g, m, vv, P, 0, &nz, key, &opt));
        printf("| DP update 2^28 params: fused, secure noise (secure_noisy_adamw_cuda) | %.3f | %.0f | %.2fx the Philox fused; +%.2f ms per 2^30 params |\n",
               secure_f, 7.0 * P * 4 / secure_f / 1e6, secure_f / fused, 4.0 * (secure_f - fused));
    }
    kbackend_destroy(&gpu);
    return 0;
}
