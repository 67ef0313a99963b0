/* storage.cuh — loads and stores of an activation element as fp32 whatever its storage: float, or bf16
   kept as uint16_t (kernels.h's KDT_BF16). Kernels templated on the element type E read with ld and
   write with st, so one kernel serves --precision fp32 and bf16 with the same arithmetic; a bf16 store
   rounds to nearest even exactly as the CPU's narrowing (kbf16_from_f32), so a native bf16 op gives
   the values the widen-compute-narrow path gives.
   Not here: vectorised (16-byte) access; the element-wise kernels are a few percent of a step. */
#ifndef KCUDA_STORAGE_CUH
#define KCUDA_STORAGE_CUH
#include <stdint.h>
#include "kernels_cuda.h"

static __device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float ld(const uint16_t *p, size_t i) { return kbf16_to_f32(p[i]); }
static __device__ __forceinline__ void st(float *p, size_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void st(uint16_t *p, size_t i, float v) { p[i] = kbf16_from_f32(v); }

#endif
