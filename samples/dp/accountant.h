/* accountant.h — the RDP privacy accountant of DP-SGD (the subsampled Gaussian mechanism), in C.

   Computes exactly what Opacus's RDPAccountant computes (opacus/accountants/analysis/rdp.py, itself
   from TF Privacy): the Rényi DP of the Poisson-subsampled Gaussian mechanism at each order α
   (Mironov, Talwar, Zhang 2019: an exact sum for integer α, a two-sided series for fractional α),
   times the number of steps, converted to (ε, δ) with Balle et al. 2020 (Theorem 21):
       ε = min_α [ rdp(α) − (log δ + log α)/(α − 1) + log((α − 1)/α) ].
   Default orders are Opacus's: 1.1, 1.2, …, 10.9 and 12, 13, …, 63.

   Adjacency (what "neighbouring datasets" means, and so what ε protects): the subsampled Gaussian
   here is Opacus's add/remove figure (one row added or removed; the Gaussian mechanism's sensitivity
   is C); the same figure holds under zero-out (one row replaced by one that contributes nothing, its
   place kept). Replace-one (one row's contents changed to anything) moves a clipped sum by up to 2C:
   at q = 1 that is the Gaussian mechanism at σ/2 (accountant_adjacency_sigma); under Poisson
   sampling it is not accounted here.

   Not here: other accountants (PRV, GDP), heterogeneous steps beyond a list of (σ, q, steps)
   groups, or any training. tools/dp_accountant.c is the command-line front end. */
#ifndef ACCOUNTANT_H
#define ACCOUNTANT_H

#define ACCOUNTANT_MAX_ORDERS 160
#define ACCOUNTANT_MAX_GROUPS 32

typedef enum { ACCOUNTANT_ADD_REMOVE = 0, ACCOUNTANT_ZERO_OUT, ACCOUNTANT_REPLACE_ONE } AccountantAdjacency;

/* "add/remove", "zero-out", "replace-one"; and what the neighbour is, in words. */
const char *accountant_adjacency_name(AccountantAdjacency a);
const char *accountant_adjacency_words(AccountantAdjacency a);
/* The sensitivity in units of C: 1 (add/remove, zero-out) or 2 (replace-one). */
double accountant_adjacency_factor(AccountantAdjacency a);
/* The noise multiplier the Gaussian mechanism has under an adjacency: σ / factor. */
double accountant_adjacency_sigma(double sigma, AccountantAdjacency a);

/* A run: groups of steps that share a noise multiplier σ and a sample rate q. */
typedef struct {
    int    n_groups;
    double sigma[ACCOUNTANT_MAX_GROUPS];
    double q[ACCOUNTANT_MAX_GROUPS];
    long   steps[ACCOUNTANT_MAX_GROUPS];
} Accountant;

/* Opacus's default orders; writes them to orders (room for ACCOUNTANT_MAX_ORDERS), returns how many. */
int    accountant_default_orders(double *orders);

/* RDP of one step of the subsampled Gaussian mechanism at order alpha (> 1); may be +inf. */
double accountant_rdp_step(double q, double sigma, double alpha);

/* ε for a given δ from RDP values at the orders; *best_order gets the minimizing α (may be NULL).
   Returns +inf when every order gives NaN or +inf (no privacy). */
double accountant_rdp_to_epsilon(const double *orders, const double *rdp, int n, double delta,
                                 double *best_order);

/* Accountant bookkeeping: one step with (σ, q) (merged into the last group when equal, as Opacus). */
void   accountant_init(Accountant *acc);
int    accountant_step(Accountant *acc, double sigma, double q);   /* 0, or -1 when out of groups */
double accountant_epsilon(const Accountant *acc, double delta, double *best_order);

/* ε after `steps` steps of (σ, q), δ. */
double accountant_epsilon_for(double sigma, double q, long steps, double delta, double *best_order);

/* The smallest σ (to a relative 1e-7) whose ε after `steps` steps at rate q is ≤ target_epsilon.
   Returns -1 with a one-line message in err (if non-NULL, 160 bytes) when no σ ≤ 4096 reaches it. */
double accountant_sigma_for_epsilon(double target_epsilon, double q, long steps, double delta,
                                    char *err);

#endif
