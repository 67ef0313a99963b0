/* csvread.c — see csvread.h. */
#include "csvread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/io_guard.h"

#define MAX_BYTES (256u << 20)

int csv_read(Csv *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    err[0] = 0;
    size_t len;
    if (io_read_file(path, MAX_BYTES, &c->text, &len, err, errlen)) return -1;
    int cap_rows = 0;
    char *p = c->text, *end = c->text + len;
    while (p < end) {
        /* one record: fields until an unquoted newline */
        char **fields = NULL;
        int nf = 0, capf = 0;
        for (;;) {
            char *field = p, *w = p;
            if (p < end && *p == '"') {
                p++;
                while (p < end) {
                    if (*p == '"' && p + 1 < end && p[1] == '"') { *w++ = '"'; p += 2; }
                    else if (*p == '"') { p++; break; }
                    else *w++ = *p++;
                }
                while (p < end && *p != ',' && *p != '\n') p++;   /* junk after the closing quote */
            } else {
                while (p < end && *p != ',' && *p != '\n') p++;
                w = p;
                if (w > field && w[-1] == '\r') w--;
            }
            char sep = p < end ? *p : '\n';
            *w = 0;
            if (nf == capf) {
                capf = capf ? 2 * capf : 16;
                char **nfld = realloc(fields, (size_t)capf * sizeof *nfld);
                if (!nfld) { free(fields); csv_free(c); snprintf(err, errlen, "%s: out of memory", path); return -1; }
                fields = nfld;
            }
            fields[nf++] = field;
            if (p < end) p++;
            if (sep == '\n') break;
        }
        if (nf == 1 && !fields[0][0]) { free(fields); continue; }   /* a blank line */
        if (c->n_rows == cap_rows) {
            cap_rows = cap_rows ? 2 * cap_rows : 64;
            char ***nr = realloc(c->rows, (size_t)cap_rows * sizeof *nr);
            int *nn = realloc(c->n_fields, (size_t)cap_rows * sizeof *nn);
            if (nr) c->rows = nr;
            if (nn) c->n_fields = nn;
            if (!nr || !nn) { free(fields); csv_free(c); snprintf(err, errlen, "%s: out of memory", path); return -1; }
        }
        c->rows[c->n_rows] = fields;
        c->n_fields[c->n_rows++] = nf;
    }
    if (c->n_rows == 0) { csv_free(c); snprintf(err, errlen, "%s: empty: no header row", path); return -1; }
    return 0;
}

void csv_free(Csv *c) {
    for (int r = 0; r < c->n_rows; r++) free(c->rows[r]);
    free(c->rows);
    free(c->n_fields);
    free(c->text);
    memset(c, 0, sizeof *c);
}

int csv_col(const Csv *c, const char *name) {
    for (int i = 0; c->n_rows && i < c->n_fields[0]; i++)
        if (!strcmp(c->rows[0][i], name)) return i;
    return -1;
}

const char *csv_get(const Csv *c, int r, int col) {
    if (col < 0 || r < 0 || r >= c->n_rows || col >= c->n_fields[r]) return "";
    return c->rows[r][col];
}
