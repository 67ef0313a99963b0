/* steplog.c — see steplog.h. */
#include "steplog.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int push(double **v, size_t *n, size_t *cap, double x) {
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        double *w = realloc(*v, nc * sizeof *w);
        if (!w) return -1;
        *v = w; *cap = nc;
    }
    (*v)[(*n)++] = x;
    return 0;
}

/* The next number of s (a double), advancing *s; 0 at the end or on garbage. */
static int next_number(const char **s, double *x) {
    while (**s == ' ') (*s)++;
    if (!**s) return 0;
    char *end;
    errno = 0;
    *x = strtod(*s, &end);
    if (end == *s || (*end && *end != ' ') || !isfinite(*x)) return 0;
    *s = end;
    return 1;
}

int steplog_read(StepLog *s, const DpmemLog *L) {
    memset(s, 0, sizeof *s);
    size_t cap_loss = 0, cap_step = 0, cap_norm = 0, cap_clip = 0, cap_ns = 0, n_step = 0, n_clip = 0, n_ns = 0;
    double *steps = NULL, *norm_steps = NULL;   /* as doubles while reading */
    uint32_t last_norm_step = 0;
    for (uint32_t i = 0; i < L->n_meta; i++) {
        const char *k = dpmem_log_string(L, L->meta[i].key);
        int is_loss = !strcmp(k, "train.loss"), is_norms = !strcmp(k, "dp.sample_norms");
        if (!is_loss && !is_norms) continue;
        const char *v = dpmem_log_string(L, L->meta[i].value);
        double a, b, n, c;
        if (!next_number(&v, &a) || !(a >= 1 && a <= 4e9) || a != floor(a)) { s->bad++; continue; }
        if (is_loss) {
            if (!next_number(&v, &b) || *v) { s->bad++; continue; }
            if (push(&s->loss, &s->n_loss, &cap_loss, b) || push(&steps, &n_step, &cap_step, a)) goto oom;
            continue;
        }
        if (!next_number(&v, &b)) { s->bad++; continue; }
        int any = 0;
        while (next_number(&v, &n)) {
            if (!next_number(&v, &c)) { s->bad++; break; }
            if (push(&s->norm, &s->n_norms, &cap_norm, n) || push(&s->clip, &n_clip, &cap_clip, c) ||
                push(&norm_steps, &n_ns, &cap_ns, a)) goto oom;
            any = 1;
        }
        if (any && (uint32_t)a != last_norm_step) { s->norm_steps++; last_norm_step = (uint32_t)a; }
    }
    if (n_step) {
        if (!(s->step = malloc(n_step * sizeof *s->step))) goto oom;
        for (size_t i = 0; i < n_step; i++) s->step[i] = (uint32_t)steps[i];
    }
    if (n_ns) {
        if (!(s->norm_step = malloc(n_ns * sizeof *s->norm_step))) goto oom;
        for (size_t i = 0; i < n_ns; i++) s->norm_step[i] = (uint32_t)norm_steps[i];
    }
    free(steps); free(norm_steps);
    return 0;
oom:
    free(steps); free(norm_steps);
    steplog_free(s);
    return -1;
}

void steplog_free(StepLog *s) {
    free(s->loss); free(s->step); free(s->norm); free(s->clip); free(s->norm_step);
    memset(s, 0, sizeof *s);
}
