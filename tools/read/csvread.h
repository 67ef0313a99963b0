/* csvread.h — reads a CSV file (RFC 4180: quoted fields, doubled quotes, newlines inside quotes) into
   rows of fields, with lookup of a column by its header name. For dpmem-charts, which reads the
   suite's results.csv: a column that is absent reads as "" (another version of the suite may add or
   drop columns, and the charts must not care). */
#ifndef CSVREAD_H
#define CSVREAD_H

#include <stddef.h>

typedef struct {
    char *text;               /* the file, with the fields NUL-terminated in place */
    char ***rows;             /* rows[r][c]; row 0 is the header */
    int *n_fields;
    int n_rows;
} Csv;

/* 0, or -1 with a one-line reason (missing, unreadable, over 256 MiB, no header). */
int  csv_read(Csv *c, const char *path, char *err, size_t errlen);
void csv_free(Csv *c);
/* The index of a header column, or -1. */
int  csv_col(const Csv *c, const char *name);
/* Row r's field in column col ("" when col < 0 or the row is short). */
const char *csv_get(const Csv *c, int r, int col);

#endif
