/* file_errors.h — the one-line error messages of the file readers (safetensors, config.json,
   checkpoints): fail() formats into the caller's buffer and returns -1; show() makes a name read
   from a file safe to print (control bytes become '?', long names are cut with "..."). */
#ifndef FILE_ERRORS_H
#define FILE_ERRORS_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static inline int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

typedef struct { char s[104]; } Shown;
static inline Shown show(const char *name) {
    Shown o;
    size_t i = 0;
    for (; name && name[i] && i < 100; i++) o.s[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
    if (name && name[i]) { memcpy(o.s + i, "...", 3); i += 3; }
    o.s[i] = 0;
    return o;
}

#endif
