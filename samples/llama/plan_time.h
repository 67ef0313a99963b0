/* plan_time.h — the plan backend's predicted step time, printed beside the peak.

   plan_time_begin hangs a time ledger on a plan backend (kernels/plan/cost.h: each op's FLOPs and
   bytes at its shapes, per phase); after the planned steps plan_time_report adds the collectives of
   the ranks (which a plan of one rank does not run), turns the ledger into seconds on the device
   profile asked for (--plan-profile; default: this machine's CPU, measured once and cached beside the
   program, for --plan-for cpu; h100 for --plan-for cuda) and prints

       predicted step: 12.345 ms, 331800 tokens/s (profile cpu, measured 2026-11-29 07:10 UTC; ...)
         phase: forward 3.210 loss 0.400 backward 6.000 clip 2.000 ... (ms)

   with META plan.predicted_step_ms, plan.predicted_tokens_per_s, plan.predicted_ms.<phase>,
   plan.flops_per_step, plan.profile (and _source, _measured) in the log. A prediction, not a
   measurement: docs/SCALING.md says how close it came. Not here: the formulas and profiles (kernels/plan). */
#ifndef PLAN_TIME_H
#define PLAN_TIME_H

#include "train.h"

void plan_time_begin(KBackend *kb);   /* nothing unless kb is a plan backend (and DPMEM_PLAN_TIME is not 0) */
/* steps: the planned steps. The gradients' reduction overlaps the backward where the trainer reduces
   unit by unit as the backward finishes them (no clip phase, DPMEM_COMM_OVERLAP). 0, or -1 (the CPU
   profile could not be measured: said on stderr). */
int  plan_time_report(const TrainState *s, int steps);
void plan_time_end(KBackend *kb);

#endif
