/* test_secure_noise.c — the cryptographic noise stream (kernels/secure_noise.h, kernels/cpu/secure_noise.c).

   Checks: ChaCha20's block function gives RFC 8439's known answers (§2.3.2's block, Appendix A.1's
   zero-key block) and its keystream encrypts §2.4.2's plaintext to the RFC's ciphertext byte for byte;
   z(key, step, index) is the documented mapping (the block's words → a 128-bit u and a 32-bit θ →
   Box-Muller) worked out here with libm; its largest |z| is √(258 ln 2) on the extreme words; the batch
   (ChaCha20 in vector lanes) gives the scalar values bit for bit, across the 2³² carry of the block
   index; the privatize pass is the documented rounding to the grid, bit for bit, at any offset, split
   into tensors or run on 1 or 3 threads; a gradient moved within its grid cell gives the same output
   bits (what the floating-point attack reads is gone), where the Philox path's output moves; over 2²⁰
   coordinates the values have mean 0, std 1, 68.27 % within one std and 0.27 % beyond three;
   the sensitivity the grid adds (the accountant's σ), Poisson's take rate and purity; two random keys differ. */
#include "secure_noise.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

static void le_words(const unsigned char *b, uint32_t *w, int n) {
    for (int i = 0; i < n; i++) w[i] = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;
}

static void rfc8439(void) {
    unsigned char kb[32];
    for (int i = 0; i < 32; i++) kb[i] = (unsigned char)i;   /* 00:01:02:...:1f */
    uint32_t key[8], out[16];
    le_words(kb, key, 8);
    /* §2.3.2: nonce 00:00:00:09:00:00:00:4a:00:00:00:00, block count 1 */
    const unsigned char nb1[12] = { 0, 0, 0, 0x09, 0, 0, 0, 0x4a, 0, 0, 0, 0 };
    uint32_t nonce[3];
    le_words(nb1, nonce, 3);
    chacha20_block(key, 1, nonce, out);
    const uint32_t want1[16] = { 0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033, 0x9aaa2204, 0x4e6cd4c3,
                                 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9, 0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2 };
    for (int i = 0; i < 16; i++) CHECK(out[i] == want1[i], "RFC 8439 2.3.2 word %d: %08x, want %08x", i, out[i], want1[i]);
    /* Appendix A.1, test vector #1: key 0, nonce 0, block count 0 */
    const uint32_t zk[8] = { 0 }, zn[3] = { 0 };
    chacha20_block(zk, 0, zn, out);
    const uint32_t want0[16] = { 0xade0b876, 0x903df1a0, 0xe56a5d40, 0x28bd8653, 0xb819d2bd, 0x1aed8da0, 0xccef36a8, 0xc70d778b,
                                 0x7c5941da, 0x8d485751, 0x3fe02477, 0x374ad8b8, 0xf4b8436a, 0x1ca11815, 0x69b687c3, 0x8665eeb2 };
    for (int i = 0; i < 16; i++) CHECK(out[i] == want0[i], "RFC 8439 A.1 #1 word %d: %08x, want %08x", i, out[i], want0[i]);
    /* §2.4.2: nonce 00:00:00:00:00:00:00:4a:00:00:00:00, initial counter 1, the sunscreen text */
    const char *pt = "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    const unsigned char ct[114] = {
        0x6e, 0x2e, 0x35, 0x9a, 0x25, 0x68, 0xf9, 0x80, 0x41, 0xba, 0x07, 0x28, 0xdd, 0x0d, 0x69, 0x81,
        0xe9, 0x7e, 0x7a, 0xec, 0x1d, 0x43, 0x60, 0xc2, 0x0a, 0x27, 0xaf, 0xcc, 0xfd, 0x9f, 0xae, 0x0b,
        0xf9, 0x1b, 0x65, 0xc5, 0x52, 0x47, 0x33, 0xab, 0x8f, 0x59, 0x3d, 0xab, 0xcd, 0x62, 0xb3, 0x57,
        0x16, 0x39, 0xd6, 0x24, 0xe6, 0x51, 0x52, 0xab, 0x8f, 0x53, 0x0c, 0x35, 0x9f, 0x08, 0x61, 0xd8,
        0x07, 0xca, 0x0d, 0xbf, 0x50, 0x0d, 0x6a, 0x61, 0x56, 0xa3, 0x8e, 0x08, 0x8a, 0x22, 0xb6, 0x5e,
        0x52, 0xbc, 0x51, 0x4d, 0x16, 0xcc, 0xf8, 0x06, 0x81, 0x8c, 0xe9, 0x1a, 0xb7, 0x79, 0x37, 0x36,
        0x5a, 0xf9, 0x0b, 0xbf, 0x74, 0xa3, 0x5b, 0xe6, 0xb4, 0x0b, 0x8e, 0xed, 0xf2, 0x78, 0x5e, 0x42,
        0x87, 0x4d };
    CHECK(strlen(pt) == 114, "the plaintext is 114 bytes, not %zu", strlen(pt));
    const unsigned char nb2[12] = { 0, 0, 0, 0, 0, 0, 0, 0x4a, 0, 0, 0, 0 };
    le_words(nb2, nonce, 3);
    int same = 1;
    for (int b = 0; b * 64 < 114; b++) {
        chacha20_block(key, 1u + (uint32_t)b, nonce, out);
        for (int i = 0; i < 64 && b * 64 + i < 114; i++) {
            const unsigned char ks = (unsigned char)(out[i / 4] >> (8 * (i % 4)));
            same &= (unsigned char)(pt[b * 64 + i] ^ ks) == ct[b * 64 + i];
        }
    }
    CHECK(same, "RFC 8439 2.4.2: the keystream from counter 1 must encrypt the sunscreen text to the RFC's ciphertext");
}

static const SecureKey KEY = {{ 0x01234567u, 0x89abcdefu, 0xdeadbeefu, 0xcafef00du, 0x0badf00du, 0x13579bdfu, 0x2468ace0u, 0xfeedfaceu }};

/* The documented mapping, by hand (libm's log, cos, sin; u summed in long double). */
static double z_by_hand(const SecureKey *key, uint64_t step, uint64_t i) {
    const uint64_t j = i / 6;
    const uint32_t nonce[3] = { (uint32_t)(j >> 32), (uint32_t)step, 0x5A4E5044u ^ (uint32_t)(step >> 32) };
    uint32_t w[16];
    chacha20_block(key->k, (uint32_t)j, nonce, w);
    const int p = (int)(i % 6) / 2;
    const uint32_t *v = w + 5 * p;
    long double u = ((((long double)v[0] * 4294967296.0L + v[1]) * 4294967296.0L + v[2]) * 4294967296.0L + v[3] + 0.5L)
                    * powl(2.0L, -128);
    const double rad = sqrt(-2.0 * (double)logl(u)), th = 2 * M_PI * (v[4] / 4294967296.0);
    return i % 2 ? rad * sin(th) : rad * cos(th);
}

static void stream(void) {
    for (uint64_t i = 0; i < 60; i++) {
        const double z = secure_noise_z(&KEY, 7, i), h = z_by_hand(&KEY, 7, i);
        CHECK(fabs(z - h) < 1e-12 * (1 + fabs(h)), "coordinate %llu: z %.17g, by hand %.17g", (unsigned long long)i, z, h);
    }
    /* the index's high word and the step's high word reach the nonce */
    CHECK(secure_noise_z(&KEY, 7, 6ull << 32) != secure_noise_z(&KEY, 7, 0), "block 2^32 must differ from block 0");
    CHECK(secure_noise_z(&KEY, 7 + (1ull << 32), 0) != secure_noise_z(&KEY, 7, 0), "step 2^32 + 7 must differ from step 7");
    CHECK(secure_noise_z(&KEY, 8, 0) != secure_noise_z(&KEY, 7, 0), "another step, another value");
    SecureKey k2 = KEY;
    k2.k[7] ^= 1;
    CHECK(secure_noise_z(&k2, 7, 0) != secure_noise_z(&KEY, 7, 0), "the key's last word must matter");
    /* the largest |z|: u = 2^-129 (four zero words), θ = 0 */
    const uint32_t w0[16] = { 0 };
    double zc, zs;
    secure_noise_pair(w0, 0, &zc, &zs);
    CHECK(fabs(zc - SECURE_NOISE_Z_MAX) < 1e-12 && zs == 0, "u = 2^-129: z = (%.17g, %g), want (%.17g, 0)", zc, zs, SECURE_NOISE_Z_MAX);
    CHECK(fabs(SECURE_NOISE_Z_MAX - sqrt(258 * log(2.0))) < 1e-13, "SECURE_NOISE_Z_MAX must be sqrt(258 ln 2)");
    /* the batch (vector lanes) = the scalar definition, bit for bit, across the carry of j's low word */
    const uint64_t starts[3] = { 0, 0xFFFFFFF8ull, 12345 };
    long differ = 0;
    for (int t = 0; t < 3; t++) {
        double z[6][SECURE_NOISE_BATCH];
        secure_noise_batch(&KEY, 3, starts[t], z);
        for (int i = 0; i < SECURE_NOISE_BATCH; i++)
            for (int c = 0; c < 6; c++) differ += z[c][i] != secure_noise_z(&KEY, 3, 6 * (starts[t] + (uint64_t)i) + (uint64_t)c);
    }
    CHECK(differ == 0, "secure_noise_batch differs from secure_noise_z in %ld values", differ);
}

/* The privatized value, by hand: the grid of σC, rint from libm. */
static float privatized_by_hand(float g, double std, double L, const SecureKey *key, uint64_t step, uint64_t i) {
    int e;
    frexp(std, &e);
    const double lam = ldexp(1.0, e - 1 - 28);
    const double q = rint((double)g / lam), k = rint(std / lam * secure_noise_z(key, step, i));
    return (float)((q + k) * lam) * (float)(1.0 / L);
}

static void privatize(void) {
    const size_t n = 40000;
    const double sigma = 1.3, C = 0.7, L = 5;
    float *g = malloc(n * sizeof *g), *h = malloc(n * sizeof *h);
    const uint64_t offsets[3] = { 0, 1001, 6 * 96 * 3 + 5 };
    for (int o = 0; o < 3; o++) {
        for (size_t i = 0; i < n; i++) g[i] = (float)sin((double)i) * 3.0f;
        memcpy(h, g, n * sizeof *h);
        secure_noise_privatize(g, n, sigma, C, L, &KEY, 9, offsets[o]);
        long differ = 0;
        for (size_t i = 0; i < n; i++) differ += g[i] != privatized_by_hand(h[i], sigma * C, L, &KEY, 9, offsets[o] + i);
        CHECK(differ == 0, "secure_noise_privatize at offset %llu: %ld values differ from the documented rounding",
              (unsigned long long)offsets[o], differ);
    }
    /* tensors cut anywhere, and 1 or 3 threads: the same bits */
    for (size_t i = 0; i < n; i++) g[i] = h[i] = (float)cos((double)i);
    omp_set_num_threads(1);
    secure_noise_privatize(g, n, sigma, C, L, &KEY, 2, 17);
    omp_set_num_threads(3);
    const size_t cuts[5] = { 0, 5, 97, 20011, n };
    for (int t = 0; t < 4; t++) secure_noise_privatize(h + cuts[t], cuts[t + 1] - cuts[t], sigma, C, L, &KEY, 2, 17 + cuts[t]);
    CHECK(!memcmp(g, h, n * sizeof *g), "tensor by tensor on 3 threads must equal the flat vector on 1 thread");
    /* σ = 0: only the division by L */
    float one[3] = { 1, -2, 4 };
    secure_noise_privatize(one, 3, 0.0, 1.0, 8, &KEY, 1, 0);
    CHECK(one[0] == 0.125f && one[1] == -0.25f && one[2] == 0.5f, "sigma 0 must only divide by L");
    free(g);
    free(h);
}

/* The attack's handle: an output that moves with g's low bits. Two gradients within one grid cell
   (Λ = 2^-28 σC; gradients below 2^-6 σC, whose float spacing is finer than Λ) give the same
   privatized bits here; through the Philox path (noise_privatize) they do not. */
static void same_cell(void) {
    const double sigma = 1.0, C = 1.0;   /* Λ = 2^-28 */
    const int n = 4096;
    float *a = malloc(4 * n * sizeof *a), *b = a + n, *pa = b + n, *pb = pa + n;
    int same = 1, philox_same = 1;
    for (int i = 0; i < n; i++) {
        a[i] = pa[i] = (float)(i % 600 + 1) * 0x1p-20f;              /* on the grid */
        b[i] = pb[i] = a[i] + 0x1p-31f * (float)(1 + i % 3);         /* 1 to 3 · 2^-31: within Λ/2 = 2^-29, exact in float */
    }
    secure_noise_privatize(a, (size_t)n, sigma, C, 1, &KEY, 4, 0);
    secure_noise_privatize(b, (size_t)n, sigma, C, 1, &KEY, 4, 0);
    noise_privatize(pa, (size_t)n, sigma, C, 1, 99, 4, 0);
    noise_privatize(pb, (size_t)n, sigma, C, 1, 99, 4, 0);
    for (int i = 0; i < n; i++) { same &= a[i] == b[i]; philox_same &= pa[i] == pb[i]; }
    CHECK(same, "gradients within one grid cell must give the same privatized bits");
    CHECK(!philox_same, "the Philox path's output moves with the gradient's low bits (the attack's handle): the check above is not vacuous");
    free(a);
}

static void moments(void) {
    const size_t n = 1 << 20;
    double s = 0, s2 = 0;
    long in1 = 0, out3 = 0, beyond = 0;
    for (size_t i = 0; i < n; i++) {
        const double z = secure_noise_z(&KEY, 11, i);
        s += z; s2 += z * z;
        in1 += fabs(z) <= 1;
        out3 += fabs(z) > 3;
        beyond += fabs(z) > SECURE_NOISE_Z_MAX;
    }
    const double mean = s / n, sd = sqrt(s2 / n - mean * mean);
    CHECK(fabs(mean) < 5 / sqrt((double)n), "mean %.6f", mean);
    CHECK(fabs(sd - 1) < 5 * sqrt(0.5 / n), "std %.6f", sd);
    CHECK(fabs((double)in1 / n - 0.682689) < 5 * sqrt(0.6827 * 0.3173 / n), "P(|z| <= 1) = %.5f", (double)in1 / n);
    CHECK(fabs((double)out3 / n - 0.0026998) < 5 * sqrt(0.0027 / n), "P(|z| > 3) = %.5f", (double)out3 / n);
    CHECK(beyond == 0, "%ld values beyond the bound", beyond);
}

static void accountant_and_poisson(void) {
    /* σC = 1: Λ = 2^-28; d = 2^20: Λ√d = 2^-18, so σ_acc = 1 / (1 + 2^-18) (zero-out), 1 / (2 + 2^-18) (replace-one) */
    CHECK(secure_noise_sigma_for_accountant(1.0, 1.0, 1, 1048576.0) == 1.0 / (1.0 + 0x1p-18), "sigma for the accountant, zero-out");
    CHECK(secure_noise_sigma_for_accountant(1.0, 1.0, 2, 1048576.0) == 1.0 / (2.0 + 0x1p-18), "sigma for the accountant, replace-one");
    const SecureGrid gr = secure_noise_grid(3.0);   /* 3 = 1.5·2^1: Λ = 2^(1 − 28), 3/Λ = 1.5·2^28 */
    CHECK(gr.lambda == 0x1p-27 && gr.cells_per_std == 0x1.8p28, "grid of 3: lambda %g, cells %g", gr.lambda, gr.cells_per_std);
    CHECK(secure_noise_rint(2.5) == 2 && secure_noise_rint(-3.5) == -4 && secure_noise_rint(0x1p60) == 0x1p60 &&
          secure_noise_rint(-0.4) == 0 && secure_noise_rint(4503599627370495.5) == 4503599627370496.0,
          "rint: ties to even, large values kept");
    /* Poisson: the rate drawn is q (within 5 standard errors over 10^6 rows), the draw a pure function */
    const double q = 0.01;
    const uint64_t q64 = secure_noise_q64(q);
    long taken = 0, again = 0;
    for (uint64_t row = 0; row < 1000000; row++) {
        const int t = secure_noise_poisson_take(&KEY, 5, row, q64);
        taken += t;
        again += t == secure_noise_poisson_take(&KEY, 5, row, q64);
    }
    CHECK(fabs(taken / 1e6 - q) < 5 * sqrt(q * (1 - q) / 1e6), "Poisson rate %.6f, want %g", taken / 1e6, q);
    CHECK(again == 1000000, "the draw must be a pure function of (key, step, row)");
    CHECK(secure_noise_q64(0) == 0 && secure_noise_q64(1) == UINT64_MAX && secure_noise_q64(0.5) == 0x8000000000000000ull, "q64");
    SecureKey a, b;
    CHECK(secure_noise_key_random(&a) && secure_noise_key_random(&b), "getrandom()");
    CHECK(memcmp(&a, &b, sizeof a) != 0, "two random keys must differ");
}

int main(void) {
    rfc8439();
    stream();
    privatize();
    same_cell();
    moments();
    accountant_and_poisson();
    if (failures) { printf("test_secure_noise: %d of %d checks failed\n", failures, checks); return 1; }
    printf("test_secure_noise: all %d checks passed\n", checks);
    return 0;
}
