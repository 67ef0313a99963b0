/* Compiled out (DPMEM_DISABLE), a program that is clean with the kit must stay clean without it:
   every call of dpmem.h and dpmem_cuda.h below takes variables that nothing else uses (they would be
   "unused" or "set but not used" if the macros dropped their arguments), every value-returning call
   also stands alone as a statement (nvcc: "#174-D expression has no effect"), and no argument may be
   evaluated (evaluated() counts). test_kit_compile.sh builds it with gcc and clang (C99, C11), g++,
   clang++ and nvcc, warnings as errors, checks with nm that no dpmem or NVTX symbol is left, and runs
   it: it prints "evaluated=0 cuda=<0|1>". WITH_CUDA: dpmem_cuda.h too (the CUDA headers are there). */
#define DPMEM_DISABLE
#define DPMEM_IMPLEMENTATION
#ifdef WITH_CUDA
#include "dpmem_cuda.h"
#else
#include "dpmem.h"
#endif
#include <stdio.h>

static int evaluations;
static const char *evaluated(const char *s) { evaluations++; return s; }
static void hook_scope(void *user, int begin, uint32_t id, uint64_t ts) { (void)user; (void)begin; (void)id; (void)ts; }
static int hook_info(void *user, size_t *used, size_t *total) { (void)user; *used = *total = 0; return 0; }
static void hook_close(void *user) { (void)user; }

static void kit(void) {
    const char *log = "run.log", *key = "k", *value = "v", *tag = "params/w", *label = "s", *name = "n";
    const char *category = "params", *msg = "w";
    char buf[64];
    void *p = buf;
    size_t bytes = sizeof buf, used = 1, total = 2;
    int space = DPMEM_HOST, index = 0, max = 4;
    long long number = 1;
    uint32_t id = 1, ids[4], thread = 1;
    uint64_t begin = 1, gpu = 2, value64 = 3;
    void *user = NULL;
    if (dpmem_open(log) != 0) puts("open failed");
    dpmem_open(log);
    dpmem_open(evaluated("x.log"));
    dpmem_close();
    dpmem_logging();
    dpmem_meta(key, value);
    dpmem_meta_int(key, number);
    dpmem_range_push(name);
    dpmem_range_pop();
    DPMEM_SCOPE(name);
    { DPMEM_SCOPE_DYN(evaluated("dyn")); }
    DPMEM_TAG_ALLOC(p, bytes, tag);
    DPMEM_TAG_FREE(p);
    DPMEM_SNAPSHOT(label);
    dpmem_tag_alloc(p, bytes, evaluated(tag));
    dpmem_tag_alloc_space(p, bytes, tag, space);
    dpmem_tag_free(p);
    dpmem_snapshot(label);
    dpmem_live_bytes(category);
    dpmem_peak_bytes(category);
    dpmem_bytes_at_peak(category);
    dpmem_live_bytes_in(space);
    dpmem_category_count();
    dpmem_category_name(index);
    dpmem_tag_bytes(p);
    dpmem_reset_peak();
    dpmem_oom(bytes, tag, space, used, total);
    dpmem_now_ns();
    dpmem_thread_name(name);
    dpmem_thread_index();
    dpmem_set_scope_hook(hook_scope, user);
    dpmem_set_device_info(hook_info, user);
    dpmem_set_close_hook(hook_close, user);
    dpmem_log_gpu_time(thread, id, begin, gpu);
    dpmem_log_device_sample(used, total);
    dpmem_warn(msg, value64);
    dpmem_intern(name);
    dpmem_string(id);
    dpmem_scope_stack(ids, max);
    size_t live = dpmem_live_bytes(NULL) + dpmem_tag_free(p);
    if (live != 0) puts("live bytes under DPMEM_DISABLE");
}

#ifdef WITH_CUDA
static int cuda(void) {
    float *d = NULL;
    void *v = NULL;
    const char *tag = "params/d";
    size_t bytes = 64, used = 0, total = 0;
    int on = 1, period = 5, regions = 1, counters = 1;
    cudaStream_t stream = 0;
    dpmem_cuda_init();
    dpmem_cuda_timing(on);
    dpmem_cuda_sampler(period);
    dpmem_cuda_nvtx(regions, counters);
    dpmem_cuda_set_stream(stream);
    dpmem_cuda_device_memory(&used, &total);
    cudaError_t rc = DPMEM_CUDA_MALLOC(d, bytes, tag);   /* fails without a GPU: the bare call's error */
    if (rc == cudaSuccess) DPMEM_CUDA_FREE(d);
    if (dpmem_cuda_malloc(&v, bytes, evaluated(tag)) == cudaSuccess) dpmem_cuda_free(v);
    dpmem_cuda_tag(v, bytes, tag, DPMEM_DEVICE);
    dpmem_cuda_untag(v);
    char pool[64];
    size_t pool_bytes = sizeof pool;
    dpmem_cuda_nvtx_pool(evaluated(pool), pool_bytes);
    dpmem_cuda_nvtx_pool_release(pool);
    dpmem_cuda_flush();
    dpmem_cuda_on_gpu_time(NULL, (void *)&on);
    dpmem_cuda_shutdown();
    (void)cudaGetLastError();
    return 1;
}
#else
static int cuda(void) { return 0; }
#endif

int main(void) {
    kit();
    int c = cuda();
    printf("evaluated=%d cuda=%d\n", evaluations, c);
    return 0;
}
