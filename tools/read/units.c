/* units.c — see units.h. */
#include "units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

Unit byte_unit(double b) {
    if (b >= 1024.0 * 1024 * 1024) return (Unit){ 1024.0 * 1024 * 1024, "GiB" };
    if (b >= 1024.0 * 1024) return (Unit){ 1024.0 * 1024, "MiB" };
    if (b >= 1024.0) return (Unit){ 1024.0, "KiB" };
    return (Unit){ 1.0, "B" };
}

Unit time_unit(double ns) {
    if (ns >= 1e9) return (Unit){ 1e9, "s" };
    if (ns >= 1e6) return (Unit){ 1e6, "ms" };
    if (ns >= 1e3) return (Unit){ 1e3, "us" };
    return (Unit){ 1.0, "ns" };
}

char *fmt_bytes(char *buf, size_t n, double bytes) {
    Unit u = byte_unit(bytes);
    if (u.div == 1.0) snprintf(buf, n, "%.0f B", bytes);
    else snprintf(buf, n, "%.2f %s", bytes / u.div, u.name);
    return buf;
}

char *fmt_time(char *buf, size_t n, double ns) {
    Unit u = time_unit(ns);
    double v = ns / u.div;
    snprintf(buf, n, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, u.name);
    return buf;
}

double nice_step(double range, int ticks) {
    if (!(range > 0) || !isfinite(range)) return 1.0;
    double raw = range / (ticks > 0 ? ticks : 1), mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

char *fmt_tick(char *buf, size_t n, double v, double step) {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 9) dec = 9;
    if (fabs(v) < step * 1e-6) v = 0;   /* no "-0" */
    snprintf(buf, n, "%.*f", dec, v);
    return buf;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The unit of a column from its units (ascending): see units.h. */
static Unit unit_col(const double *v, size_t n, const Unit *units, int n_units, Unit none) {
    double *m = malloc((n ? n : 1) * sizeof *m), most = 0;
    size_t k = 0;
    for (size_t i = 0; m && i < n; i++) {
        double a = fabs(v[i]);
        if (a > 0 && isfinite(a)) { m[k++] = a; if (a > most) most = a; }
    }
    if (!k) { free(m); return none; }
    qsort(m, k, sizeof *m, cmp_double);
    double typical = m[(k - 1) / 2];
    free(m);
    int u = 0;
    while (u + 1 < n_units && typical >= units[u + 1].div) u++;
    if (most / units[u].div >= 10000 && u + 1 < n_units) u++;
    return units[u];
}

Unit byte_unit_col(const double *v, size_t n) {
    static const Unit u[4] = { { 1.0, "B" }, { 1024.0, "KiB" }, { 1024.0 * 1024, "MiB" }, { 1024.0 * 1024 * 1024, "GiB" } };
    return unit_col(v, n, u, 4, u[2]);
}

Unit time_unit_col(const double *ns, size_t n) {
    static const Unit u[3] = { { 1e3, "\xC2\xB5s" }, { 1e6, "ms" }, { 1e9, "s" } };
    return unit_col(ns, n, u, 3, u[1]);
}

char *fmt_in_unit(char *buf, size_t n, double v, Unit u, int bytes) {
    double x = v / u.div, least = bytes ? (u.div == 1.0 ? 0.5 : 0.005) : 0.0005;
    if (v != 0 && fabs(x) < least)   /* not zero, though it would print so: say which side of it */
        snprintf(buf, n, "%s%s", v > 0 ? "<" : ">-", bytes ? (u.div == 1.0 ? "1" : "0.01") : "0.001");
    else snprintf(buf, n, bytes ? (u.div == 1.0 ? "%.0f" : "%.2f") : "%.3f", x);
    return buf;
}
