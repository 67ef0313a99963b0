/* units.h — how the tools print bytes and times, and where they put axis ticks: one place, so that a
   number reads the same in a PNG, a table and a CSV comment. Binary units (KiB, MiB, GiB). */
#ifndef UNITS_H
#define UNITS_H

#include <stddef.h>
#include <stdint.h>

typedef struct { double div; const char *name; } Unit;

Unit  byte_unit(double max_bytes);          /* B, KiB, MiB or GiB: the largest that keeps max >= 1 */
Unit  time_unit(double span_ns);            /* ns, us, ms or s, the same way */
char *fmt_bytes(char *buf, size_t n, double bytes);   /* "1.50 GiB", "512 B" */
char *fmt_time(char *buf, size_t n, double ns);       /* "12.3 ms" */
/* A table column's unit, chosen from its values as a person would: the largest unit in which the
   column's typical value (the median of its non-zero magnitudes) is 1 or more, one smaller when its
   largest would be 10000 or more in it. Bytes: B, KiB, MiB, GiB; times (ns in): "µs", "ms", "s" (a
   time under a µs reads 0.123 µs). All zero or n = 0: MiB and ms. */
Unit  byte_unit_col(const double *v, size_t n);
Unit  time_unit_col(const double *ns, size_t n);
/* A value in a column's unit: bytes "%.2f" ("%.0f" in B), times "%.3f"; a value that is not zero but
   would print as one "<0.01" (">-0.01" below zero; "<0.001" for a time). */
char *fmt_in_unit(char *buf, size_t n, double v, Unit u, int bytes);
double nice_step(double range, int ticks);  /* 1, 2 or 5 × 10^k, about range/ticks */
char *fmt_tick(char *buf, size_t n, double v, double step);  /* as many decimals as the step needs */

#endif
