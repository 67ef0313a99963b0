#include "dpmem.h"

/* 0..n-1 skipping 3, stopping at 7: the scope must not change what break and continue do. */
#ifdef __cplusplus
extern "C"
#endif
int loop_sum(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        DPMEM_SCOPE("iteration");
        if (i == 3) continue;
        if (i == 7) break;
        s += i;
    }
    return s;
}
