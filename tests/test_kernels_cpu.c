/* test_kernels_cpu.c — every CPU op of kernels.h against a straightforward double-precision
   reference, on random odd shapes (T = 17, grouped-query heads 6/2, HS = 10, and T = 150 so that
   the tiled attention crosses several 64-key tiles).
   Backward ops are checked against central differences of the double reference forward (step 1e-6
   in double: truncation ~1e-12, rounding ~1e-10, far below the fp32 kernels' own ~1e-6 relative
   error), except attention, whose reference backward is the naive materialized-T×T formula.
   Tolerance: |got - want| <= 2e-6 + 2e-5 |want| — fp32 sums of <= 600 terms of O(1) values carry
   ~1e-7..1e-6 relative error (the observed worst error / tolerance is printed, <= 0.3 at the time of
   writing), while a wrong index, sign or scale is an O(1) error.
   Not here: CUDA (kernels/cuda has its own twin tests), performance. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "kernels.h"
#include "cpu/kernels_cpu.h"
#include "cpu/vmath.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
static uint64_t rng = 42;

static double urand(void) {   /* uniform [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * 0x1.0p-52 - 1.0;
}
static float *frand(size_t n, double scale) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(urand() * scale);
    return x;
}
static double *dcopy(const float *x, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static void check(const char *what, const float *got, const double *want, size_t n) {
    double worst = 0.0; size_t bad = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), tol = 2e-6 + 2e-5 * fabs(want[i]);
        if (!(err <= tol)) { if (!bad) at = i; bad++; }
        if (err / tol > worst) worst = err / tol;
    }
    if (bad) {
        printf("FAIL %-32s %zu of %zu outside tolerance; first at %zu: got %.8g want %.8g\n", what, bad, n, at,
               (double)got[at], want[at]);
        failures++;
    } else {
        printf("ok   %-32s n=%-6zu worst error / tolerance = %.3f\n", what, n, worst);
    }
}

/* Against a rigorous bound instead: |got - want| <= K·2^-24·Σ_k|a_k b_k| (the fp32 dot-product error
   bound, for sums where cancellation makes a relative tolerance meaningless). */
static void check_bound(const char *what, const float *got, const double *want, const double *bound, size_t n) {
    size_t bad = 0; double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - want[i]) / (bound[i] + 1e-30);
        if (!(r <= 1.0)) bad++;
        if (r > worst) worst = r;
    }
    if (bad) { printf("FAIL %-32s %zu of %zu outside the bound (worst %.3g x)\n", what, bad, n, worst); failures++; }
    else printf("ok   %-32s n=%-6zu worst error / bound = %.3f\n", what, n, worst);
}

/* ---- GEMM ---------------------------------------------------------------------------------------- */
static void test_gemm(KBackend *kb) {
    const int M = 7, N = 5, K = 9, batch = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
            long long sa = (long long)lda * (ta ? K : M) + 5, sb = (long long)ldb * (tb ? N : K) + 1, sc = (long long)ldc * M + 2;
            float *A = frand((size_t)(sa * batch), 1), *B = frand((size_t)(sb * batch), 1), *C = frand((size_t)(sc * batch), 1);
            double *want = dcopy(C, (size_t)(sc * batch));
            for (int i = 0; i < batch; i++)
                for (int r = 0; r < M; r++)
                    for (int c = 0; c < N; c++) {
                        double s = 0;
                        for (int k = 0; k < K; k++) {
                            double a = ta ? A[i * sa + (long long)k * lda + r] : A[i * sa + (long long)r * lda + k];
                            double b = tb ? B[i * sb + (long long)c * ldb + k] : B[i * sb + (long long)k * ldb + c];
                            s += a * b;
                        }
                        want[i * sc + (long long)r * ldc + c] = 0.5 * s + 0.25 * want[i * sc + (long long)r * ldc + c];
                    }
            gemm_strided_batched(kb, ta, tb, M, N, K, 0.5f, A, lda, sa, B, ldb, sb, 0.25f, C, ldc, sc, batch);
            char name[64]; snprintf(name, sizeof name, "gemm_strided_batched %c%c", ta ? 'T' : 'N', tb ? 'T' : 'N');
            check(name, C, want, (size_t)(sc * batch));
            free(A); free(B); free(C); free(want);
        }
    /* large enough to be split among threads (rows of C per thread, OpenBLAS single-threaded) */
    for (int ta = 0; ta < 2; ta++) {
        const int M2 = 301, N2 = 67, K2 = 257;
        float *A = frand((size_t)M2 * K2, 1), *B = frand((size_t)K2 * N2, 1), *C = frand((size_t)M2 * N2, 1);
        double *want = malloc(sizeof(double) * M2 * N2), *bound = malloc(sizeof(double) * M2 * N2);
        for (int r = 0; r < M2; r++) for (int c = 0; c < N2; c++) {
            double s = 0, sa = 0;
            for (int k = 0; k < K2; k++) {
                double p = (double)(ta ? A[(size_t)k * M2 + r] : A[(size_t)r * K2 + k]) * B[(size_t)k * N2 + c];
                s += p; sa += fabs(p);
            }
            want[(size_t)r * N2 + c] = s;
            bound[(size_t)r * N2 + c] = K2 * 0x1.0p-24 * sa;
        }
        gemm_strided_batched(kb, ta, 0, M2, N2, K2, 1.0f, A, ta ? M2 : K2, 0, B, N2, 0, 0.0f, C, N2, 0, 1);
        check_bound(ta ? "gemm 301x67x257 TN (threaded)" : "gemm 301x67x257 NN (threaded)", C, want, bound, (size_t)M2 * N2);
        free(A); free(B); free(C); free(want); free(bound);
    }
    /* the linear-layer wrappers: y = x Wᵀ, dx = dy W, dW += dyᵀ x */
    const int R = 17, IC = 11, OC = 13;
    float *x = frand((size_t)R * IC, 1), *w = frand((size_t)OC * IC, 1), *y = frand((size_t)R * OC, 1);
    float *dy = frand((size_t)R * OC, 1), *dx = frand((size_t)R * IC, 1), *dw = frand((size_t)OC * IC, 1);
    double *wy = malloc(sizeof(double) * R * OC), *wdx = malloc(sizeof(double) * R * IC), *wdw = dcopy(dw, (size_t)OC * IC);
    for (int r = 0; r < R; r++) for (int o = 0; o < OC; o++) {
        double s = 0; for (int i = 0; i < IC; i++) s += (double)x[r * IC + i] * w[o * IC + i];
        wy[r * OC + o] = s;
    }
    for (int r = 0; r < R; r++) for (int i = 0; i < IC; i++) {
        double s = 0; for (int o = 0; o < OC; o++) s += (double)dy[r * OC + o] * w[o * IC + i];
        wdx[r * IC + i] = s;
    }
    for (int o = 0; o < OC; o++) for (int i = 0; i < IC; i++) {
        double s = 0; for (int r = 0; r < R; r++) s += (double)dy[r * OC + o] * x[r * IC + i];
        wdw[o * IC + i] += s;
    }
    matmul_forward(kb, y, x, w, R, IC, OC, 0.0f);
    matmul_backward_input(kb, dx, dy, w, R, IC, OC, 0.0f);
    matmul_backward_weight(kb, dw, dy, x, R, IC, OC);
    check("matmul_forward", y, wy, (size_t)R * OC);
    check("matmul_backward_input", dx, wdx, (size_t)R * IC);
    check("matmul_backward_weight (+=)", dw, wdw, (size_t)OC * IC);
    free(x); free(w); free(y); free(dy); free(dx); free(dw); free(wy); free(wdx); free(wdw);
}

/* ---- elementwise, reductions, embedding, optimizer ------------------------------------------------ */
static void test_simple(KBackend *kb) {
    const size_t n = 100003;   /* above the threshold for threads: uneven ranges over 3 threads */
    float *a = frand(n, 3), *b = frand(n, 1);
    double *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) want[i] = (double)a[i] + b[i];
    add_inplace(kb, a, b, n); check("add_inplace", a, want, n);
    for (size_t i = 0; i < n; i++) want[i] = (double)a[i] * -0.75;
    scale_inplace(kb, a, -0.75f, n); check("scale_inplace", a, want, n);
    double s = 0, ss = 0, got;
    for (size_t i = 0; i < n; i++) { s += a[i]; ss += (double)a[i] * a[i]; }
    reduce_sum(kb, a, n, &got);
    if (fabs(got - s) > 1e-9 * (1 + fabs(s))) { printf("FAIL reduce_sum %.12g vs %.12g\n", got, s); failures++; }
    reduce_sumsq(kb, a, n, &got);
    if (fabs(got - ss) > 1e-9 * ss) { printf("FAIL reduce_sumsq %.12g vs %.12g\n", got, ss); failures++; }
    size_t cnt;
    a[3] = NAN; a[50000] = INFINITY; a[100002] = -INFINITY;
    count_nonfinite(kb, a, n, &cnt);
    if (cnt != 3) { printf("FAIL count_nonfinite: %zu, want 3\n", cnt); failures++; } else printf("ok   reductions (sum, sumsq, count_nonfinite)\n");
    fill_buffer(kb, a, 2.5f, n);
    for (size_t i = 0; i < n; i++) want[i] = 2.5;
    check("fill_buffer", a, want, n);
    {   /* large copies and zero fills go in one piece per thread; overlapping ones stay one memmove */
        const size_t m = (size_t)3 << 20;   /* 12 MiB: above the split threshold */
        float *x = frand(m, 5), *y = malloc(m * sizeof *y), *z = malloc((m + 1000) * sizeof *z);
        copy_buffer(kb, y, x, m);
        int bad = memcmp(x, y, m * sizeof *x) != 0;
        memcpy(z, x, m * sizeof *x);
        copy_buffer(kb, z + 1000, z, m);     /* overlapping, forwards */
        bad |= memcmp(z + 1000, x, m * sizeof *x) != 0;
        copy_buffer(kb, z, z + 1000, m);     /* and back */
        bad |= memcmp(z, x, m * sizeof *x) != 0;
        fill_buffer(kb, y, 0.0f, m);
        for (size_t i = 0; i < m; i++) bad |= y[i] != 0.0f;
        if (bad) { printf("FAIL large copy_buffer / fill_buffer\n"); failures++; }
        else printf("ok   large copy_buffer (apart and overlapping), fill_buffer with 0\n");
        free(x); free(y); free(z);
    }

    /* SwiGLU: forward vs double, backward vs central differences of the double forward */
    float *g = frand(n, 4), *u = frand(n, 2), *h = malloc(n * 4), *dh = frand(n, 1), *dg = malloc(n * 4), *du = malloc(n * 4);
    double *wdg = malloc(n * 8), *wdu = malloc(n * 8);
    for (size_t i = 0; i < n; i++) {
        double G = g[i], U = u[i], e = 1e-6;
        want[i] = G / (1 + exp(-G)) * U;
        double fp = (G + e) / (1 + exp(-(G + e))) * U, fm = (G - e) / (1 + exp(-(G - e))) * U;
        wdg[i] = dh[i] * (fp - fm) / (2 * e);
        wdu[i] = dh[i] * G / (1 + exp(-G));
    }
    swiglu_forward(kb, h, g, u, n); check("swiglu_forward", h, want, n);
    swiglu_backward(kb, dg, du, dh, g, u, n);
    check("swiglu_backward dgate", dg, wdg, n); check("swiglu_backward dup", du, wdu, n);
    free(g); free(u); free(h); free(dh); free(dg); free(du); free(wdg); free(wdu);

    /* embedding with repeated tokens */
    const int N = 23, C = 7, V = 9;
    int tok[23];
    for (int i = 0; i < N; i++) tok[i] = (int)((urand() + 1) * 4.5) % V;
    tok[5] = tok[6] = tok[20] = 3;
    float *wte = frand((size_t)V * C, 1), *out = malloc(sizeof(float) * N * C), *dout = frand((size_t)N * C, 1), *dwte = frand((size_t)V * C, 1);
    double *wout = malloc(sizeof(double) * N * C), *wdwte = dcopy(dwte, (size_t)V * C);
    for (int i = 0; i < N; i++) for (int c = 0; c < C; c++) { wout[i * C + c] = wte[tok[i] * C + c]; wdwte[tok[i] * C + c] += dout[i * C + c]; }
    embedding_forward(kb, out, tok, wte, N, C); check("embedding_forward", out, wout, (size_t)N * C);
    embedding_backward(kb, dwte, tok, dout, N, C, V); check("embedding_backward (+=)", dwte, wdwte, (size_t)V * C);
    free(wte); free(out); free(dout); free(dwte); free(wout); free(wdwte);

    /* AdamW and SGD: three steps against the textbook formulas in double */
    float *p = frand(n, 1), *m = calloc(n, 4), *v = calloc(n, 4), *gr = frand(n, 1);
    double *P = dcopy(p, n), *Mm = calloc(n, 8), *Vv = calloc(n, 8);
    for (int t = 1; t <= 3; t++) {
        adamw_update(kb, p, gr, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        for (size_t i = 0; i < n; i++) {
            Mm[i] = 0.9 * Mm[i] + 0.1 * gr[i];
            Vv[i] = 0.95 * Vv[i] + 0.05 * (double)gr[i] * gr[i];
            double mh = Mm[i] / (1 - pow(0.9, t)), vh = Vv[i] / (1 - pow(0.95, t));
            P[i] -= 1e-2 * (mh / (sqrt(vh) + 1e-8) + 0.1 * P[i]);
        }
    }
    check("adamw_update x3", p, P, n);
    for (size_t i = 0; i < n; i++) P[i] = p[i] - 0.5 * (gr[i] + 0.01 * p[i]);
    sgd_update(kb, p, gr, n, 0.5f, 0.01f); check("sgd_update", p, P, n);
    free(p); free(m); free(v); free(gr); free(P); free(Mm); free(Vv);
    free(a); free(b); free(want);
}

/* ---- RMSNorm -------------------------------------------------------------------------------------- */
static double rms_ref(const double *x, const double *w, const double *dout, int N, int C, double eps, double *out) {
    double L = 0;
    for (int n = 0; n < N; n++) {
        double ss = 0; for (int c = 0; c < C; c++) ss += x[n * C + c] * x[n * C + c];
        double r = 1 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) { double o = x[n * C + c] * r * w[c]; if (out) out[n * C + c] = o; L += o * dout[n * C + c]; }
    }
    return L;
}
static void test_rmsnorm(KBackend *kb) {
    const int N = 6, C = 13; const double eps = 1e-6;
    float *x = frand((size_t)N * C, 2), *w = frand(C, 1), *out = malloc(sizeof(float) * N * C), *rstd = malloc(sizeof(float) * N);
    float *dout = frand((size_t)N * C, 1), *dx = calloc((size_t)N * C, 4), *dw = calloc(C, 4);
    double *X = dcopy(x, (size_t)N * C), *W = dcopy(w, C), *D = dcopy(dout, (size_t)N * C), *want = malloc(sizeof(double) * N * C);
    double *wdx = malloc(sizeof(double) * N * C), *wdw = malloc(sizeof(double) * C);
    rms_ref(X, W, D, N, C, eps, want);
    rmsnorm_forward(kb, out, rstd, x, w, N, C, (float)eps);
    check("rmsnorm_forward", out, want, (size_t)N * C);
    for (int i = 0; i < N * C; i++) {
        double h = 1e-6, s = X[i];
        X[i] = s + h; double fp = rms_ref(X, W, D, N, C, eps, NULL);
        X[i] = s - h; double fm = rms_ref(X, W, D, N, C, eps, NULL);
        X[i] = s; wdx[i] = (fp - fm) / (2 * h);
    }
    for (int c = 0; c < C; c++) {
        double h = 1e-6, s = W[c];
        W[c] = s + h; double fp = rms_ref(X, W, D, N, C, eps, NULL);
        W[c] = s - h; double fm = rms_ref(X, W, D, N, C, eps, NULL);
        W[c] = s; wdw[c] = (fp - fm) / (2 * h);
    }
    rmsnorm_backward(kb, dx, dw, dout, x, w, rstd, N, C);
    check("rmsnorm_backward dinp", dx, wdx, (size_t)N * C);
    check("rmsnorm_backward dweight", dw, wdw, C);
    /* dinp NULL: the weight's gradient alone, the same bits (two-pass's second backward) */
    float *dw2 = calloc(C, 4);
    rmsnorm_backward(kb, NULL, dw2, dout, x, w, rstd, N, C);
    if (memcmp(dw, dw2, sizeof(float) * C)) { printf("FAIL rmsnorm_backward without dinp: dweight differs\n"); failures++; }
    free(dw2);
    free(x); free(w); free(out); free(rstd); free(dout); free(dx); free(dw);
    free(X); free(W); free(D); free(want); free(wdx); free(wdw);
}

/* ---- RoPE ------------------------------------------------------------------------------------------ */
static void test_rope(KBackend *kb) {
    const int B = 2, T = 17, NH = 3, HS = 10; const size_t n = (size_t)B * T * NH * HS;
    float *x = frand(n, 1), *y = malloc(n * 4), *dy = frand(n, 1), *dx = malloc(n * 4);
    double *want = malloc(n * 8);
    memcpy(y, x, n * 4); memcpy(dx, dy, n * 4);
    for (int b = 0; b < B; b++) for (int t = 0; t < T; t++) for (int h = 0; h < NH; h++)
        for (int i = 0; i < HS; i++) {   /* q*cos + rotate_half(q)*sin, as transformers writes it */
            size_t base = (((size_t)b * T + t) * NH + h) * HS;
            int j = i % (HS / 2);
            double ang = t * pow(10000.0, -2.0 * j / HS);
            double rot = i < HS / 2 ? -(double)x[base + i + HS / 2] : (double)x[base + i - HS / 2];
            want[base + i] = x[base + i] * cos(ang) + rot * sin(ang);
        }
    KRope rope = { .theta = 10000.0f };
    rope_forward(kb, y, B, T, NH, HS, rope);
    check("rope_forward", y, want, n);
    /* backward is the adjoint: <dy, rope(x)> = <rope_backward(dy), x> */
    rope_backward(kb, dx, B, T, NH, HS, rope);
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t i = 0; i < n; i++) { lhs += (double)dy[i] * want[i]; rhs += (double)dx[i] * x[i]; mag += fabs((double)dy[i] * want[i]); }
    if (fabs(lhs - rhs) > 1e-5 * mag) { printf("FAIL rope_backward adjoint: %.9g vs %.9g\n", lhs, rhs); failures++; }
    else printf("ok   rope_backward (adjoint identity, |diff| = %.2g)\n", fabs(lhs - rhs));
    free(x); free(y); free(dy); free(dx); free(want);
}

/* ---- attention ------------------------------------------------------------------------------------- */
/* Naive causal attention in double with the full T×T probability matrix (tests only). */
static void attn_ref(const float *q, const float *k, const float *v, const float *dout, int B, int T, int NH, int NKV,
                     int HS, double *out, double *lse, double *dq, double *dk, double *dv) {
    size_t qs = (size_t)NH * HS, ks = (size_t)NKV * HS;
    double sc = 1 / sqrt((double)HS);
    double *P = malloc(sizeof(double) * T * T), *dP = malloc(sizeof(double) * T * T);
    memset(dq, 0, sizeof(double) * B * T * qs); memset(dk, 0, sizeof(double) * B * T * ks); memset(dv, 0, sizeof(double) * B * T * ks);
    for (int b = 0; b < B; b++) for (int h = 0; h < NH; h++) {
        int kh = h / (NH / NKV);
        for (int i = 0; i < T; i++) {
            double mx = -1e300;
            for (int j = 0; j <= i; j++) {
                double s = 0;
                for (int d = 0; d < HS; d++) s += (double)q[(b * T + i) * qs + h * HS + d] * k[(b * T + j) * ks + kh * HS + d];
                P[i * T + j] = s * sc; if (s * sc > mx) mx = s * sc;
            }
            double z = 0;
            for (int j = 0; j <= i; j++) z += exp(P[i * T + j] - mx);
            lse[((size_t)b * NH + h) * T + i] = mx + log(z);
            for (int j = 0; j <= i; j++) P[i * T + j] = exp(P[i * T + j] - mx) / z;
            for (int d = 0; d < HS; d++) {
                double o = 0;
                for (int j = 0; j <= i; j++) o += P[i * T + j] * v[(b * T + j) * ks + kh * HS + d];
                out[(b * T + i) * qs + h * HS + d] = o;
            }
        }
        for (int i = 0; i < T; i++) {
            double rs = 0;
            for (int j = 0; j <= i; j++) {
                double s = 0;
                for (int d = 0; d < HS; d++) s += (double)dout[(b * T + i) * qs + h * HS + d] * v[(b * T + j) * ks + kh * HS + d];
                dP[i * T + j] = s; rs += s * P[i * T + j];
            }
            for (int j = 0; j <= i; j++) {
                double ds = P[i * T + j] * (dP[i * T + j] - rs) * sc;
                for (int d = 0; d < HS; d++) {
                    dq[(b * T + i) * qs + h * HS + d] += ds * k[(b * T + j) * ks + kh * HS + d];
                    dk[(b * T + j) * ks + kh * HS + d] += ds * q[(b * T + i) * qs + h * HS + d];
                    dv[(b * T + j) * ks + kh * HS + d] += P[i * T + j] * dout[(b * T + i) * qs + h * HS + d];
                }
            }
        }
    }
    free(P); free(dP);
}

static void test_attention(KBackend *kb, int B, int T, int NH, int NKV, int HS) {
    size_t nq = (size_t)B * T * NH * HS, nk = (size_t)B * T * NKV * HS, nl = (size_t)B * NH * T;
    float *q = frand(nq, 1.5), *k = frand(nk, 1.5), *v = frand(nk, 1), *dout = frand(nq, 1);
    float *out = malloc(nq * 4), *lse = malloc(nl * 4), *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
    double *wout = malloc(nq * 8), *wlse = malloc(nl * 8), *wdq = malloc(nq * 8), *wdk = malloc(nk * 8), *wdv = malloc(nk * 8);
    attn_ref(q, k, v, dout, B, T, NH, NKV, HS, wout, wlse, wdq, wdk, wdv);
    attention_forward(kb, out, lse, q, k, v, B, T, NH, NKV, HS);
    attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS);
    char name[80];
    snprintf(name, sizeof name, "attention_forward T=%d %d/%d", T, NH, NKV); check(name, out, wout, nq);
    snprintf(name, sizeof name, "attention_forward lse T=%d", T); check(name, lse, wlse, nl);
    snprintf(name, sizeof name, "attention_backward dq T=%d", T); check(name, dq, wdq, nq);
    snprintf(name, sizeof name, "attention_backward dk T=%d", T); check(name, dk, wdk, nk);
    snprintf(name, sizeof name, "attention_backward dv T=%d", T); check(name, dv, wdv, nk);
    free(q); free(k); free(v); free(dout); free(out); free(lse); free(dq); free(dk); free(dv);
    free(wout); free(wlse); free(wdq); free(wdk); free(wdv);
}

/* ---- cross-entropy --------------------------------------------------------------------------------- */
static double ce_ref(const double *x, const int *tg, const double *w, double scale, int B, int T, int V, double *losses) {
    double L = 0;
    for (int n = 0; n < B * T; n++) {
        double mx = -1e300, z = 0;
        for (int i = 0; i < V; i++) if (x[n * V + i] > mx) mx = x[n * V + i];
        for (int i = 0; i < V; i++) z += exp(x[n * V + i] - mx);
        double l = log(z) + mx - x[n * V + tg[n]];
        if (losses) losses[n] = l;
        L += scale * w[n / T] * l;
    }
    return L;
}
static void test_crossentropy(KBackend *kb) {
    const int B = 3, T = 5, V = 37, N = B * T;
    float *x = frand((size_t)N * V, 4), *losses = malloc(sizeof(float) * N), *sw = malloc(sizeof(float) * B);
    int tg[15];
    for (int n = 0; n < N; n++) tg[n] = (n * 7 + 3) % V;
    double W[3] = { 0.5, 1.0, 2.0 }, *X = dcopy(x, (size_t)N * V), *wl = malloc(sizeof(double) * N), *wd = malloc(sizeof(double) * N * V);
    for (int b = 0; b < B; b++) sw[b] = (float)W[b];
    ce_ref(X, tg, W, 1.0 / N, B, T, V, wl);
    crossentropy_forward(kb, losses, x, tg, N, V);
    check("crossentropy_forward", losses, wl, N);
    for (int i = 0; i < N * V; i++) {
        double h = 1e-6, s = X[i];
        X[i] = s + h; double fp = ce_ref(X, tg, W, 1.0 / N, B, T, V, NULL);
        X[i] = s - h; double fm = ce_ref(X, tg, W, 1.0 / N, B, T, V, NULL);
        X[i] = s; wd[i] = (fp - fm) / (2 * h);
    }
    crossentropy_backward(kb, x, tg, 1.0f / N, sw, B, T, V);
    check("crossentropy_backward (weighted)", x, wd, (size_t)N * V);
    free(x); free(losses); free(sw); free(X); free(wl); free(wd);
}

/* The backend's cache of freed memory (kernels/cpu/host_memory.c): a large block is its own whole
   pages (a 64-byte header, then the bytes); freed, its pages are kept and adjacent kept ranges
   merge; a request takes the smallest kept range that holds it, from its front, and the rest stays
   kept, or else the largest kept range grown (mremap: only the growth is fresh); what it holds
   (handed out + kept) never exceeds the most it ever handed out at once: with a block grown or
   mapped anew, kept memory goes, the smallest ranges first and the last one in part;
   blocks under 256 KiB are not kept; kbackend_destroy gives everything back. Every address below
   is derived from one block's, so the checks do not depend on where the kernel maps memory. */
static void test_host_memory(void) {
    KBackend kb;
    kbackend_cpu_init(&kb, 2);
    const size_t U = (size_t)256 << 10, page = (size_t)sysconf(_SC_PAGESIZE);
#define L(k) ((k) * U + page)                    /* the pages of a block of k·U bytes and its header */
    size_t kept, live, high, fresh;
#define STATS(k, l, h, f, what) do { kcpu_cache_stats(&kb, &kept, &live, &high, &fresh); \
        if (kept != (k) || live != (l) || high != (h) || fresh != (f) || kept + live > high) { \
            printf("FAIL host memory, %s: kept %zu, live %zu, high-water %zu, fresh %zu (want %zu %zu %zu %zu)\n", \
                   what, kept, live, high, fresh, (size_t)(k), (size_t)(l), (size_t)(h), (size_t)(f)); failures++; } } while (0)
#define SAME(p, q, what) do { if ((char *)(p) != (char *)(q)) { printf("FAIL host memory: %s\n", what); failures++; } } while (0)
    char *x = kbuf_alloc(&kb, 32 * U, "t/x");
    STATS(0, L(32), L(32), L(32), "after the first block");
    kbuf_free(&kb, x);
    STATS(L(32), 0, L(32), L(32), "after its free");
    /* three blocks carved from its pages, one after the other: nothing mapped anew (p, 100 bytes
       short of 4 U, rounds to 4 U - 64: with its header exactly 4 U, no extra page) */
    char *p = kbuf_alloc(&kb, 4 * U - 100, "t/p"), *q = kbuf_alloc(&kb, 8 * U, "t/q"), *r = kbuf_alloc(&kb, 16 * U, "t/r");
    SAME(p, x, "the first request does not take the front of the kept range");
    SAME(q, p + 4 * U, "the second request does not follow the first");
    SAME(r, q + L(8), "the third request does not follow the second");
    STATS(L(32) - 4 * U - L(8) - L(16), 4 * U + L(8) + L(16), L(32), L(32), "after three carved blocks");
    /* p and q freed merge: a request larger than either takes their pages */
    kbuf_free(&kb, q);
    kbuf_free(&kb, p);
    char *s = kbuf_alloc(&kb, 10 * U, "t/s");
    SAME(s, p, "two adjacent freed blocks do not serve a request larger than either");
    STATS(L(32) - L(16) - L(10), L(16) + L(10), L(32), L(32), "after a request served by two merged blocks");
    /* larger than anything kept: the largest kept range (x's last 4 U - 1 page) grows into it by
       mremap, only the growth fresh; a new high-water mark, so the rest kept (2 U) goes */
    char *t = kbuf_alloc(&kb, 20 * U, "t/t");
    const size_t hw = L(16) + L(10) + L(20);
    STATS(0, hw, hw, L(32) + L(20) - (4 * U - page), "after a kept range grown into a larger block");
    float *small = kbuf_alloc(&kb, 1000, "t/small");  /* not counted, never kept */
    if ((uintptr_t)s % 64 || (uintptr_t)t % 64 || (uintptr_t)small % 64) { printf("FAIL block not 64-byte aligned\n"); failures++; }
    for (size_t i = 0; i < 20 * U; i++) t[i] = (char)i;   /* usable memory */
    kbuf_free(&kb, small);
    kbuf_free(&kb, r); kbuf_free(&kb, s); kbuf_free(&kb, t);
    STATS(hw, 0, hw, L(32) + L(20) - (4 * U - page), "after every free");
    kbackend_destroy(&kb);
    if (kb.priv) { printf("FAIL kbackend_destroy left the cache\n"); failures++; }
    /* A partial trim: under the mark, a grown range leaves room for only part of another kept one,
       which keeps its front. */
    kbackend_cpu_init(&kb, 2);
    char *w = kbuf_alloc(&kb, 48 * U, "t/w");
    kbuf_free(&kb, w);
    char *a = kbuf_alloc(&kb, 8 * U, "t/a"), *b = kbuf_alloc(&kb, 8 * U, "t/b");
    kbuf_free(&kb, a);                            /* kept: a's L(8), and the last 32 U - 1 page */
    char *y = kbuf_alloc(&kb, 36 * U, "t/y");     /* grows the latter by 4 U + 2 pages; a's keeps 4 U - 1 page */
    STATS(4 * U - page, L(8) + L(36), L(48), L(48) + 4 * U + 2 * page, "after a partial trim");
    for (size_t i = 0; i < 36 * U; i++) y[i] = (char)i;
    char *v = kbuf_alloc(&kb, 3 * U, "t/v");
    SAME(v, a, "a trimmed range does not keep its front");
    STATS(4 * U - page - L(3), L(8) + L(36) + L(3), L(48), L(48) + 4 * U + 2 * page, "after a block from a trimmed range");
    kbuf_free(&kb, v); kbuf_free(&kb, y); kbuf_free(&kb, b);
#undef SAME
#undef STATS
#undef L
    kbackend_destroy(&kb);
    if (kb.priv) { printf("FAIL kbackend_destroy left the cache\n"); failures++; }
    printf("ok   host memory cache (freed pages serve any size, merged, bounded by the high-water mark)\n");
}

/* kexpf (cpu/vmath.h, the softmaxes' and SwiGLU's exp): within 2 ulp of exp in double wherever the
   result is a normal float, over [-104, 89] at 2^-10 steps and the points that bound its ranges;
   +inf above 88.72, 0 at and below -103.98, NaN for NaN, subnormals close to the true value. */
static void test_kexpf(void) {
    int bad = 0;
    double worst = 0;
    for (int i = -104 * 1024; i <= 89 * 1024; i++) {
        const float x = (float)i / 1024.0f;
        const double want = exp((double)x);
        const float got = kexpf(x);
        if (want > 3.4028234663852886e38) { bad += !(isinf(got) && got > 0); continue; }
        if (want < 1.1754943508222875e-38) { bad += !(fabs((double)got - want) <= 1.5e-45 * 1.01 || fabs((double)got - want) <= 1e-6 * want); continue; }
        const double rel = fabs((double)got - want) / want;
        if (rel > worst) worst = rel;
        bad += !(rel <= 2 * 5.96e-8);
    }
    const float specials[] = { NAN, INFINITY, -INFINITY, 88.7228f, 88.72284f, 89.0f, -87.3365f, -103.97f, -103.98f, -1e30f, 1e30f, 0.0f, -0.0f };
    const int want_inf[] = { 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0 };
    for (int i = 0; i < 13; i++) {
        const float x = specials[i], y = kexpf(x);
        if (isnan(x)) bad += !isnan(y);
        else if (want_inf[i]) bad += !(isinf(y) && y > 0);
        else if (x < -103.975f) bad += y != 0.0f;
        else bad += !(fabs((double)y - exp((double)x)) <= 2 * 5.96e-8 * exp((double)x) + 1.5e-45);
    }
    if (bad) { printf("FAIL kexpf: %d values off (worst relative error %.3g)\n", bad, worst); failures++; }
    else printf("ok   kexpf                            worst relative error %.3g (%.2f ulp)\n", worst, worst / 5.96e-8);
}

/* The plan backend past 2^64 bytes: live bytes past 1 EiB are refused with a message before the
   counts or the fake addresses wrap (3.2e19 bytes were reported as 1.8e19), and what was refused
   is not counted by the kit either. */
static void test_plan_overflow(void) {
    KBackend kb;
    kbackend_plan_init(&kb, &kops_cpu, 1);
    size_t kit0 = dpmem_live_bytes(NULL);
    void *a = kbuf_alloc(&kb, (size_t)1 << 59, "t/a"), *b = kbuf_alloc(&kb, ((size_t)1 << 59) - 4096, "t/b");
    void *c = kbuf_alloc(&kb, (size_t)1 << 13, "t/c");   /* 1 EiB + 4 KiB */
    if (!a || !b || c || kb.live != ((size_t)1 << 60) - 4096 || !strstr(kbackend_error(&kb), "t/c needs 8192 bytes") ||
        !strstr(kbackend_error(&kb), "more than 1 EiB")) {
        printf("FAIL plan past 1 EiB: a %p b %p c %p, live %zu, error '%s'\n", a, b, c, kb.live, kbackend_error(&kb));
        failures++;
    }
    void *d = kbuf_alloc(&kb, SIZE_MAX - 100, "t/d");    /* rounding it to 256 wrapped to a few bytes */
    if (d || kb.live != ((size_t)1 << 60) - 4096 || dpmem_live_bytes(NULL) != kit0 + kb.live) {
        printf("FAIL plan: a request of 2^64 - 101 bytes: %p, live %zu, kit %zu\n", d, kb.live, dpmem_live_bytes(NULL) - kit0);
        failures++;
    }
    kbuf_free(&kb, a); kbuf_free(&kb, b);
    /* fake addresses are never reused: after 2^44 + a + b (1 EiB), 14 more EiB fit below 2^64, the
       15th is refused, never wrapped */
    int refused = 0;
    uintptr_t last = 0;
    for (int i = 0; i < 20 && !refused; i++) {
        void *e = kbuf_alloc(&kb, (size_t)1 << 60, "t/e");
        if (!e) { refused = i; break; }
        if ((uintptr_t)e <= last) { printf("FAIL plan: address %p after %p (wrapped)\n", e, (void *)last); failures++; }
        last = (uintptr_t)e;
        kbuf_free(&kb, e);
    }
    if (refused != 14 || !strstr(kbackend_error(&kb), "2^64 bytes of addresses")) {
        printf("FAIL plan: the address space refused after %d rounds (want 14): '%s'\n", refused, kbackend_error(&kb));
        failures++;
    }
    kbackend_destroy(&kb);
}

int main(void) {
    test_kexpf();
    test_plan_overflow();
    test_host_memory();
    KBackend kb;
    kbackend_cpu_init(&kb, 3);   /* an odd thread count: uneven splits of rows and columns */
    test_gemm(&kb);
    test_simple(&kb);
    test_rmsnorm(&kb);
    test_rope(&kb);
    test_attention(&kb, 2, 17, 6, 2, 10);   /* GQA, one tile */
    test_attention(&kb, 1, 150, 4, 1, 8);   /* three tiles of 64 keys, MQA */
    test_attention(&kb, 1, 5, 2, 2, 4);     /* T smaller than a tile, MHA */
    test_attention(&kb, 1, 300, 2, 1, 8);   /* five blocks (4 x 64 + 44): the online softmax across them */
    test_attention(&kb, 2, 200, 4, 2, 64);  /* head size 64, blocks of 64 + 64 + 64 + 8 queries: 16-column steps and a tail */
    test_crossentropy(&kb);
    if (kb.live != 0 || kb.n_live != 0) { printf("FAIL scratch leaked: %zu bytes live\n", kb.live); failures++; }
    /* the scratch really went through kbuf_alloc: attention backward's blocks at HS=64 were the peak */
    size_t want_peak = (size_t)3 * (2 * 64 * 64 + 2 * 64 * 64) * sizeof(float);
    if (kb.peak < want_peak) { printf("FAIL scratch peak %zu < %zu\n", kb.peak, want_peak); failures++; }
    kbackend_destroy(&kb);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("all CPU kernel checks passed\n");
    return 0;
}
