/* json_out.h — writing a JSON string literal from untrusted bytes (a log's strings need not be UTF-8):
   valid UTF-8 is written as it is (a category `café` reads `café` in JSON as in CSV), each byte
   that does not start a valid sequence becomes U+FFFD, and what JSON requires is escaped (`"`, `\`,
   control characters as \u00XX; DEL too), so the output always parses. */
#ifndef JSON_OUT_H
#define JSON_OUT_H

#include <stdio.h>

void json_write_string(FILE *f, const char *s);
void json_write_escaped(FILE *f, const char *s);   /* the same without the quotes */

#endif
