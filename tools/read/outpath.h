/* outpath.h — an output flag's value, where "-" means standard output (for every output flag of every
   tool: `dpmem-report --csv -`; the figures take "-" in tools/charts/figure.c). */
#ifndef OUTPATH_H
#define OUTPATH_H

#include <stdio.h>

int  outpath_is_stdout(const char *arg);   /* "-" */
/* fopen(path, "w"), or stdout for "-". */
FILE *outpath_fopen(const char *arg);
/* fclose, or fflush for stdout: 0, or -1 when the bytes were not all written. */
int  outpath_fclose(FILE *f);

#endif
