/* test_dp_poisson.c — the room a step of Poisson sampling (--poisson) makes for its rows, against the
   exact binomial tail (issue 49): a rank's rows in a step are Binomial(n_r, q); the loop holds
   grad_accum x P of them and truncates a draw above that (dp.poisson_truncated). The claim (docs/
   DP_METHODS.md): the odds of any truncation in the job, every rank and every step, are below 1e-9.

   Checked:
     - the capacity dp_sgd_prepare gives the loop (grad_accum x P) against the exact binomial tail
       P(Binomial(n_r, q) > capacity), summed in long double from the log-pmf: x steps x ranks <= 1e-9
       for shares L of 1, 2, 8, 32, 256 and 4096 rows, 1 and 100 steps, 1 and 8 ranks (the plan of one rank
       of 8), on 65536 rows (the synthetic data's) and on a dataset just large enough (q near 1). The old
       room, L + 6 sqrt(L) + 1, had 2.1e-8 a step at L = 32 and 1.1e-6 at L = 1 (checked here too, as the
       figures the issue measured);
     - poisson_capacity.h's Poisson tail against a direct sum, and its capacity the smallest that meets
       the odds (one row less does not). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"
#include "dp/poisson_capacity.h"
#include "llama/comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
    printf(__VA_ARGS__); printf("\n"); } } while (0)

/* P(X > k), X ~ Binomial(n, q): the terms from k + 1 up, each from the log-pmf (lgamma), in long double. */
static double binomial_tail(long n, double q, long k) {
    if (k >= n) return 0;
    if (q >= 1) return 1;
    long double sum = 0;
    for (long j = k + 1; j <= n; j++) {
        long double lp = lgammal((long double)n + 1) - lgammal((long double)j + 1) - lgammal((long double)(n - j) + 1) +
                         (long double)j * logl((long double)q) + (long double)(n - j) * log1pl(-(long double)q);
        long double t = expl(lp);
        sum += t;
        if (t < 1e-25L * sum && (double)j > n * q) break;
    }
    return (double)sum;
}

/* The rows the trainer's loop holds per step and rank: dp_sgd_prepare's grad_accum x P. */
static long loop_capacity(int L, int P, int steps, int ranks) {
    TrainConfig c;
    config_defaults(&c);
    c.batch_size = L; c.steps = steps; c.quiet = 2;
    g_comm.world = ranks; g_comm.rank = 0;   /* (dp_sgd_prepare reads the job's size: the plan of one rank of `ranks`) */
    DpConfig dp;
    DpSgd d;
    TrainStrategy st;
    dp_config_defaults(&dp, DP_NORM_GHOST, DP_CLIP_TWOPASS);
    dp.poisson = 1; dp.max_physical_batch = P;
    memset(&st, 0, sizeof st);
    if (dp_sgd_prepare(&d, &st, &dp, &c, "poisson")) { printf("FAIL: dp_sgd_prepare L %d P %d\n", L, P); exit(1); }
    g_comm.world = 1;
    return (long)c.grad_accum * P;
}

static void test_loop_capacity(void) {
    static const int shares[] = { 1, 2, 8, 32, 256, 4096 }, steps[] = { 1, 100 }, ranks[] = { 1, 8 };
    for (size_t a = 0; a < sizeof shares / sizeof *shares; a++)
        for (size_t b = 0; b < 2; b++)
            for (size_t r = 0; r < 2; r++) {
                const int L = shares[a], N = ranks[r];
                const long cap = loop_capacity(L, 1, steps[b], N);
                for (int big = 0; big < 2; big++) {
                    const long rows = big ? 65536L * N : (long)L * N + N;   /* q = L N / rows; rank 0's rows: ceil(rows / N) */
                    const double q = (double)L * N / (double)rows;
                    const long n_r = (rows + N - 1) / N;
                    const double job = binomial_tail(n_r, q, cap) * steps[b] * N;
                    CHECK(job <= 1e-9, "L %d, %d steps, %d ranks, %ld rows: room for %ld rows a step, the odds of a truncation "
                          "in the job %.3g (binomial tail x steps x ranks), above 1e-9", L, steps[b], N, rows, cap, job);
                }
            }
    /* a physical batch of P: the capacity is the room rounded up to whole physical batches */
    CHECK(loop_capacity(32, 16, 1, 1) == 16 * ((dp_poisson_capacity(32, 1, 1) + 15) / 16), "P 16: %ld", loop_capacity(32, 16, 1, 1));
    /* the old room L + 6 sqrt(L) + 1 at the two cases (the exact tails it measured) */
    const double t32 = binomial_tail(65536, 32.0 / 65536, (long)ceil(32 + 6 * sqrt(32.0) + 1)),
                 t1 = binomial_tail(65536, 1.0 / 65536, (long)ceil(1 + 6 + 1));
    CHECK(fabs(t32 - 2.091e-8) < 0.01e-8 && fabs(t1 - 1.1247e-6) < 0.001e-6, "the old room's tails %.4g (L 32), %.5g (L 1)", t32, t1);
    printf("ok   the loop's room for a step's rows: the job's odds of a truncation <= 1e-9 against the exact binomial tail "
           "(L 32, 1 step: %ld rows, tail %.3g; the old %ld had %.3g)\n", loop_capacity(32, 1, 1, 1),
           binomial_tail(65536, 32.0 / 65536, loop_capacity(32, 1, 1, 1)), (long)ceil(32 + 6 * sqrt(32.0) + 1), t32);
}

static void test_poisson_tail(void) {
    for (double mean = 1.5; mean < 5000; mean *= 3.7) {
        const long k = (long)(mean + 5 * sqrt(mean)) + 2;
        long double direct = 0;   /* 1 - the cdf would cancel: the terms above k, each from its log-pmf */
        for (long j = k + 1; j < k + 2000 + (long)(40 * sqrt(mean)); j++)
            direct += expl(-(long double)mean + (long double)j * logl((long double)mean) - lgammal((long double)j + 1));
        const double got = dp_poisson_tail(mean, k);
        CHECK(fabs(got - (double)direct) <= 1e-9 * (double)direct, "Poisson(%g) tail above %ld: %.12g, direct %.12g", mean, k, got,
              (double)direct);
        const long cap = dp_poisson_capacity(mean - 1, 10, 3);
        const double odds = 1e-9 / 30;
        CHECK(dp_poisson_tail(mean, cap) <= odds && dp_poisson_tail(mean, cap - 1) > odds, "capacity %ld at mean %g is not the smallest "
              "with the tail <= %g (%.3g; one less %.3g)", cap, mean, odds, dp_poisson_tail(mean, cap), dp_poisson_tail(mean, cap - 1));
    }
}

int main(void) {
    test_poisson_tail();
    test_loop_capacity();
    if (failures) { printf("%d of %d checks failed\n", failures, checks); return 1; }
    printf("poisson capacity: %d checks passed\n", checks);
    return 0;
}
