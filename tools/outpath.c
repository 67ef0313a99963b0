/* outpath.c — see outpath.h. */
#include "outpath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int outpath_is_stdout(const char *arg) { return arg && !strcmp(arg, "-"); }

int outpath_begin(OutPath *o, const char *arg, const char *suffix, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->path = arg;
    if (!outpath_is_stdout(arg)) return 0;
    const char *dir = getenv("TMPDIR");
    snprintf(o->tmp, sizeof o->tmp, "%s/dpmem-out-XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
    int fd = mkstemps(o->tmp, (int)strlen(suffix));
    if (fd < 0) { snprintf(err, errlen, "-: no temporary file for standard output (%s)", strerror(errno)); return -1; }
    close(fd);
    o->path = o->tmp;
    o->to_stdout = 1;
    return 0;
}

int outpath_finish(OutPath *o, int ok, char *err, size_t errlen) {
    if (!o->to_stdout) return 0;
    int rc = 0;
    if (ok) {
        FILE *f = fopen(o->tmp, "rb");
        char buf[65536];
        size_t n;
        if (!f) rc = -1;
        while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
            if (fwrite(buf, 1, n, stdout) != n) { rc = -1; break; }
        if (f) fclose(f);
        if (fflush(stdout)) rc = -1;
        if (rc) snprintf(err, errlen, "-: cannot write to standard output");
    }
    unlink(o->tmp);
    return rc;
}

FILE *outpath_fopen(const char *arg) { return outpath_is_stdout(arg) ? stdout : fopen(arg, "w"); }

int outpath_fclose(FILE *f) {
    if (f == stdout) return fflush(f) || ferror(f) ? -1 : 0;
    return fclose(f) ? -1 : 0;
}
