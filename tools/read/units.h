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
double nice_step(double range, int ticks);  /* 1, 2 or 5 × 10^k, about range/ticks */
char *fmt_tick(char *buf, size_t n, double v, double step);  /* as many decimals as the step needs */

#endif
