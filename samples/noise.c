/* noise.c — adding DP-SGD's Gaussian noise to a gradient (see noise.h for the exact stream).

   Works block by block (4 coordinates per Philox call) and handles a tensor that starts or ends in
   the middle of a block, so that splitting the flat parameter vector into tensors (or the work into
   threads) never changes a value. Not here: the GPU kernel (kernels/cuda does it with the same inline functions). */
#include "noise.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static void add_range(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset) {
    size_t i = 0;
    while (i < n) {
        uint64_t idx = offset + i, j = idx / 4;
        double z[4];
        noise_normal4(seed, step, j, z);
        for (unsigned k = (unsigned)(idx % 4); k < 4 && i < n; k++, i++) x[i] += (float)(std * z[k]);
    }
}

/* Chunks of 16384 coordinates on the OpenMP threads (when built with -fopenmp): each value depends
   only on its index, so the split changes nothing. */
void noise_add_gaussian(float *x, size_t n, double std, uint64_t seed, uint64_t step, uint64_t offset) {
    const size_t chunk = 16384;
    const long long nchunks = (long long)((n + chunk - 1) / chunk);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nchunks > 1)
#endif
    for (long long k = 0; k < nchunks; k++) {
        size_t start = (size_t)k * chunk, len = n - start < chunk ? n - start : chunk;
        add_range(x + start, len, std, seed, step, offset + start);
    }
}

void noise_privatize(float *g, size_t n, double sigma, double max_grad_norm, double logical_batch,
                     uint64_t seed, uint64_t step, uint64_t offset) {
    if (sigma > 0) noise_add_gaussian(g, n, sigma * max_grad_norm, seed, step, offset);
    float inv = (float)(1.0 / logical_batch);
    for (size_t i = 0; i < n; i++) g[i] *= inv;
}

uint64_t noise_secure_seed(int *ok) {
    uint64_t seed = 0;
    unsigned char *p = (unsigned char *)&seed;
    size_t got = 0;
    while (got < sizeof seed) {
        ssize_t r = getrandom(p + got, sizeof seed - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "noise: getrandom() failed (%s): cannot make a secure seed\n", strerror(errno));
            if (ok) *ok = 0;
            return 0;
        }
        got += (size_t)r;
    }
    if (ok) *ok = 1;
    return seed;
}
