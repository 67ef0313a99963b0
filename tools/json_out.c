/* json_out.c — see json_out.h. */
#include "json_out.h"

void json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    json_write_escaped(f, s);
    fputc('"', f);
}

void json_write_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
}
