/* args.c — see args.h. */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int parse_duration(const char *s, double *ns) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0) return -1;
    double mul = 1e9;
    if (strcmp(end, "s") == 0 || *end == 0) mul = 1e9;
    else if (strcmp(end, "ms") == 0) mul = 1e6;
    else if (strcmp(end, "us") == 0) mul = 1e3;
    else if (strcmp(end, "ns") == 0) mul = 1;
    else return -1;
    *ns = v * mul;
    return 0;
}

int parse_int(const char *s, long lo, long hi, long *v) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (end == s || *end || errno || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

int parse_size(const char *s, int *w, int *h) {
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10);
    if (end == s || *end != 'x' || errno || a < 1 || a > 16384) return -1;
    const char *t = end + 1;
    long b = strtol(t, &end, 10);
    if (end == t || *end || errno || b < 1 || b > 16384) return -1;
    *w = (int)a; *h = (int)b;
    return 0;
}
