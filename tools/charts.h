/* charts.h — the PNG charts of dpmem-report --charts DIR:
     breakdown.png  a stacked bar per run by category (memory at its peak), and beside it each run's
                    peak relative to the baseline run;
     tradeoff.png   peak memory against mean step time, one labelled point per run;
     timeline.png   the runs' timelines one above the other (tools/timeline.c);
     sweep.png      when the runs differ in exactly one configuration value (seq_len, batch_size,
                    lora rank, ...): one panel per phase, the phase's memory delta against that value
                    (log2 x axis when every value is a power of two).
   It draws from RunStats only and reads no log itself (except through timeline.c). */
#ifndef CHARTS_H
#define CHARTS_H

#include <stddef.h>

#include "runstats.h"

int charts_write(RunStats **runs, int n, int baseline, const char **cats, int n_cats, const char **scopes, int n_scopes,
                 const char *dir, char *err, size_t errlen);

/* The configuration key in which the runs differ, when there is exactly one and all its values are
   numbers (the sweep); NULL otherwise. */
const char *charts_sweep_key(RunStats **runs, int n);

#endif
