/* outpath.c — see outpath.h. */
#include "outpath.h"

#include <string.h>

int outpath_is_stdout(const char *arg) { return arg && !strcmp(arg, "-"); }

FILE *outpath_fopen(const char *arg) { return outpath_is_stdout(arg) ? stdout : fopen(arg, "w"); }

int outpath_fclose(FILE *f) {
    if (f == stdout) return fflush(f) || ferror(f) ? -1 : 0;
    return fclose(f) ? -1 : 0;
}
