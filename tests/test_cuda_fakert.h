/* test_cuda_fakert.h — the controls of the fake CUDA runtime (test_cuda_fakert.c) for test_cuda_fake. */
#ifndef TEST_CUDA_FAKERT_H
#define TEST_CUDA_FAKERT_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#define FAKE_TOTAL   ((size_t)1 << 30)           /* the simulated device: 1 GiB */
#define FAKE_CONTEXT ((size_t)300 << 20)         /* used before any allocation */
#define FAKE_GRANULE ((size_t)2 << 20)           /* device allocations round up to this */

typedef struct {
    long allocs, meminfo, events_created, events_alive, records, queries, syncs;
} FakeCudaStats;

void          fake_cuda_launch(uint64_t ns);     /* queue ns of GPU work after what is queued */
void          fake_cuda_fail_next(cudaError_t e);/* the next allocation fails with e */
FakeCudaStats fake_cuda_stats(void);

#endif
