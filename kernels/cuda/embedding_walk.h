/* embedding_walk.h — one column of the embedding backward (embedding.cu's scatter: a thread per
   column walks the rows in order; no atomics, the same bits every run, the CPU's order of additions),
   EMB_WALK_ROWS rows at a time. A walk of one read-modify-write per row waits for the last at every
   row (a row's table entry may be the next row's): N dependent round trips to memory, milliseconds at
   N = 4096 tokens. Here a group's tokens, values and the table entries they touch are loaded before
   anything is written (independent loads, in flight together), the rows of one token are added into
   one register in row order, and each touched entry is stored once: every entry receives the plain
   walk's additions in the plain walk's order, so the result is the same bits.
   Plain C++ that nvcc compiles as device code: tests/test_embedding_walk.cpp runs it on the host
   against the plain walk. The weighted product and the sums are rounded as written on the device too
   (__fmul_rn/__fadd_rn: nvcc would otherwise contract w·d + v into one FMA, another rounding that the
   host test cannot see). A token outside [0, V) is skipped and counted (the caller reports it: a write
   at tokens[n]·C would land outside the table; the trainer's loader rejects such tokens before upload).
   Not here: the launch (embedding.cu), the loads of bf16 (the caller's Load). */
#ifndef KCUDA_EMBEDDING_WALK_H
#define KCUDA_EMBEDDING_WALK_H

#include <stddef.h>

#ifdef __CUDACC__
#define EMB_WALK_FN __device__ __forceinline__
#define EMB_WALK_UNROLL _Pragma("unroll")
#else
#define EMB_WALK_FN inline
#define EMB_WALK_UNROLL
#endif
#ifdef __CUDA_ARCH__
#define EMB_WALK_MUL(a, b) __fmul_rn(a, b)   /* never contracted into an FMA */
#define EMB_WALK_ADD(a, b) __fadd_rn(a, b)
#else
#define EMB_WALK_MUL(a, b) ((a) * (b))       /* the host: C++ rounds each operation as written */
#define EMB_WALK_ADD(a, b) ((a) + (b))
#endif

enum { EMB_WALK_ROWS = 8 };   /* rows in flight per thread; every index below is a constant once unrolled */

/* dwte[tokens[n]·C + c] += w_n · load(dout, n·C + c) for n = 0..N-1 in order; dwte has V rows. w == NULL:
   no weight; else w_n = w[n / T], and a row with w_n == 0 is skipped (a dropped sample: 0 · NaN would be
   NaN). Returns the number of rows skipped for a token outside [0, V) (nothing written for them). */
template <typename E, typename Load>
EMB_WALK_FN int embedding_walk_column(float *dwte, const int *tokens, const E *dout, const float *w,
                                      int N, int T, int C, int V, int c, Load load) {
    int bad = 0;
    for (int n0 = 0; n0 < N; n0 += EMB_WALK_ROWS) {
        int tok[EMB_WALK_ROWS], owner[EMB_WALK_ROWS];
        float d[EMB_WALK_ROWS], v[EMB_WALK_ROWS];
        EMB_WALK_UNROLL
        for (int k = 0; k < EMB_WALK_ROWS; k++) {
            const int n = n0 + k;
            tok[k] = -1;                          /* -1: no row (past N) or a skipped one */
            d[k] = 0.0f;
            if (n >= N) continue;
            const float wn = w ? w[n / T] : 1.0f;
            if (wn == 0.0f) continue;
            const int t = tokens[n];
            if (t < 0 || t >= V) { bad++; continue; }
            tok[k] = t;
            d[k] = load(dout, (size_t)n * C + c);
            if (w) d[k] = EMB_WALK_MUL(d[k], wn);
        }
        EMB_WALK_UNROLL
        for (int k = 0; k < EMB_WALK_ROWS; k++) {  /* the group's first row of a token owns its register */
            owner[k] = k;
            EMB_WALK_UNROLL
            for (int j = k - 1; j >= 0; j--)
                if (tok[j] == tok[k]) owner[k] = j;
            v[k] = tok[k] >= 0 && owner[k] == k ? dwte[(size_t)tok[k] * C + c] : 0.0f;
        }
        EMB_WALK_UNROLL
        for (int k = 0; k < EMB_WALK_ROWS; k++) {  /* row order: the plain walk's order for each entry */
            EMB_WALK_UNROLL
            for (int j = 0; j <= k; j++)
                if (tok[k] >= 0 && owner[k] == j) v[j] = EMB_WALK_ADD(v[j], d[k]);
        }
        EMB_WALK_UNROLL
        for (int k = 0; k < EMB_WALK_ROWS; k++)
            if (tok[k] >= 0 && owner[k] == k) dwte[(size_t)tok[k] * C + c] = v[k];
    }
    return bad;
}

#endif
