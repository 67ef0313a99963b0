/* steplog.h — the per-step records a trainer writes into its log as META events (docs/LOG_FORMAT.md):
     train.loss        "S L": step S (1-based) and its loss L, the mean over that step's batch
                       before the step's update, at full precision (%.17g);
     dp.sample_norms   "S I n c n c ...": step S, the index I of the first sample in the step's
                       logical batch, then each sample's gradient norm n (before clipping) and clip
                       factor c (written with --log-sample-norms; at most 24 pairs per event).
   The key is the same at every step, so the log's META list holds them in order (the reader keeps
   every META event; dpmem_log_meta returns the last). This file reads them back: no log holds them
   all in one value. A malformed record is skipped and counted. */
#ifndef STEPLOG_H
#define STEPLOG_H

#include <stddef.h>
#include <stdint.h>

#include "dpmem_read.h"

typedef struct {
    double *loss;             /* loss[i] of step step[i] */
    uint32_t *step;
    size_t n_loss;
    double *norm, *clip;      /* every logged sample's norm and clip factor */
    uint32_t *norm_step;      /* and the step it was logged at */
    size_t n_norms;
    uint32_t norm_steps;      /* distinct steps they come from */
    size_t bad;               /* records that did not parse */
} StepLog;

/* 0, or -1 when out of memory. */
int  steplog_read(StepLog *s, const DpmemLog *log);
void steplog_free(StepLog *s);

#endif
