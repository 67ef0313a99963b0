/* json_out.h — writing a JSON string literal from untrusted bytes (a log's strings need not be UTF-8:
   control and non-ASCII bytes become \u00XX escapes, so the output always parses). */
#ifndef JSON_OUT_H
#define JSON_OUT_H

#include <stdio.h>

void json_write_string(FILE *f, const char *s);
void json_write_escaped(FILE *f, const char *s);   /* the same without the quotes */

#endif
