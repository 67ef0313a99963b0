/* utf8.h — strict UTF-8 decoding (RFC 3629: no overlong forms, no surrogates, nothing past
   U+10FFFF), shared by the readers that must refuse invalid text (a safetensors header, as the
   reference implementation does) and the writers that must not pass it on (JSON and trace output,
   where an invalid sequence becomes U+FFFD). Header-only: static inline functions. */
#ifndef DPMEM_UTF8_H
#define DPMEM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1-4) of the valid sequence at s[0..n), with its code point in *cp; 0 when s does not
   start with one (an invalid or truncated sequence: a writer replaces that one byte by U+FFFD and
   goes on with the next, which always resynchronises). */
static inline size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t len;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; v = c & 0x1f; min = 0x80; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; v = c & 0x0f; min = 0x800; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;   /* a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5.. (past U+10FFFF) */
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

/* 1 when s[0..n) is valid UTF-8 throughout; else 0 with the offset of the first bad byte in *at. */
static inline int utf8_valid(const unsigned char *s, size_t n, size_t *at) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        if (s[i] < 0x80) { i++; continue; }
        size_t k = utf8_decode(s + i, n - i, &cp);
        if (!k) { if (at) *at = i; return 0; }
        i += k;
    }
    return 1;
}

#endif /* DPMEM_UTF8_H */
