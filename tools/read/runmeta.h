/* runmeta.h — what a reader of a chart must know about the runs in it, from each log's META and
   header: the model, the task when it is not the causal LM (a sequence classifier: "classify (K=3)"),
   the sequence length T, the logical and physical batch B, the precision, the device (or "plan for
   cpu": a plan run, which carries no time), the date. Charts put it in their
   titles; a value that differs between the runs of one chart is left out of the title (the chart's
   axis or legend shows it).

   Not here: drawing (the charts) or numbers of memory and time (tools/read/runstats.c). */
#ifndef RUNMETA_H
#define RUNMETA_H

#include <stddef.h>

#include "dpmem_read.h"

typedef struct {
    char model[96];           /* "tiny (dim 128, 2 layers)" */
    char task[40];            /* "classify (K=3)" (META config.task, config.num_labels); "" for the causal
                                 LM (config.task lm, or none: logs from before the task existed) */
    char seq[24];             /* config.seq_len */
    long b_logical, b_physical;   /* 0: unknown */
    char precision[16];       /* "fp32", "bf16" */
    int ckpt;                 /* activation checkpointing: 1, 0, or -1 unknown */
    char device[48];          /* "cpu", "cuda", "plan for cuda" */
    int plan;                 /* the plan backend: predicted memory only, no time */
    char date[32];            /* "2026-05-01 08:13 UTC" from the header's start time ("" unknown) */
    double mem_limit;         /* config.mem_limit, bytes (0: unknown) */
} RunMeta;

void runmeta_of(RunMeta *m, const DpmemLog *L);
/* "tiny (dim 128, 2 layers) · T=512 · B=8 (physical 4) · fp32 · cpu · 2026-05-01" for the fields that
   all n runs agree on (the date: the first run's day; one run: to the minute); a classifier's runs
   say their task after the model ("· classify (K=3) ·"), and runs of different tasks say each
   ("· tasks: causal LM, classify (K=3) ·": nothing else in a chart tells them apart). */
void runmeta_summary(const RunMeta *m, int n, char *out, size_t len);

#endif
