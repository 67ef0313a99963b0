/* kit_plugin.c — a plugin (a shared library loaded with dlopen) that carries its own copy of the kit,
   as a library built with its own DPMEM_IMPLEMENTATION does. test_kit_plugin.c loads it. */
#define DPMEM_IMPLEMENTATION
#define DPMEM_NO_NVTX
#include "dpmem.h"

int plugin_work(void);

/* One scope and one tagged buffer per call; the peak seen by the copy of the kit that counted it. */
int plugin_work(void) {
    static char buf[1000];
    DPMEM_SCOPE("plugin");
    dpmem_tag_alloc(buf, sizeof buf, "plugin/buf");
    dpmem_tag_free(buf);
    return (int)dpmem_peak_bytes(NULL);
}
