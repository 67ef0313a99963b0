"""Finds and loads libdpmem.so, the kit's C code (dpmem.h) built as a shared library, with ctypes.

Where it looks, in order: $DPMEM_LIB; the package's own folder (pip install ./python puts it there);
build/python/ of the checkout this package sits in (make python). It is loaded RTLD_GLOBAL, so that
the CUDA allocator library (libdpmem_torch_alloc.so) shares its state: one set of counters, one log."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates(name):
    env = os.environ.get("DPMEM_LIB" if name == "libdpmem.so" else "DPMEM_ALLOC_LIB")
    if env:
        return [env]
    return [os.path.join(_HERE, name), os.path.join(_HERE, "..", "..", "build", "python", name)]


def find(name):
    """The path of one of the package's libraries, or None."""
    for path in _candidates(name):
        if os.path.isfile(path):
            return os.path.abspath(path)
    return None


def _declare(lib):
    c = ctypes
    sz, s, v, i, u32, u64, p = c.c_size_t, c.c_char_p, None, c.c_int, c.c_uint32, c.c_uint64, c.c_void_p
    sigs = {
        "dpmem_open": (i, [s]), "dpmem_close": (v, []), "dpmem_logging": (i, []),
        "dpmem_meta": (v, [s, s]), "dpmem_range_push": (v, [s]), "dpmem_range_pop": (v, []),
        "dpmem_tag_alloc_space": (v, [p, sz, s, i]), "dpmem_tag_free": (sz, [p]),
        "dpmem_snapshot": (v, [s]), "dpmem_live_bytes": (sz, [s]), "dpmem_peak_bytes": (sz, [s]),
        "dpmem_bytes_at_peak": (sz, [s]), "dpmem_live_bytes_in": (sz, [i]),
        "dpmem_category_count": (i, []), "dpmem_category_name": (s, [i]), "dpmem_tag_bytes": (sz, [p]),
        "dpmem_reset_peak": (v, []), "dpmem_oom": (v, [sz, s, i, sz, sz]), "dpmem_now_ns": (u64, []),
        "dpmem_thread_name": (v, [s]), "dpmem_warn": (v, [s, u64]), "dpmem_py_has_nvtx": (i, []), "dpmem_py_tagged": (i, [p]),
        "dpmem_scope_stack": (i, [c.POINTER(u32), i]), "dpmem_string": (s, [u32]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


def load():
    path = find("libdpmem.so")
    if path is None:
        raise ImportError("dpmem: no libdpmem.so: run `make python` in the dpmem checkout, or `pip install ./python`, "
                          "or point DPMEM_LIB at one (looked in: %s)" % ", ".join(_candidates("libdpmem.so")))
    return _declare(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)), path
