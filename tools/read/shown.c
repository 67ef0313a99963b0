/* shown.c — see shown.h. */
#include "shown.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/utf8.h"

/* The length of the sequence at s that prints as it is (0: it must be escaped, byte by byte). */
static size_t printable(const unsigned char *s, size_t n) {
    if (s[0] >= 0x20 && s[0] < 0x7f) return 1;
    if (s[0] < 0x80) return 0;                       /* C0 controls, DEL */
    uint32_t cp;
    size_t k = utf8_decode(s, n, &cp);
    return k && !(cp >= 0x80 && cp <= 0x9f) ? k : 0; /* not UTF-8, or a C1 control */
}

const char *shown(const char *s) {
    static char *buf[16];
    static size_t cap[16];
    static unsigned next;
    if (!s) return "(null)";
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, k;
    while (i < n && (k = printable(p + i, n - i))) i += k;
    if (i == n) return s;                            /* the common case: nothing to escape, no copy */
    unsigned b = next++ % 16;
    if (cap[b] < 4 * n + 1) {                        /* at most 4 bytes (\xNN) per byte */
        char *q = realloc(buf[b], 4 * n + 1);
        if (!q) return "(out of memory)";
        buf[b] = q; cap[b] = 4 * n + 1;
    }
    char *o = buf[b];
    for (i = 0; i < n;) {
        k = printable(p + i, n - i);
        if (k) { memcpy(o, p + i, k); o += k; i += k; }
        else {
            size_t c = 1;                            /* a C1 control: all of its bytes */
            uint32_t cp;
            if (p[i] >= 0x80 && (c = utf8_decode(p + i, n - i, &cp)) == 0) c = 1;
            for (size_t j = 0; j < c; j++) o += sprintf(o, "\\x%02x", p[i + j]);
            i += c;
        }
    }
    *o = 0;
    return buf[b];
}
