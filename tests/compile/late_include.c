/* The implementation included after other headers: under -std=c11/-std=c99 <stdio.h> has already
   settled which POSIX and GNU declarations exist, too late for dpmem.h's _GNU_SOURCE. It must then
   stop with one #error that says what to do (test_kit_compile.sh), and build with -D_GNU_SOURCE or
   under -std=gnu11. */
#include <stdio.h>
#include <stdlib.h>
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

int main(void) {
    DPMEM_SCOPE("main");
    char *p = (char *)malloc(100);
    DPMEM_TAG_ALLOC(p, 100, "params/w");
    printf("peak=%zu\n", dpmem_peak_bytes(NULL));
    DPMEM_TAG_FREE(p);
    free(p);
    return 0;
}
