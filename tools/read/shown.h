/* shown.h — a string from a log (or a path) as it may go to a terminal or a text report: control
   characters (C0, DEL, and C1 U+0080..U+009F) and bytes that are not UTF-8 become \xNN escapes, so
   that an ESC sequence in a scope name cannot reach the terminal and a newline in a category cannot
   forge a report line; valid printable UTF-8 (`café`) is kept as it is. Text outputs only: CSV and
   JSON carry the names as they are (JSON escaped by json_out.h). */
#ifndef SHOWN_H
#define SHOWN_H

/* s itself when nothing needs escaping; else the escaped text in one of 16 rotating buffers, valid
   until 16 more calls (enough for the names of one printf). NULL gives "(null)". Not thread-safe:
   the tools print from one thread. */
const char *shown(const char *s);

#endif
