/* outpath.c — see outpath.h. */
#include "outpath.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int outpath_is_stdout(const char *arg) { return arg && !strcmp(arg, "-"); }

FILE *outpath_fopen(const char *arg) { return outpath_is_stdout(arg) ? stdout : fopen(arg, "w"); }

int outpath_fclose(FILE *f) {
    if (f == stdout) return fflush(f) || ferror(f) ? -1 : 0;
    return fclose(f) ? -1 : 0;
}

int outpath_mkdirs(const char *dir, char *err, size_t errlen) {
    char p[4096];
    struct stat st;
    if (!dir || !*dir || strlen(dir) >= sizeof p) { snprintf(err, errlen, "%s: not a usable folder name", dir ? dir : "(null)"); return -1; }
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; ; s++) {   /* each prefix that ends a component, then the whole */
        const int end = *s == 0;
        if (*s != '/' && !end) continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) { snprintf(err, errlen, "%s: %s", p, strerror(errno)); return -1; }
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) { snprintf(err, errlen, "%s: not a directory", p); return -1; }
        if (end) return 0;
        *s = '/';
    }
}

int outpath_mkdirs_for(const char *path, char *err, size_t errlen) {
    char d[4096];
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash || slash == path || outpath_is_stdout(path)) return 0;
    if ((size_t)(slash - path) >= sizeof d) { snprintf(err, errlen, "%s: path too long", path); return -1; }
    memcpy(d, path, (size_t)(slash - path));
    d[slash - path] = 0;
    return outpath_mkdirs(d, err, errlen);
}
