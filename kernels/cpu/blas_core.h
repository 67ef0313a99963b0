/* blas_core.h — which of OpenBLAS's kernels (its "core") the CPU backend runs, and a better one when
   OpenBLAS took a generic core on a CPU it does not know.

   A DYNAMIC_ARCH OpenBLAS picks its core once, when the library loads, from the CPU's family and model;
   a CPU newer than the build (Debian's 0.3.21 on family 6 model 207) or a VM's CPU with no model falls
   back to Prescott, the SSE3 kernels: about 4x slower GEMMs on an AVX-512 machine. OpenBLAS takes
   OPENBLAS_CORETYPE from the environment at that load, so a program that wants another core sets it
   and executes itself again before anything else (samples/llama/train.c: train_prefer_passive_omp,
   which the trainers, the benchmarks and the training tests call first thing in main, before MPI_Init).

   A value already in the environment (the user's, or a machine's that sets OPENBLAS_CORETYPE and
   OPENBLAS_L2_SIZE because some builds compute wrong results on its CPU) is kept, never replaced;
   OPENBLAS_L2_SIZE is never touched. Not here: the thread count (gemm.c), non-x86 CPUs (no choice). */
#ifndef KERNELS_CPU_BLAS_CORE_H
#define KERNELS_CPU_BLAS_CORE_H
#include <stddef.h>

/* The core to ask for, or NULL to leave OpenBLAS's choice: NULL when env_coretype is set (even empty),
   when `corename` (openblas_get_corename()) already has AVX2 kernels or is not a generic x86 one, or
   when the first "flags" line of `cpuinfo` (/proc/cpuinfo's text) shows neither AVX-512 (F, CD, BW, DQ
   and VL: "SkylakeX", "Cooperlake" with AVX512_BF16 too) nor AVX2 with FMA ("Haswell"). Pure. */
const char *blas_core_pick(const char *cpuinfo, const char *corename, const char *env_coretype);

/* Sets OPENBLAS_CORETYPE to blas_core_pick's core for this process (cpuinfo from /proc/cpuinfo), and
   DPMEM_BLAS_CORE to "took:set" (the core OpenBLAS took, the one set): 1 when it did, and the caller
   then executes itself again for OpenBLAS to load with it (or, when that fails, blas_core_unprefer
   takes both back); 0 when nothing was set. */
int blas_core_prefer(void);
void blas_core_unprefer(void);

/* The core in use (openblas_get_corename) and where it came from, for the run's header and the log's
   META: "set by dpmem: OpenBLAS took Prescott on this CPU", "OPENBLAS_CORETYPE=Haswell set before the
   run" or "OpenBLAS's own choice". */
const char *blas_core_name(void);
const char *blas_core_source(char *buf, size_t n);

#endif
