/* A two-file program using the kit, compiled as C99, C11, C++17 and CUDA by test_kit_compile.sh. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C"
#endif
int loop_sum(int n);

int main(void) {
    DPMEM_SCOPE("main");
    char *p = (char *)malloc(1000);
    DPMEM_TAG_ALLOC(p, 1000, "params/w");
    int sum = loop_sum(10);
    /* every call of the API as a statement: must compile warning-free also under DPMEM_DISABLE */
    dpmem_open("/dev/null"); /* refused: not a regular file */ dpmem_close(); dpmem_logging(); dpmem_meta("k", "v"); dpmem_meta_int("k", 1);
    dpmem_range_push("r"); dpmem_range_pop(); dpmem_snapshot("s"); DPMEM_SNAPSHOT("s");
    dpmem_tag_alloc(p + 1, 1, "x/y"); dpmem_tag_free(p + 1); dpmem_tag_alloc_space(p + 2, 1, "x/y", DPMEM_HOST);
    dpmem_tag_free(p + 2); dpmem_live_bytes(NULL); dpmem_peak_bytes("x"); dpmem_bytes_at_peak("x");
    dpmem_live_bytes_in(DPMEM_HOST); dpmem_category_count(); dpmem_category_name(0); dpmem_tag_bytes(p);
    dpmem_reset_peak(); dpmem_now_ns(); dpmem_thread_name("main"); dpmem_thread_index(); dpmem_intern("s");
    dpmem_string(1); dpmem_warn("w", 0); dpmem_log_device_sample(0, 0); dpmem_log_gpu_time(0, 0, 0, 0);
    { uint32_t ids[4]; dpmem_scope_stack(ids, 4); (void)ids; }
    { DPMEM_SCOPE_DYN("dyn"); }
    DPMEM_TAG_FREE(p);
    free(p);
    printf("sum=%d peak=%zu live=%zu\n", sum, dpmem_peak_bytes(NULL), dpmem_live_bytes(NULL));
    return sum == 18 ? 0 : 1;
}
