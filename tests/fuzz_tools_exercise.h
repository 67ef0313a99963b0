/* fuzz_tools_exercise.h — one untrusted byte string through every reader the tools have: the log
   reader, the run statistics of dpmem-report, the trace writer of dpmem-trace and the timeline of
   dpmem-render (drawn, by category and by name). Shared by the corruption test and the libFuzzer
   target. It returns normally on any input; a crash, a sanitizer report or a hang is the bug. */
#ifndef FUZZ_TOOLS_EXERCISE_H
#define FUZZ_TOOLS_EXERCISE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "read/dpmem_read.h"
#include "read/runstats.h"
#include "charts/timeline.h"
#include "trace/trace.h"

/* 1 if the log opened, 0 if it was rejected (then err must be one non-empty line). */
static inline int fuzz_exercise(const uint8_t *data, size_t size, FILE *sink, const char *png) {
    DpmemLog L;
    char err[512] = "";
    if (dpmem_log_open_memory(&L, data, size, "fuzz.log", err, sizeof err)) {
        if (!err[0] || strchr(err, '\n')) { fprintf(stderr, "bad rejection message: '%s'\n", err); __builtin_trap(); }
        return 0;
    }
    static RunStats r;   /* large: not on the stack */
    if (runstats_compute(&r, &L) == 0) runstats_free(&r);
    TraceOptions to = { 0 };
    if (sink) trace_write(&L, sink, &to);
    TimelineOptions o = { .width = 600, .height = 220, .top_n = 3 };
    timeline_render(&L, 1, &o, png, err, sizeof err);
    o.by_name = 1;
    o.from_ns = 1000; o.to_ns = 5e6;
    timeline_render(&L, 1, &o, NULL, err, sizeof err);
    dpmem_log_close(&L);
    return 1;
}

#endif
