/* dpmem_py.c — the dpmem kit as a shared library for Python (python/dpmem/__init__.py loads it with
   ctypes). The log, the counters and the NVTX ranges are dpmem.h's own code: nothing is re-written
   here. Built by mk/python.mk (build/python/libdpmem.so) and by python/setup.py (pip install). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

/* 1 when NVTX ranges are compiled in (0: built with DPMEM_NO_NVTX, no CUDA headers were found). */
int dpmem_py_has_nvtx(void) {
#ifdef DPMEM_NO_NVTX
    return 0;
#else
    return 1;
#endif
}

/* 1 when ptr has a live tag: dpmem.tag() and untag() ask first, so that a second tag of a live address or
   an untag of an unknown one raises Python's RuntimeWarning beside the kit's WARN event (a tag of 0 bytes
   is live too, which dpmem_tag_bytes cannot say). */
int dpmem_py_tagged(const void *ptr) {
    dpmem__init();
    dpmem__lock();
    const int live = ptr && dpmem__rec_find_locked((uint64_t)(uintptr_t)ptr) != NULL;
    dpmem__unlock();
    return live;
}
