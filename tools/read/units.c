/* units.c — see units.h. */
#include "units.h"

#include <math.h>
#include <stdio.h>

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
