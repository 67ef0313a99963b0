/* outpath.h — an output flag's value, where "-" means standard output (for every output flag of every
   tool: `dpmem-report --csv -`, `dpmem-render -o -`, ...). A writer that needs a file name (the PNG
   encoders) writes to a temporary file instead, which outpath_finish then copies to stdout; a writer
   of text opens the path with outpath_fopen. */
#ifndef OUTPATH_H
#define OUTPATH_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *path;         /* where to write: the argument, or the temporary file */
    int to_stdout;
    char tmp[4096];
} OutPath;

int  outpath_is_stdout(const char *arg);   /* "-" */
/* 0, or -1 with a one-line reason (no temporary file could be made). suffix: ".png". */
int  outpath_begin(OutPath *o, const char *arg, const char *suffix, char *err, size_t errlen);
/* After the writer: with ok, the temporary file's bytes to stdout; the temporary file removed. 0 or -1. */
int  outpath_finish(OutPath *o, int ok, char *err, size_t errlen);
/* fopen(path, "w"), or stdout for "-". */
FILE *outpath_fopen(const char *arg);
/* fclose, or fflush for stdout: 0, or -1 when the bytes were not all written. */
int  outpath_fclose(FILE *f);

#endif
