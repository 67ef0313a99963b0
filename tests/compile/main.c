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
    DPMEM_TAG_FREE(p);
    free(p);
    printf("sum=%d peak=%zu live=%zu\n", sum, dpmem_peak_bytes(NULL), dpmem_live_bytes(NULL));
    return sum == 18 ? 0 : 1;
}
