/* embedding_walk.h — one column of the embedding backward (embedding.cu's scatter: a thread per
   column walks the rows in order; no atomics, the same bits every run, the CPU's order of additions),
   EMB_WALK_ROWS rows at a time. A walk of one read-modify-write per row waits for the last at every
   row (a row's table entry may be the next row's): N dependent round trips to memory, milliseconds at
   N = 4096 tokens. Here a group's tokens, values and the table entries they touch are loaded before
   anything is written (independent loads, in flight together), the rows of one token are added into
   one register in row order, and each touched entry is stored once: every entry receives the plain
   walk's additions in the plain walk's order, so the result is the same bits.
   Plain C++ that nvcc compiles as device code: tests/test_embedding_walk.cpp runs it on the host
   against the plain walk. Not here: the launch (embedding.cu), the loads of bf16 (the caller's Load). */
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

enum { EMB_WALK_ROWS = 8 };   /* rows in flight per thread; every index below is a constant once unrolled */

/* dwte[tokens[n]·C + c] += w_n · load(dout, n·C + c) for n = 0..N-1 in order. w == NULL: no weight;
   else w_n = w[n / T], and a row with w_n == 0 is skipped (a dropped sample: 0 · NaN would be NaN). */
template <typename E, typename Load>
EMB_WALK_FN void embedding_walk_column(float *dwte, const int *tokens, const E *dout, const float *w,
                                       int N, int T, int C, int c, Load load) {
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
            tok[k] = tokens[n];
            d[k] = load(dout, (size_t)n * C + c);
            if (w) d[k] *= wn;
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
                if (tok[k] >= 0 && owner[k] == j) v[j] += d[k];
        }
        EMB_WALK_UNROLL
        for (int k = 0; k < EMB_WALK_ROWS; k++)
            if (tok[k] >= 0 && owner[k] == k) dwte[(size_t)tok[k] * C + c] = v[k];
    }
}

#endif
