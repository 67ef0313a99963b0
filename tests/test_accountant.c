/* test_accountant.c — the RDP accountant (samples/dp/accountant.c) and the dp-accountant command.

   Checks: Opacus's own test vector (σ=1.5, q=0.04, 2250 steps, δ=1e-5 → ε=7.32911117143) to 1e-6
   relative; TF Privacy's compute_rdp vectors (integer and fractional orders); q=1 is the plain
   Gaussian mechanism α/(2σ²); ε grows with steps and q and falls with σ; the σ search returns a σ
   whose ε is within 0.01 of (and not above) the target and is minimal; ε never falls as σ shrinks
   down to the smallest subnormal and is +inf (said in words by the command) where the RDP leaves
   floating point, never NaN or -inf; the command prints the same
   numbers and rejects bad input with a one-line error and a non-zero exit; every line names its
   adjacency, replace-one (q = 1 only) is the accountant at σ/2 (10.7255 for one use at σ = 1, where
   zero-out's is 4.7285) and --epsilon under it returns twice the mechanism's σ. */
#include "dp/accountant.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

static void check_close(const char *what, double got, double want, double rel) {
    CHECK(fabs(got - want) <= rel * fabs(want), "%s: got %.12g, want %.12g (rel tol %g)", what, got, want, rel);
}

/* Runs the command, returns its exit status and its first output line in line. */
static int run(const char *args, char *line, size_t n) {
    const char *build = getenv("DPMEM_BUILD");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/dp-accountant %s 2>&1", build ? build : "build", args);
    FILE *p = popen(cmd, "r");
    if (!p) { line[0] = 0; return -1; }
    if (!fgets(line, (int)n, p)) line[0] = 0;
    char rest[256];
    while (fgets(rest, sizeof rest, p)) {}
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
    /* Opacus tests/accountants_test.py */
    double alpha;
    check_close("Opacus vector", accountant_epsilon_for(1.5, 0.04, 2250, 1e-5, &alpha), 7.32911117143, 1e-6);
    /* TF Privacy rdp_accountant_test.py: compute_rdp(0.1, 2, 10, 5) and the sequence at q=0.01, σ=2.5, 50 steps */
    check_close("rdp(q=.1,s=2,a=5)x10", 10 * accountant_rdp_step(0.1, 2, 5), 0.07737, 1e-4);
    const double orders[] = { 1.5, 2.5, 5, 50, 100 };
    const double want[]   = { 0.00065, 0.001085, 0.00218075, 0.023846, 167.416307 };
    for (int i = 0; i < 5; i++) {
        char what[64]; snprintf(what, sizeof what, "rdp(q=.01,s=2.5,a=%g)x50", orders[i]);
        double tol = 0.5e-5 / want[i] + 1e-9;   /* TF Privacy checks 5 decimal places */
        check_close(what, 50 * accountant_rdp_step(0.01, 2.5, orders[i]), want[i], tol);
    }
    check_close("q=1 is the Gaussian mechanism", accountant_rdp_step(1.0, 10, 20), 20.0 / 200, 1e-15);
    CHECK(accountant_rdp_step(0.0, 1, 3) == 0, "q=0 must cost nothing");
    CHECK(isinf(accountant_rdp_step(0.5, 0, 3)), "sigma=0 must give infinite RDP");

    /* The accountant merges equal steps, and composing two halves equals one run. */
    Accountant acc; accountant_init(&acc);
    for (int i = 0; i < 1125; i++) accountant_step(&acc, 1.5, 0.04);
    for (int i = 0; i < 1125; i++) accountant_step(&acc, 1.5, 0.04);
    CHECK(acc.n_groups == 1 && acc.steps[0] == 2250, "equal steps merged: %d groups", acc.n_groups);
    check_close("stepped accountant", accountant_epsilon(&acc, 1e-5, NULL), 7.32911117143, 1e-6);

    /* Monotonicity. */
    double prev = 0;
    for (long steps = 1; steps <= 10000; steps *= 10) {
        double e = accountant_epsilon_for(1.0, 0.01, steps, 1e-5, NULL);
        CHECK(e > prev, "epsilon must grow with steps: %ld steps gives %g after %g", steps, e, prev);
        prev = e;
    }
    prev = 0;
    for (double q = 0.001; q <= 0.5; q *= 3) {
        double e = accountant_epsilon_for(1.0, q, 100, 1e-5, NULL);
        CHECK(e > prev, "epsilon must grow with q: q=%g gives %g after %g", q, e, prev);
        prev = e;
    }
    prev = INFINITY;
    for (double s = 0.5; s <= 8; s *= 1.5) {
        double e = accountant_epsilon_for(s, 0.01, 1000, 1e-5, NULL);
        CHECK(e < prev, "epsilon must fall with sigma: sigma=%g gives %g after %g", s, e, prev);
        prev = e;
    }
    CHECK(accountant_epsilon_for(1.0, 0.01, 1000, 1e-3, NULL) < accountant_epsilon_for(1.0, 0.01, 1000, 1e-6, NULL),
          "epsilon must fall as delta grows");

    /* ε never falls as σ shrinks, down to the smallest subnormal: each decade from 1e100 to 1e-323,
       then DBL_MIN/3^k. Where 1/σ² overflows the RDP leaves floating point and ε must be +inf; the
       old code dropped NaN terms there (σ=1e-160 gave 7.016, 1e-170 gave -inf). */
    const double sweep_q[] = { 1e-5, 0.01, 0.3, 1.0 };
    const long sweep_steps[] = { 10, 1000000 };
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++) {
            double prev_eps = -INFINITY, prev_s = INFINITY;
            for (int e = 100; e >= -324; e--) {
                double s = e > -324 ? pow(10, e) : 4.9406564584124654e-324;
                double eps = accountant_epsilon_for(s, sweep_q[a], sweep_steps[b], 1e-5, NULL);
                CHECK(!isnan(eps) && eps != -INFINITY && eps >= prev_eps,
                      "q=%g, %ld steps: sigma %g gives epsilon %.17g, sigma %g gave %.17g", sweep_q[a],
                      sweep_steps[b], s, eps, prev_s, prev_eps);
                prev_eps = eps; prev_s = s;
            }
            CHECK(prev_eps == INFINITY, "q=%g: the smallest subnormal sigma must give epsilon +inf, got %g",
                  sweep_q[a], prev_eps);
            for (double s = DBL_MIN; s > 0; s /= 3)
                CHECK(accountant_epsilon_for(s, sweep_q[a], sweep_steps[b], 1e-5, NULL) == INFINITY,
                      "q=%g: subnormal sigma %g must give epsilon +inf", sweep_q[a], s);
        }
    CHECK(accountant_rdp_step(0.01, 1e-160, 2.5) == INFINITY && accountant_rdp_step(0.01, 1e-160, 3) == INFINITY,
          "sigma 1e-160: RDP beyond floating point must be +inf, got %g (frac) %g (int)",
          accountant_rdp_step(0.01, 1e-160, 2.5), accountant_rdp_step(0.01, 1e-160, 3));
    check_close("sigma 1e-150 is still finite: 10 x 1.1/(2 sigma^2)", accountant_epsilon_for(1e-150, 0.01, 10, 1e-5, NULL),
                5.5e300, 1e-6);

    /* σ search. */
    const double targets[] = { 0.5, 1.0, 3.0, 8.0 };
    for (int i = 0; i < 4; i++) {
        char err[160];
        double s = accountant_sigma_for_epsilon(targets[i], 0.01, 1000, 1e-5, err);
        double e = accountant_epsilon_for(s, 0.01, 1000, 1e-5, NULL);
        CHECK(s > 0 && e <= targets[i] && targets[i] - e < 0.01,
              "sigma search for eps %g: sigma %g gives eps %g", targets[i], s, e);
        CHECK(accountant_epsilon_for(s * (1 - 1e-4), 0.01, 1000, 1e-5, NULL) > targets[i],
              "sigma %g for eps %g is not minimal", s, targets[i]);
    }
    char err[160] = "";
    CHECK(accountant_sigma_for_epsilon(1e-6, 1.0, 100000, 1e-10, err) < 0 && err[0],
          "an unreachable epsilon must be reported");

    /* The command. */
    char line[256];
    int rc = run("--sigma 1.5 --sample-rate 0.04 --steps 2250 --delta 1e-5", line, sizeof line);
    double eps = 0;
    CHECK(rc == 0 && sscanf(line, "epsilon %lf", &eps) == 1 && fabs(eps - 7.32911117143) < 1e-6 * 7.33,
          "dp-accountant --sigma: rc %d, '%s'", rc, line);
    rc = run("--epsilon 3 --sample-rate 0.01 --steps 1000 --delta 1e-5", line, sizeof line);
    double s = 0;
    CHECK(rc == 0 && sscanf(line, "sigma %lf", &s) == 1 &&
          fabs(accountant_epsilon_for(s, 0.01, 1000, 1e-5, NULL) - 3) < 0.01,
          "dp-accountant --epsilon: rc %d, '%s'", rc, line);
    /* no noise worth the name: +inf, said in words; the smallest subnormal is a σ like any other */
    rc = run("--sigma 1e-160 --sample-rate 0.01 --steps 10", line, sizeof line);
    CHECK(rc == 0 && sscanf(line, "epsilon %lf", &eps) == 1 && eps == INFINITY && strstr(line, "no privacy guarantee"),
          "dp-accountant --sigma 1e-160 must print epsilon inf and say so: rc %d, '%s'", rc, line);
    rc = run("--sigma 4.9406564584124654e-324 --sample-rate 0.5 --steps 1", line, sizeof line);
    CHECK(rc == 0 && strncmp(line, "epsilon inf (no privacy guarantee", 33) == 0,
          "dp-accountant --sigma 5e-324: rc %d, '%s'", rc, line);
    /* Adjacency (issue 45): every line names it; add/remove (the default) and zero-out are the figure at σ,
       replace-one (sensitivity 2C, only at q = 1) the Gaussian mechanism at σ/2: issue 37's sequential run,
       one use of each row at σ = 1, is 4.7285 under zero-out and 10.7255 under replace-one. */
    rc = run("--sigma 1.5 --sample-rate 0.04 --steps 2250", line, sizeof line);
    CHECK(rc == 0 && strstr(line, "(add/remove adjacency, one row added or removed, sensitivity C;"),
          "the default line must name add/remove adjacency: '%s'", line);
    rc = run("--sigma 1 --sample-rate 1 --steps 1 --adjacency zero-out", line, sizeof line);
    CHECK(rc == 0 && sscanf(line, "epsilon %lf", &eps) == 1 && fabs(eps - accountant_epsilon_for(1.0, 1.0, 1, 1e-5, NULL)) < 1e-9 &&
          fabs(eps - 4.7285070672) < 1e-9 && strstr(line, "(zero-out adjacency, one row replaced by one that contributes nothing"),
          "zero-out at sigma 1, one step: '%s'", line);
    rc = run("--sigma 1 --sample-rate 1 --steps 1 --adjacency replace-one", line, sizeof line);
    CHECK(rc == 0 && sscanf(line, "epsilon %lf", &eps) == 1 && fabs(eps - accountant_epsilon_for(0.5, 1.0, 1, 1e-5, NULL)) < 1e-8 &&
          fabs(eps - 10.725509696) < 1e-8 && strstr(line, "(replace-one adjacency, one row's contents replaced by any other, sensitivity 2C"),
          "replace-one at sigma 1 must be the accountant at sigma 0.5 (10.7255): '%s'", line);
    rc = run("--sigma 1.2 --sample-rate 1 --steps 7 --adjacency replace-one", line, sizeof line);
    CHECK(rc == 0 && sscanf(line, "epsilon %lf", &eps) == 1 && fabs(eps - accountant_epsilon_for(0.6, 1.0, 7, 1e-5, NULL)) < 1e-8 && eps > 20,
          "replace-one, 7 uses at sigma 1.2 = the accountant at 0.6: '%s'", line);
    rc = run("--epsilon 4 --sample-rate 1 --steps 3 --adjacency replace-one", line, sizeof line);
    CHECK(rc == 0 && sscanf(line, "sigma %lf", &s) == 1 && fabs(accountant_epsilon_for(s / 2, 1.0, 3, 1e-5, NULL) - 4) < 0.01 &&
          accountant_epsilon_for(s / 2, 1.0, 3, 1e-5, NULL) <= 4 && strstr(line, "replace-one adjacency"),
          "--epsilon under replace-one: sigma/2 must reach it: '%s'", line);
    CHECK(accountant_adjacency_sigma(1.0, ACCOUNTANT_REPLACE_ONE) == 0.5 && accountant_adjacency_sigma(1.0, ACCOUNTANT_ZERO_OUT) == 1.0 &&
          accountant_adjacency_sigma(1.0, ACCOUNTANT_ADD_REMOVE) == 1.0, "adjacency sigmas");
    const char *bad[] = { "--sigma 1 --steps 10", "--sigma x --sample-rate 0.1 --steps 10",
                          "--sigma 1 --sample-rate 1.5 --steps 10", "--sigma 1 --epsilon 2 --sample-rate 0.1 --steps 10",
                          "--sigma 1 --sample-rate 0.1 --steps 2.5", "--bogus", "--sigma 1 --sample-rate 0.1 --steps 10 --delta 0",
                          "--sigma", "--sigma 1 --sample-rate 0.5 --steps 10 --adjacency replace-one",
                          "--sigma 1 --sample-rate 1 --steps 10 --adjacency swap" };
    for (int i = 0; i < 10; i++) {
        rc = run(bad[i], line, sizeof line);
        CHECK(rc != 0 && strncmp(line, "dp-accountant: ", 15) == 0,
              "bad input '%s' must fail with one line: rc %d, '%s'", bad[i], rc, line);
    }
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("accountant: all checks passed (Opacus vector eps=%.11f at alpha %g)\n",
           accountant_epsilon_for(1.5, 0.04, 2250, 1e-5, NULL), alpha);
    return 0;
}
