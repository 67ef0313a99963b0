/* fake_corename.c — LD_PRELOADed by tests/test_blas_core.c: OpenBLAS as it behaves on a CPU it does
   not know. openblas_get_corename() answers "Prescott" (the generic fallback) until OPENBLAS_CORETYPE
   is set, then the core asked for (the real library takes it too: it reads the same variable). So a
   trainer's re-execution with the core it chose runs here as on such a machine. */
#include <stdio.h>
#include <stdlib.h>

char *openblas_get_corename(void) {
    static char name[64];
    const char *c = getenv("OPENBLAS_CORETYPE");
    snprintf(name, sizeof name, "%s", c && *c ? c : "Prescott");
    return name;
}
