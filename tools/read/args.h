/* args.h — the small pieces of command-line parsing the three tools share: numbers, durations and
   sizes that must be checked (a bad flag is a one-line error, never a silent default). */
#ifndef ARGS_H
#define ARGS_H

/* "1.5s", "200ms", "30us", "1000ns", or a bare number of seconds -> ns. 0 on success, -1 if bad. */
int parse_duration(const char *s, double *ns);
/* "1400x600" -> w, h. */
int parse_size(const char *s, int *w, int *h);
/* A whole number in [lo, hi]. */
int parse_int(const char *s, long lo, long hi, long *v);

#endif
