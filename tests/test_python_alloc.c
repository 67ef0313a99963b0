/* test_python_alloc.c — the CUDAPluggableAllocator library (python/dpmem/native/torch_alloc.c) against
   the simulated GPU of tests/test_cuda_fakert.c, called as PyTorch calls it (malloc(size, device,
   stream), free(ptr, size, device, stream)): every allocation tagged untagged/<scope path>, or the
   tag pushed on its thread; a re-tag moves the bytes to the new category; a failed cudaMalloc
   returns NULL after the OOM post-mortem; the log replays to the same bytes; the counters PyTorch's
   memory_stats() would show (dpmem_torch_stats: bytes and allocations now, at peak and in all, OOMs;
   dpmem.torch.memory_stats reads them) exact through allocations, a re-tag, an OOM, frees and a peak
   reset. No GPU needed. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "tests/check.h"
#include "tests/logread.h"
#include "tests/test_cuda_fakert.h"

#include <pthread.h>
#include <string.h>
#include <sys/types.h>

void *dpmem_torch_malloc(ssize_t size, int device, cudaStream_t stream);
void dpmem_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream);
int dpmem_torch_retag(const void *ptr, const char *tag);
void dpmem_torch_push_tag(const char *tag);
void dpmem_torch_pop_tag(void);
int dpmem_torch_stats(unsigned long long *out, int n);
void dpmem_torch_reset_peak(void);

/* The allocator's counters, in dpmem_torch_stats's order. */
enum { BYTES, BYTES_PEAK, BYTES_ALLOCATED, BYTES_FREED, COUNT, COUNT_PEAK, COUNT_ALLOCATED, COUNT_FREED, OOMS, NSTATS };
static unsigned long long st[NSTATS];
static void read_stats(void) { CHECK(dpmem_torch_stats(st, NSTATS) == NSTATS); }

/* The tag of the last ALLOC event at ptr in the log. */
static const char *alloc_tag(const LogFile *lf, const void *ptr) {
    const char *tag = NULL;
    for (size_t i = 0; i < lf->nev; i++)
        if (lf->ev[i].type == 6 && lr_u64(lf->ev[i].payload) == (uint64_t)(uintptr_t)ptr) tag = log_str(lf, lf->ev[i].id);
    return tag;
}

static void *worker(void *arg) {
    void **out = (void **)arg;
    DPMEM_SCOPE("worker");
    *out = dpmem_torch_malloc(100, 0, 0);       /* its own thread's scope path */
    return NULL;
}

int main(void) {
    char path[512];
    test_path(path, sizeof path, "python_alloc.log");
    CHECK(dpmem_open(path) == 0);

    void *none = dpmem_torch_malloc(1000, 0, 0);
    void *fwd, *act, *th = NULL;
    {
        DPMEM_SCOPE("step");
        { DPMEM_SCOPE("forward"); fwd = dpmem_torch_malloc(4096, 0, 0); }
        dpmem_torch_push_tag("activations/layers.0.mlp");
        act = dpmem_torch_malloc(8192, 0, 0);
        dpmem_torch_pop_tag();
        pthread_t t;
        pthread_create(&t, NULL, worker, &th);
        pthread_join(t, NULL);
    }
    CHECK(none && fwd && act && th);
    read_stats();
    CHECK_EQ_U(st[BYTES], 1000 + 4096 + 8192 + 100);
    CHECK_EQ_U(st[BYTES_PEAK], 1000 + 4096 + 8192 + 100);
    CHECK_EQ_U(st[COUNT], 4);
    CHECK_EQ_U(st[COUNT_PEAK], 4);
    CHECK_EQ_U(dpmem_live_bytes("untagged"), 1000 + 4096 + 100);
    CHECK_EQ_U(dpmem_live_bytes("activations"), 8192);
    CHECK_EQ_U(dpmem_live_bytes_in(DPMEM_DEVICE), 1000 + 4096 + 8192 + 100);

    /* dpmem.torch learns what the forward's buffer is */
    CHECK(dpmem_torch_retag(fwd, "params/lm_head.weight") == 0);
    CHECK_EQ_U(dpmem_live_bytes("params"), 4096);
    CHECK_EQ_U(dpmem_live_bytes("untagged"), 1000 + 100);
    CHECK(dpmem_torch_retag((void *)0x1234, "params/x") == -1);   /* not an allocation of ours */

    /* misuse: a pop without a push is a warning, then allocations fall back to the scope path */
    dpmem_torch_pop_tag();

    /* out of memory: NULL for PyTorch to raise, the post-mortem in the log first */
    fake_cuda_fail_next(cudaErrorMemoryAllocation);
    void *oom;
    { DPMEM_SCOPE("backward"); oom = dpmem_torch_malloc(1 << 20, 0, 0); }
    CHECK(oom == NULL);
    CHECK(dpmem_torch_malloc(0, 0, 0) == NULL);

    read_stats();
    CHECK_EQ_U(st[OOMS], 1);                    /* the failed request counted, the size-0 one not */
    CHECK_EQ_U(st[BYTES], 1000 + 4096 + 8192 + 100);   /* a re-tag and the failures moved nothing */
    CHECK_EQ_U(st[COUNT_ALLOCATED], 4);

    dpmem_torch_free(none, 1000, 0, 0);
    read_stats();
    CHECK_EQ_U(st[BYTES], 4096 + 8192 + 100);
    CHECK_EQ_U(st[BYTES_PEAK], 1000 + 4096 + 8192 + 100);
    dpmem_torch_reset_peak();                   /* torch.cuda.reset_peak_memory_stats() */
    read_stats();
    CHECK_EQ_U(st[BYTES_PEAK], 4096 + 8192 + 100);
    CHECK_EQ_U(st[COUNT_PEAK], 3);
    dpmem_torch_free(fwd, 4096, 0, 0);
    dpmem_torch_free(act, 8192, 0, 0);
    dpmem_torch_free(th, 100, 0, 0);
    dpmem_torch_free(NULL, 0, 0, 0);
    CHECK_EQ_U(dpmem_live_bytes(NULL), 0);
    CHECK_EQ_U(dpmem_peak_bytes(NULL), 1000 + 4096 + 8192 + 100);
    read_stats();
    CHECK_EQ_U(st[BYTES], 0);
    CHECK_EQ_U(st[COUNT], 0);
    CHECK_EQ_U(st[BYTES_PEAK], 4096 + 8192 + 100);
    CHECK_EQ_U(st[BYTES_ALLOCATED], 1000 + 4096 + 8192 + 100);
    CHECK_EQ_U(st[BYTES_FREED], 1000 + 4096 + 8192 + 100);
    CHECK_EQ_U(st[COUNT_ALLOCATED], 4);
    CHECK_EQ_U(st[COUNT_FREED], 4);
    dpmem_close();

    LogFile lf;
    char err[1024];
    CHECK(log_read(path, &lf, err, sizeof err) == 0);
    const char *t;
    CHECK((t = alloc_tag(&lf, none)) && !strcmp(t, "untagged/(no scope)"));
    CHECK((t = alloc_tag(&lf, fwd)) && !strcmp(t, "params/lm_head.weight"));   /* the re-tag's ALLOC */
    CHECK((t = alloc_tag(&lf, act)) && !strcmp(t, "activations/layers.0.mlp"));
    CHECK((t = alloc_tag(&lf, th)) && !strcmp(t, "untagged/worker"));
    CHECK(log_count(&lf, 11) == 1);                                         /* one OOM event */
    int warned = 0;
    for (size_t i = 0; i < lf.nev; i++)
        if (lf.ev[i].type == 8 && strstr(log_str(&lf, lf.ev[i].id), "allocation tag popped")) warned++;
    CHECK(warned == 1);
    /* the log replays to zero, with every ALLOC in the DEVICE space */
    long long live = 0;
    for (size_t i = 0; i < lf.nev; i++) {
        if (lf.ev[i].type == 6) { CHECK(lf.ev[i].aux == DPMEM_DEVICE); live += (long long)lr_u64(lf.ev[i].payload + 8); }
        if (lf.ev[i].type == 7) live -= (long long)lr_u64(lf.ev[i].payload + 8);
    }
    CHECK(live == 0);
    log_free(&lf);
    return check_exit("test_python_alloc");
}
