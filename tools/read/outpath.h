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
/* Makes the folder dir and any missing folder above it (mkdir -p), as run_experiments does for --out:
   0 when dir is a folder afterwards; else -1 with "DIR: not a directory" or "DIR: <strerror>" in err. */
int  outpath_mkdirs(const char *dir, char *err, size_t errlen);
/* The same for the folder that will hold the file path (nothing to make for a bare name or "-"). */
int  outpath_mkdirs_for(const char *path, char *err, size_t errlen);

#endif
