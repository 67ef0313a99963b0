/* ranks.h — the logs of one data-parallel run (samples/llama/comm.h): under `mpirun -np N` rank R writes
   its own log (run.rankR.log) with META comm.rank and comm.world_size. Given several logs, the
   report groups those of one run (the same META run and world size) and prints one table of its
   ranks — each rank's peak, step time and all-reduce time — with the max and the sum over the ranks
   (the job's memory is the sum; its step is the slowest rank's). Not here: single-process runs
   (nothing is printed for them) or the per-log sections (dpmem_report.c). */
#ifndef RANKS_H
#define RANKS_H

#include <stdio.h>

#include "runstats.h"

/* Prints a "ranks of <run>" table for each group of rank logs among runs[0..n-1]. */
void ranks_print(RunStats **runs, int n, FILE *out);

#endif
