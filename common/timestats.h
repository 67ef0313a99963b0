/* timestats.h — the statistics every time in the tools is given with: median, min, the quartiles and
   max of a list of durations (the order statistics with linear interpolation between the two nearest
   ranks, numpy's default: quantile p of sorted x[0..n-1] is x[k] + (p(n-1) - k)(x[k+1] - x[k]),
   k = floor(p(n-1))), and the mean. A mean alone hides a slow first step and the noise of a shared
   machine; these do not. Also: the spread of a ratio of two such times. */
#ifndef TIMESTATS_H
#define TIMESTATS_H

#include <stddef.h>

typedef struct {
    size_t n;                              /* values; 0: none (every field 0) */
    double min, q1, median, q3, max, mean;
} TimeStats;

/* The statistics of v[0..n-1] (any unit; NaN-free). Sorts v in place. */
TimeStats timestats_of(double *v, size_t n);

/* A ratio of medians a/b with its spread from the quartiles: lo = a.q1 / b.q3, hi = a.q3 / b.q1
   (the ratio could be anywhere between when each side moves within its middle half). 0 when b has
   no values or a zero median. */
double timestats_ratio(const TimeStats *a, const TimeStats *b, double *lo, double *hi);

#endif
