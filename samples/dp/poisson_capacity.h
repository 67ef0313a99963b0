/* poisson_capacity.h — how many rows a step of Poisson sampling (--poisson) makes room for, so that a
   step drawing more (then truncated: dp.poisson_truncated) has odds below DP_POISSON_TRUNCATION_ODDS
   for the whole job: every rank, every step (a union bound over steps x ranks).

   A rank's rows in a step are Binomial(n_r, q) (n_r its rows of the dataset, at most ceil(rows/N) of
   N ranks; q the sample rate), of mean at most L + 1 (L its share of the logical batch: n_r q <= L + q).
   Anderson and Samuels (1967): for k >= np + 1 the binomial's upper tail is at most the Poisson's of the
   same mean, which grows with the mean; so the smallest k with P(Poisson(L + 1) > k) <= odds / (steps N)
   is room enough whatever the dataset's size, which the loop's shape (its physical batches per step)
   does not wait for. It was L + 6 sqrt(L) + 1, said to have odds below 1e-9 a step: the exact binomial
   tail is 2.1e-8 a step at L = 32 and 1.1e-6 at a share of one row (tests/test_dp_poisson.c).
   Plain C (math.h), header-only: the tests that predict a run's physical batches use it too. */
#ifndef DP_POISSON_CAPACITY_H
#define DP_POISSON_CAPACITY_H

#include <math.h>

#define DP_POISSON_TRUNCATION_ODDS 1e-9

/* P(X > k) for X ~ Poisson(mean), summed from k + 1 until the terms no longer count (mean > 0). */
static inline double dp_poisson_tail(double mean, long k) {
    double term = exp(-mean + (double)(k + 1) * log(mean) - lgamma((double)k + 2.0)), sum = 0;
    for (long j = k + 1; term > 0 && (term > 1e-18 * sum || (double)j < mean); j++) {
        sum += term;
        term *= mean / (double)(j + 1);
    }
    return sum;
}

/* The rows a rank's step makes room for: the smallest k >= L + 1 with P(Poisson(L + 1) > k) <= odds, odds =
   DP_POISSON_TRUNCATION_ODDS / (steps x ranks) (steps < 1 counts as 1). */
static inline long dp_poisson_capacity(double share, long steps, int ranks) {
    const double mean = share + 1.0, odds = DP_POISSON_TRUNCATION_ODDS / ((double)(steps > 1 ? steps : 1) * (ranks > 1 ? ranks : 1));
    long lo = (long)ceil(mean), hi = lo + (long)ceil(20.0 * sqrt(mean)) + 64;   /* the tail at hi is far below any odds used */
    while (lo < hi) {   /* the tail falls with k: bisect for the first k at or below the odds */
        const long mid = lo + (hi - lo) / 2;
        if (dp_poisson_tail(mean, mid) <= odds) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

#endif
