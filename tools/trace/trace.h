/* trace.h — a dpmem log as Chrome Trace Event JSON (opens in ui.perfetto.dev and chrome://tracing):
   scopes as B/E slices on their thread's track, device times (GPU_TIME) as slices on a "GPU" track
   per thread, live bytes per category (and the total, and device used) as counter tracks, allocations,
   frees, snapshots, warnings and OOMs as instant events with their arguments, the run's META as
   metadata. Streams: the output is written event by event in one merged pass.

   Time is in microseconds from the log's start (the earliest log's, for several), with nanosecond
   decimals. */
#ifndef TRACE_H
#define TRACE_H

#include <stdio.h>

#include "read/dpmem_read.h"

typedef struct {
    int no_allocs;            /* leave out the per-allocation instant events (smaller files) */
} TraceOptions;

int trace_write(const DpmemLog *log, FILE *f, const TraceOptions *o);   /* 0, or -1 (write error / no memory) */
/* Several logs in one trace, a process each (a data-parallel job's ranks: pid = rank + 1, named
   "dpmem: <run> [rank R]"), on one time axis from the earliest log's start (the writers' clock is
   CLOCK_MONOTONIC-based: one machine's processes share it). */
int trace_write_many(const DpmemLog *const *logs, int n, FILE *f, const TraceOptions *o);

#endif
