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
