/* file_errors.h — the one-line error messages of the file readers (safetensors, config.json,
   checkpoints): fail() formats into the caller's buffer and returns -1; show() makes a name read
   from a file safe to print (control bytes become '?', long names are cut with "..."), show_path()
   the same for a path that holds such a name (a shard's). */
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

/* name into out (room for cap + 4): control bytes as '?', cut after cap bytes with "..." */
static inline void show_into(char *out, size_t cap, const char *name) {
    size_t i = 0;
    for (; name && name[i] && i < cap; i++) out[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
    if (name && name[i]) { memcpy(out + i, "...", 3); i += 3; }
    out[i] = 0;
}

typedef struct { char s[104]; } Shown;
static inline Shown show(const char *name) {
    Shown o;
    show_into(o.s, 100, name);
    return o;
}

/* A path whose file name came from a file (a shard named in model.safetensors.index.json): escaped
   as show() does, but kept whole up to 1 KiB (a path is longer than a name). */
typedef struct { char s[1028]; } ShownPath;
static inline ShownPath show_path(const char *path) {
    ShownPath o;
    show_into(o.s, 1024, path);
    return o;
}

#endif
