/* json_out.c — see json_out.h. */
#include "json_out.h"

#include <string.h>
#include "common/utf8.h"

void json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    json_write_escaped(f, s);
    fputc('"', f);
}

void json_write_escaped(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char ch = p[i];
        if (ch == '"' || ch == '\\') { fprintf(f, "\\%c", ch); i++; continue; }
        if (ch < 0x20 || ch == 0x7f) { fprintf(f, "\\u%04x", ch); i++; continue; }
        if (ch < 0x80) { fputc(ch, f); i++; continue; }
        uint32_t cp;
        size_t k = utf8_decode(p + i, n - i, &cp);
        if (k) fwrite(p + i, 1, k, f);
        else fputs("\xef\xbf\xbd", f);   /* U+FFFD for the one byte that starts no valid sequence */
        i += k ? k : 1;
    }
}
