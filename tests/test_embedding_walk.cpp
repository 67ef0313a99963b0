/* test_embedding_walk.cpp — the GPU embedding backward's column walk (kernels/cuda/embedding_walk.h,
   run by embedding.cu a thread per column) on the host, against the plain walk it replaced (one
   read-modify-write per row, in row order): bit for bit, fp32 and bf16 values, with and without
   per-sample weights (book-keeping DP, zeros for dropped samples whose values are NaN), on token
   streams from 1 to 5000 distinct tokens (many repeats inside a group of rows, and none), and N not a
   multiple of the group. Also that the walk's group is > 1 (it would be the plain walk again), and that
   tokens outside [0, V) are skipped and counted: the rows past the table (a guard in the same buffer)
   keep their values. */
#include "cuda/embedding_walk.h"
#include "kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static int failures, checks;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

struct LoadF32 { float operator()(const float *p, size_t i) const { return p[i]; } };
struct LoadBF16 { float operator()(const uint16_t *p, size_t i) const { return kbf16_to_f32(p[i]); } };

/* the walk before: embedding.cu's kernel body up to 2026-11-26, and a token outside [0, V) skipped */
template <typename E, typename Load>
static void plain_walk(float *dwte, const int *tokens, const E *dout, const float *w, int N, int T, int C, int V,
                       int c, Load load) {
    for (int n = 0; n < N; n++) {
        float d = load(dout, (size_t)n * C + c);
        if (w) {
            const float wn = w[n / T];
            if (wn == 0.0f) continue;
            d *= wn;
        }
        if (tokens[n] < 0 || tokens[n] >= V) continue;
        dwte[(size_t)tokens[n] * C + c] += d;
    }
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)rng; }
static float uniform(void) { return (float)(next() >> 8) / 16777216.0f * 2.0f - 1.0f; }

template <typename E, typename Load>
static void run(const char *what, int V, int B, int T, int C, int weighted, int bad, E (*make)(float), Load load) {
    const int N = B * T, GUARD = 4;   /* rows past the table in the same buffer: never written */
    std::vector<int> tok(N);
    std::vector<E> dout((size_t)N * C);
    std::vector<float> w(B), ref((size_t)(V + GUARD) * C), got;
    for (int n = 0; n < N; n++) tok[n] = (int)(next() % (uint32_t)V);
    int expect_bad = 0;
    if (bad)   /* out of range: V (the first guard row), V + 3, -1, INT_MIN; every 7th row */
        for (int n = 0; n < N; n += 7) {
            const int k = n / 7 % 4;
            tok[n] = k == 0 ? V : k == 1 ? V + 3 : k == 2 ? -1 : INT32_MIN;
            expect_bad += !weighted || (n / T) % 3 != 1;   /* a dropped sample's rows are not read */
        }
    for (size_t i = 0; i < dout.size(); i++) dout[i] = make(uniform());
    for (size_t i = 0; i < ref.size(); i++) ref[i] = uniform();
    for (int b = 0; b < B; b++) w[b] = b % 3 == 1 ? 0.0f : 0.25f + (float)b / 7.0f;
    if (weighted)   /* a dropped sample's values are not finite: the walk must not touch them */
        for (int b = 0; b < B; b++)
            if (w[b] == 0.0f) for (size_t i = (size_t)b * T * C; i < (size_t)(b + 1) * T * C; i++) dout[i] = make(NAN);
    got = ref;
    const float *wp = weighted ? w.data() : NULL;
    int wrong_count = 0;
    for (int c = 0; c < C; c++) {
        plain_walk(ref.data(), tok.data(), dout.data(), wp, N, T, C, V, c, load);
        wrong_count += embedding_walk_column(got.data(), tok.data(), dout.data(), wp, N, T, C, V, c, load) != expect_bad;
    }
    CHECK(wrong_count == 0, "%s: %d columns counted other than %d rows with a token outside [0, %d)", what,
          wrong_count, expect_bad, V);
    std::vector<float> guard(ref.begin() + (ptrdiff_t)V * C, ref.end());
    size_t differ = 0, nonfinite = 0, guard_written = 0;
    for (size_t i = (size_t)V * C; i < got.size(); i++) guard_written += memcmp(&got[i], &guard[i - (size_t)V * C], 4) != 0;
    CHECK(guard_written == 0, "%s: %zu entries past the table's %d rows written", what, guard_written, V);
    for (size_t i = 0; i < ref.size(); i++) {
        differ += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
        nonfinite += !isfinite(got[i]);
    }
    CHECK(differ == 0, "%s: %zu of %zu table entries differ from the plain walk", what, differ, ref.size());
    CHECK(nonfinite == 0, "%s: %zu entries not finite (a dropped sample leaked in)", what, nonfinite);
    printf("%-46s V=%-5d B=%d T=%-4d C=%d: %zu entries, bit for bit%s\n", what, V, B, T, C, ref.size(),
           bad ? ", tokens outside [0, V) skipped" : "");
}

static float f32(float x) { return x; }
static uint16_t bf16(float x) { return kbf16_from_f32(x); }

int main(void) {
    CHECK(EMB_WALK_ROWS > 1, "the walk's group is %d rows: that is the plain walk", (int)EMB_WALK_ROWS);
    const int Vs[4] = { 1, 3, 50, 5000 };
    for (int v = 0; v < 4; v++)
        for (int bad = 0; bad < 2; bad++) {
            run("fp32, no weights", Vs[v], 1, 203, 5, 0, bad, f32, LoadF32());
            run("fp32, per-sample weights (a dropped sample)", Vs[v], 4, 37, 3, 1, bad, f32, LoadF32());
            run("bf16, no weights", Vs[v], 2, 64, 4, 0, bad, bf16, LoadBF16());
            run("bf16, per-sample weights (a dropped sample)", Vs[v], 5, 13, 2, 1, bad, bf16, LoadBF16());
        }
    if (failures) { fprintf(stderr, "test_embedding_walk: %d of %d checks failed\n", failures, checks); return 1; }
    printf("test_embedding_walk: all %d checks passed\n", checks);
    return 0;
}
