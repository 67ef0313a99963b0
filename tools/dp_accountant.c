/* dp_accountant.c — `dp-accountant`: plan a DP-SGD run without training.

     dp-accountant --sigma S --sample-rate Q --steps N [--delta D] [--adjacency A]     prints ε (and the best order α)
     dp-accountant --epsilon E --sample-rate Q --steps N [--delta D] [--adjacency A]   prints the smallest σ reaching ε

   Every line says the adjacency its ε holds under (accountant.h): add/remove (the default, Opacus's
   figure) or zero-out, sensitivity C; replace-one (--adjacency replace-one, only at --sample-rate 1,
   the trainers' batches in order), sensitivity 2C: the Gaussian mechanism at σ/2.

   The numbers are those of the trainers' accountant (samples/dp/accountant.c, Opacus's RDP accountant).
   A σ so small that the RDP leaves floating point prints "epsilon inf (no privacy guarantee: ...)":
   never a finite ε that would fall as σ shrinks. Bad flags or impossible values give a one-line
   error and exit 2. Not here: epochs/dataset-size
   conversions (give --steps and --sample-rate = batch / dataset size). */
#include "dp/accountant.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: dp-accountant (--sigma S | --epsilon E) --sample-rate Q --steps N [--delta D] [--adjacency A]\n"
               "  --sigma S        noise multiplier (std of the noise / clipping norm); prints epsilon\n"
               "  --epsilon E      target epsilon; prints the smallest sigma that reaches it\n"
               "  --sample-rate Q  Poisson sampling rate, batch size / dataset size, 0 < Q <= 1\n"
               "  --steps N        number of (logical) optimizer steps, N >= 1\n"
               "  --delta D        target delta, 0 < D < 1 (default 1e-5)\n"
               "  --adjacency A    what a neighbouring dataset is: add-remove (default: one row added or removed,\n"
               "                   Opacus's figure), zero-out (one row replaced by one that contributes nothing; the\n"
               "                   same figure), replace-one (one row's contents changed: sensitivity 2C, the Gaussian\n"
               "                   mechanism at sigma/2; only with --sample-rate 1, batches in order)\n");
}

static int parse_double(const char *flag, const char *s, double *out) {
    char *end; errno = 0;
    double v = strtod(s, &end);
    /* ERANGE on underflow still gives the nearest double (0 or subnormal), judged by the range checks */
    if ((errno && errno != ERANGE) || end == s || *end || !isfinite(v)) {
        fprintf(stderr, "dp-accountant: %s expects a number, got '%s'\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    double sigma = NAN, epsilon = NAN, q = NAN, delta = 1e-5, steps_d = NAN;
    AccountantAdjacency adj = ACCOUNTANT_ADD_REMOVE;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(stdout); return 0; }
        if (!strcmp(f, "--adjacency")) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            if (!strcmp(v, "add-remove")) adj = ACCOUNTANT_ADD_REMOVE;
            else if (!strcmp(v, "zero-out")) adj = ACCOUNTANT_ZERO_OUT;
            else if (!strcmp(v, "replace-one")) adj = ACCOUNTANT_REPLACE_ONE;
            else { fprintf(stderr, "dp-accountant: --adjacency expects add-remove, zero-out or replace-one, got '%s'\n", v); return 2; }
            continue;
        }
        double *dst = !strcmp(f, "--sigma") ? &sigma : !strcmp(f, "--epsilon") ? &epsilon
                    : !strcmp(f, "--sample-rate") ? &q : !strcmp(f, "--steps") ? &steps_d
                    : !strcmp(f, "--delta") ? &delta : NULL;
        if (!dst) { fprintf(stderr, "dp-accountant: unknown flag '%s' (see --help)\n", f); return 2; }
        if (i + 1 >= argc) { fprintf(stderr, "dp-accountant: %s needs a value\n", f); return 2; }
        if (parse_double(f, argv[++i], dst)) return 2;
    }
    if (isnan(sigma) == isnan(epsilon)) {
        fprintf(stderr, "dp-accountant: give exactly one of --sigma and --epsilon\n"); return 2;
    }
    if (isnan(q) || !(q > 0 && q <= 1)) { fprintf(stderr, "dp-accountant: --sample-rate must be in (0, 1]\n"); return 2; }
    if (isnan(steps_d) || steps_d < 1 || steps_d != floor(steps_d) || steps_d > 1e12) {
        fprintf(stderr, "dp-accountant: --steps must be a whole number >= 1\n"); return 2;
    }
    if (!(delta > 0 && delta < 1)) { fprintf(stderr, "dp-accountant: --delta must be in (0, 1)\n"); return 2; }
    if (adj == ACCOUNTANT_REPLACE_ONE && q != 1) {
        fprintf(stderr, "dp-accountant: --adjacency replace-one is accounted only at --sample-rate 1 (batches in order); "
                        "the subsampled figure is add/remove\n");
        return 2;
    }
    long steps = (long)steps_d;
    const double factor = accountant_adjacency_factor(adj);
    if (!isnan(sigma)) {
        if (!(sigma > 0)) { fprintf(stderr, "dp-accountant: --sigma must be > 0\n"); return 2; }
        double alpha;
        double eps = accountant_epsilon_for(accountant_adjacency_sigma(sigma, adj), q, steps, delta, &alpha);
        if (isinf(eps)) {   /* said in words: "inf" alone reads like a parse error or a typo */
            printf("epsilon inf (no privacy guarantee: at sigma %g the RDP bound exceeds what a double holds; "
                   "delta %g, sample rate %g, %ld steps; %s adjacency)\n", sigma, delta, q, steps, accountant_adjacency_name(adj));
            return 0;
        }
        printf("epsilon %.11g (%s adjacency, %s%s; delta %g, sigma %g, sample rate %g, %ld steps, best RDP order %g)\n",
               eps, accountant_adjacency_name(adj), accountant_adjacency_words(adj),
               factor == 2 ? ", the Gaussian mechanism at sigma/2" : "", delta, sigma, q, steps, alpha);
    } else {
        if (!(epsilon > 0)) { fprintf(stderr, "dp-accountant: --epsilon must be > 0\n"); return 2; }
        char err[160];
        double s = accountant_sigma_for_epsilon(epsilon, q, steps, delta, err);   /* the mechanism's multiplier */
        if (s < 0) { fprintf(stderr, "dp-accountant: %s\n", err); return 1; }
        printf("sigma %.9g (reaches epsilon %.9g <= %g at delta %g, sample rate %g, %ld steps; %s adjacency, %s)\n",
               s * factor, accountant_epsilon_for(s, q, steps, delta, NULL), epsilon, delta, q, steps,
               accountant_adjacency_name(adj), accountant_adjacency_words(adj));
    }
    return 0;
}
