/* timestats.c — see timestats.h. */
#include "timestats.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *s, size_t n, double p) {
    double pos = p * (double)(n - 1);
    size_t k = (size_t)pos;
    if (k + 1 >= n) return s[n - 1];
    return s[k] + (pos - (double)k) * (s[k + 1] - s[k]);
}

TimeStats timestats_of(double *v, size_t n) {
    TimeStats t = { 0 };
    if (!n) return t;
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    t.n = n;
    t.min = v[0]; t.max = v[n - 1];
    t.q1 = quantile(v, n, 0.25); t.median = quantile(v, n, 0.5); t.q3 = quantile(v, n, 0.75);
    t.mean = sum / (double)n;
    return t;
}

double timestats_ratio(const TimeStats *a, const TimeStats *b, double *lo, double *hi) {
    if (!a->n || !b->n || !(b->median > 0) || !(b->q1 > 0)) { *lo = *hi = 0; return 0; }
    *lo = a->q1 / b->q3;
    *hi = a->q3 / b->q1;
    return a->median / b->median;
}
