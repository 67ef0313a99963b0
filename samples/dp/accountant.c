/* accountant.c — RDP accountant for the Poisson-subsampled Gaussian mechanism (see accountant.h).

   A line-by-line equivalent of Opacus's opacus/accountants/analysis/rdp.py, so that a run reports
   the same ε as Opacus would: same orders, same series, same stopping rule (terms below e^-30), same
   conversion. log erfc(x) is evaluated with an asymptotic series for large x where erfc underflows
   (scipy's log_ndtr does the equivalent). Where Opacus's arithmetic leaves floating point (a tiny σ
   whose 1/σ² overflows, or σ² that underflows to 0), Opacus silently drops NaN terms and can report a
   small or -inf ε for no noise at all; here any NaN along the way makes that order's RDP +inf, so ε
   only grows as σ shrinks (down to +inf: no guarantee). Does not do: PRV/GDP accounting,
   amplification by shuffling. */
#include "accountant.h"

#include <math.h>
#include <stdio.h>

const char *accountant_adjacency_name(AccountantAdjacency a) {
    return a == ACCOUNTANT_REPLACE_ONE ? "replace-one" : a == ACCOUNTANT_ZERO_OUT ? "zero-out" : "add/remove";
}

const char *accountant_adjacency_words(AccountantAdjacency a) {
    return a == ACCOUNTANT_REPLACE_ONE ? "one row's contents replaced by any other, sensitivity 2C"
         : a == ACCOUNTANT_ZERO_OUT    ? "one row replaced by one that contributes nothing, sensitivity C"
                                       : "one row added or removed, sensitivity C";
}

double accountant_adjacency_factor(AccountantAdjacency a) { return a == ACCOUNTANT_REPLACE_ONE ? 2.0 : 1.0; }

double accountant_adjacency_sigma(double sigma, AccountantAdjacency a) { return sigma / accountant_adjacency_factor(a); }

int accountant_default_orders(double *orders) {
    int n = 0;
    for (int x = 1; x < 100; x++) orders[n++] = 1.0 + x / 10.0;   /* 1.1 … 10.9, as Opacus builds them */
    for (int a = 12; a < 64; a++) orders[n++] = a;                 /* 12 … 63 */
    return n;
}

/* log(e^x + e^y) without overflow. A NaN stays NaN (fmin/fmax would drop it and lose a term). */
static double log_add(double logx, double logy) {
    if (isnan(logx) || isnan(logy)) return NAN;
    double a = fmin(logx, logy), b = fmax(logx, logy);
    if (a == -INFINITY) return b;
    return log1p(exp(a - b)) + b;
}

/* log(e^x − e^y) for x ≥ y; NaN when the result would be negative (Opacus raises there). */
static double log_sub(double logx, double logy) {
    if (isnan(logx) || isnan(logy) || logx < logy) return NAN;
    if (logy == -INFINITY) return logx;
    if (logx == logy) return -INFINITY;
    double d = logx - logy;
    if (d > 700) return logx;                   /* expm1 would overflow; e^y is negligible */
    return log(expm1(d)) + logy;
}

/* log(erfc(x)), accurate where erfc(x) underflows: for x > 25 the asymptotic series
   erfc(x) = e^{-x²}/(x√π) · (1 − 1/(2x²) + 3/(4x⁴) − 15/(8x⁶) + 105/(16x⁸)), error < 1e-13 there. */
static double log_erfc(double x) {
    if (x < 25.0) return log(erfc(x));
    double z = 1.0 / (x * x);
    double series = 1.0 - z / 2 + 3 * z * z / 4 - 15 * z * z * z / 8 + 105 * z * z * z * z / 16;
    return -x * x - log(x) - 0.5 * log(M_PI) + log(series);
}

/* log A_α for integer α: an exact binomial sum (Mironov et al. 2019, Section 3.3). */
static double log_a_int(double q, double sigma, int alpha) {
    double log_a = -INFINITY;
    for (int i = 0; i <= alpha; i++) {
        double log_binom = lgamma(alpha + 1.0) - lgamma(i + 1.0) - lgamma(alpha - i + 1.0);
        double log_coef = log_binom + i * log(q) + (alpha - i) * log(1 - q);
        double s = log_coef + (double)(i * i - i) / (2 * sigma * sigma);
        log_a = log_add(log_a, s);
    }
    return log_a;
}

/* log A_α for fractional α: the two integrals split at z0, as series with signed binomials. */
static double log_a_frac(double q, double sigma, double alpha) {
    double log_a0 = -INFINITY, log_a1 = -INFINITY;
    double z0 = sigma * sigma * log(1 / q - 1) + 0.5;
    double coef = 1.0;                           /* binom(α, i), by the recurrence over i */
    for (int i = 0; i < 1000000; i++) {
        if (i > 0) coef *= (alpha - (i - 1)) / i;
        double log_coef = log(fabs(coef));
        double j = alpha - i;
        double log_t0 = log_coef + i * log(q) + j * log(1 - q);
        double log_t1 = log_coef + j * log(q) + i * log(1 - q);
        double log_e0 = log(0.5) + log_erfc((i - z0) / (M_SQRT2 * sigma));
        double log_e1 = log(0.5) + log_erfc((z0 - j) / (M_SQRT2 * sigma));
        double log_s0 = log_t0 + (i * (double)i - i) / (2 * sigma * sigma) + log_e0;
        double log_s1 = log_t1 + (j * j - j) / (2 * sigma * sigma) + log_e1;
        if (coef > 0) { log_a0 = log_add(log_a0, log_s0); log_a1 = log_add(log_a1, log_s1); }
        else          { log_a0 = log_sub(log_a0, log_s0); log_a1 = log_sub(log_a1, log_s1); }
        if (isnan(log_a0) || isnan(log_a1)) return NAN;   /* left floating point: the caller says +inf */
        if (fmax(log_s0, log_s1) < -30) return log_add(log_a0, log_a1);
    }
    return NAN;                                  /* the series did not converge: no bound */
}

/* Above this σ the RDP of one step is below 1e-190 at every order; it is evaluated at this σ (an
   upper bound, as RDP falls with σ), since σ² and the series' z0 overflow before σ = 1e155. */
#define ACCOUNTANT_SIGMA_CAP 1e100

double accountant_rdp_step(double q, double sigma, double alpha) {
    if (q == 0) return 0;
    if (sigma == 0) return INFINITY;
    if (sigma > ACCOUNTANT_SIGMA_CAP) sigma = ACCOUNTANT_SIGMA_CAP;
    if (q == 1.0) return alpha / (2 * sigma * sigma);   /* overflows to +inf as σ → 0: right */
    if (isinf(alpha)) return INFINITY;
    double log_a = (alpha == floor(alpha)) ? log_a_int(q, sigma, (int)alpha) : log_a_frac(q, sigma, alpha);
    /* NaN: some term left floating point (1/σ² = inf against a -inf, σ² = 0, a lost series). The
       true RDP there is beyond DBL_MAX or unknown: +inf, never a value smaller than the truth. */
    if (isnan(log_a)) return INFINITY;
    double rdp = log_a / (alpha - 1);
    return rdp < 0 ? 0 : rdp;                  /* RDP is ≥ 0; a negative value is rounding in log(1 + tiny) */
}

double accountant_rdp_to_epsilon(const double *orders, const double *rdp, int n, double delta,
                                 double *best_order) {
    double best = NAN, best_a = NAN;
    for (int k = 0; k < n; k++) {
        double a = orders[k];
        double eps = rdp[k] - (log(delta) + log(a)) / (a - 1) + log((a - 1) / a);
        if (isnan(eps)) continue;
        if (isnan(best) || eps < best) { best = eps; best_a = a; }
    }
    if (best_order) *best_order = best_a;
    return isnan(best) ? INFINITY : best;
}

void accountant_init(Accountant *acc) { acc->n_groups = 0; }

int accountant_step(Accountant *acc, double sigma, double q) {
    int g = acc->n_groups - 1;
    if (g >= 0 && acc->sigma[g] == sigma && acc->q[g] == q) { acc->steps[g]++; return 0; }
    if (acc->n_groups == ACCOUNTANT_MAX_GROUPS) return -1;
    g = acc->n_groups++;
    acc->sigma[g] = sigma; acc->q[g] = q; acc->steps[g] = 1;
    return 0;
}

double accountant_epsilon(const Accountant *acc, double delta, double *best_order) {
    double orders[ACCOUNTANT_MAX_ORDERS], rdp[ACCOUNTANT_MAX_ORDERS];
    int n = accountant_default_orders(orders);
    for (int k = 0; k < n; k++) {
        rdp[k] = 0;
        for (int g = 0; g < acc->n_groups; g++)
            rdp[k] += accountant_rdp_step(acc->q[g], acc->sigma[g], orders[k]) * acc->steps[g];
    }
    return accountant_rdp_to_epsilon(orders, rdp, n, delta, best_order);
}

double accountant_epsilon_for(double sigma, double q, long steps, double delta, double *best_order) {
    Accountant acc = { .n_groups = 1, .sigma = { sigma }, .q = { q }, .steps = { steps } };
    return accountant_epsilon(&acc, delta, best_order);
}

double accountant_sigma_for_epsilon(double target_epsilon, double q, long steps, double delta,
                                    char *err) {
    /* ε falls as σ grows: bracket the target by doubling, then bisect. */
    double hi = 0.5;
    while (accountant_epsilon_for(hi, q, steps, delta, NULL) > target_epsilon) {
        hi *= 2;
        if (hi > 4096) {
            if (err) snprintf(err, 160, "no noise multiplier up to 4096 reaches epsilon %g at q=%g, %ld steps, delta=%g",
                              target_epsilon, q, steps, delta);
            return -1;
        }
    }
    double lo = 0;
    while (hi - lo > 1e-7 * hi) {
        double mid = 0.5 * (lo + hi);
        if (accountant_epsilon_for(mid, q, steps, delta, NULL) > target_epsilon) lo = mid; else hi = mid;
    }
    return hi;
}
