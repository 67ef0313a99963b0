"""dpmem for Python: the kit's scopes, tags, snapshots and log, written by the same C code (dpmem.h).

    import dpmem
    dpmem.open("run.log")                       # or DPMEM_LOG=run.log
    dpmem.meta("run", "opacus-ghost")
    with dpmem.scope("forward"):                # a range in the log and an NVTX range
        ...
    dpmem.tag(ptr, nbytes, "activations/x")     # an address you own (int), or a tensor / numpy array
    dpmem.untag(ptr)
    print(dpmem.peak_bytes(), dpmem.bytes_at_peak("grads"))
    dpmem.close()

For PyTorch, `dpmem.torch.track(model, optimizer)` tags parameters, gradients, optimizer state,
tensors saved for backward and Opacus's buffers by itself (docs/PYTHON.md).

Under torchrun (or any launcher that sets RANK and WORLD_SIZE, or an initialised torch.distributed)
with more than one rank, each rank writes its own log, named as the C trainers name theirs:
dpmem.open("run.log") (or DPMEM_LOG=run.log) opens run.rank<R>.log, with META comm.rank and
comm.world_size, so the tools merge the ranks' logs as they merge the C trainers'.

Misuse is never fatal: a scope ended twice, out of order or on another thread than the one that
began it, a second tag of a live address, an untag of an unknown one: each is a WARN event in the
log (and a Python RuntimeWarning), and the totals stay exact."""
import ctypes
import functools
import os
import sys
import threading
import warnings

from . import _native

HOST, DEVICE, PINNED, MANAGED = 0, 1, 2, 3

_lib, LIBRARY = _native.load()

__all__ = ["open", "close", "logging", "meta", "scope", "range_push", "range_pop", "tag", "untag", "snapshot",
           "live_bytes", "peak_bytes", "bytes_at_peak", "live_bytes_in", "categories", "tag_bytes", "reset_peak",
           "warn", "oom", "now_ns", "thread_name", "scope_path", "nvtx_enabled", "rank_path", "world",
           "HOST", "DEVICE", "PINNED", "MANAGED", "LIBRARY"]


def _b(s, what="dpmem: a name"):
    """A name for the kit: a str (UTF-8) or bytes as given; anything else is refused (bytes(5) would
    be five NULs: the empty name)."""
    if isinstance(s, str):
        return s.encode("utf-8", "replace")
    if isinstance(s, bytes):
        return s
    raise TypeError("%s must be a str (or bytes), not %s" % (what, type(s).__name__))


_SIZE_END = 1 << 63


def _size(n, what):
    """A byte count the log can hold: ctypes would wrap -1 into 2^64-1 (and every total with it), and
    the tools call a size of 2^63 or more forged."""
    n = int(n)
    if not 0 <= n < _SIZE_END:
        raise ValueError("%s must be in [0, 2^63), not %d" % (what, n))
    return n


# ---- ranks: one log per rank of a data-parallel job ----------------------------------------------
def rank_path(path, rank):
    """The log of one rank, as the C trainers name it (samples/llama/comm.c, comm_rank_path):
    run.log -> run.rank3.log, logs/run -> logs/run.rank3, a.b/run -> a.b/run.rank3."""
    path = str(path)
    slash, dot = path.rfind("/"), path.rfind(".")
    if dot >= 0 and (slash < 0 or dot > slash + 1):
        return "%s.rank%d%s" % (path[:dot], rank, path[dot:])
    return "%s.rank%d" % (path, rank)


def world():
    """(rank, world_size) of this process: torch.distributed's when a process group is initialised,
    else the launcher's RANK and WORLD_SIZE when both are set (torchrun sets them), else (0, 1).
    RANK and WORLD_SIZE that are not integers with 0 <= RANK < WORLD_SIZE raise ValueError: two
    ranks must never take one log's name."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:   # a torch without distributed support
        pass
    env = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if None in env:
        return 0, 1
    try:
        rank, size = int(env[0]), int(env[1])
    except ValueError:
        rank = size = None
    if rank is None or not 0 <= rank < size:
        raise ValueError("dpmem: the launcher's RANK=%r and WORLD_SIZE=%r are not a rank of a world (integers, "
                         "0 <= RANK < WORLD_SIZE)" % env)
    return rank, size


_world_logged = None   # the (rank, world size) the kit holds as META


def _meta_world(rank, size):
    """META comm.rank and comm.world_size, when the kit does not hold these values already: it keeps
    a key's last value and writes it again into every log it opens (dpmem.torch.track() calls this
    too, for a log opened before the launcher's ranks were known)."""
    global _world_logged
    if _world_logged == (rank, size):
        return
    _lib.dpmem_meta(b"comm.rank", str(rank).encode())
    _lib.dpmem_meta(b"comm.world_size", str(size).encode())
    _world_logged = (rank, size)


# ---- the log -------------------------------------------------------------------------------------
def open(path):  # noqa: A001 (the kit's name)
    """Starts the log at `path` (truncated), or at rank_path(path, rank) when this process is one
    rank of several (world()), with META comm.rank and comm.world_size. Returns the path opened.
    Raises OSError when it cannot (the kit says why on stderr)."""
    rank, size = world()
    path = rank_path(path, rank) if size > 1 else str(path)
    if _lib.dpmem_open(_b(path)) != 0:
        raise OSError("dpmem: cannot open the log %s" % path)
    if size > 1:
        _meta_world(rank, size)
    return path


def close():
    _lib.dpmem_close()


def logging():
    return bool(_lib.dpmem_logging())


def meta(key, value):
    """The run's configuration in the log; the tools read `run` and `config.*`."""
    _lib.dpmem_meta(_b(key), _b(str(value)))


def warn(message, value=0):
    """A WARN event in the log (and a Python RuntimeWarning)."""
    _lib.dpmem_warn(_b(message), int(value) & 0xFFFFFFFFFFFFFFFF)
    warnings.warn("dpmem: " + message, RuntimeWarning, stacklevel=3)


def snapshot(label):
    _lib.dpmem_snapshot(_b(label))


def now_ns():
    return _lib.dpmem_now_ns()


def thread_name(name):
    _lib.dpmem_thread_name(_b(name))


def nvtx_enabled():
    """False when the library was built without NVTX (no CUDA headers where it was built)."""
    return bool(_lib.dpmem_py_has_nvtx())


# ---- queries -------------------------------------------------------------------------------------
def _cat(category):
    return None if category is None else _b(category, "dpmem: a category")


def live_bytes(category=None):
    return _lib.dpmem_live_bytes(_cat(category))


def peak_bytes(category=None):
    return _lib.dpmem_peak_bytes(_cat(category))


def bytes_at_peak(category=None):
    return _lib.dpmem_bytes_at_peak(_cat(category))


def live_bytes_in(space):
    return _lib.dpmem_live_bytes_in(space)


def categories():
    """The categories seen so far; a name that is not UTF-8 reads with U+FFFD for its bad bytes."""
    return [_lib.dpmem_category_name(i).decode("utf-8", "replace") for i in range(_lib.dpmem_category_count())]


def reset_peak():
    _lib.dpmem_reset_peak()


# ---- tags ----------------------------------------------------------------------------------------
_ADDRESS_END = 1 << (8 * ctypes.sizeof(ctypes.c_void_p))


def _address(obj, what="dpmem.tag"):
    """(address, nbytes or None) of an int, a torch tensor (its storage) or a numpy array. An int
    beyond a pointer is refused: ctypes.c_void_p(2**64 + 0x5000) is 0x5000, another allocation."""
    if isinstance(obj, int):
        if not 0 <= obj < _ADDRESS_END:
            raise ValueError("%s: address %#x is out of range [0, 2^%d)" % (what, obj, 8 * ctypes.sizeof(ctypes.c_void_p))
                             if obj >= 0 else "%s: address %d is negative" % (what, obj))
        return obj, None
    if hasattr(obj, "untyped_storage"):
        st = obj.untyped_storage()
        return st.data_ptr(), st.nbytes()
    if hasattr(obj, "__array_interface__"):
        return obj.__array_interface__["data"][0], obj.nbytes
    raise TypeError("dpmem.tag: an int address, a torch tensor or a numpy array, not %s" % type(obj).__name__)


def tag(obj, nbytes=None, tag="untagged", space=HOST):  # noqa: A002 (the kit's name)
    """Records an allocation: `obj` is an address (int; nbytes required) or a tensor/array (nbytes
    defaults to its storage's). A torch tensor goes through dpmem.torch: its storage is untagged by
    itself when PyTorch frees it, and a storage already tagged keeps its first tag."""
    _b(tag, "dpmem.tag: the tag")                    # refused before anything is recorded
    if hasattr(obj, "untyped_storage"):
        from . import torch as dtorch
        return dtorch.tag_tensor(obj, tag)
    addr, n = _address(obj)
    if nbytes is None:
        nbytes = n
    if nbytes is None:
        raise TypeError("dpmem.tag: nbytes is required for a bare address")
    again = _lib.dpmem_py_tagged(ctypes.c_void_p(addr))
    _lib.dpmem_tag_alloc_space(ctypes.c_void_p(addr), _size(nbytes, "dpmem.tag: nbytes"), _b(tag, "dpmem.tag: the tag"),
                               int(space))
    if again:   # the kit replaced the record and logged a WARN
        warnings.warn("dpmem: address %#x tagged again without an untag: the new tag replaces the old" % addr,
                      RuntimeWarning, stacklevel=2)
    return True


def untag(obj):
    """Records the release of what tag() recorded; returns its bytes (0, a WARN event and a
    RuntimeWarning when the address is not tagged)."""
    addr = _address(obj, "dpmem.untag")[0]
    known = addr == 0 or _lib.dpmem_py_tagged(ctypes.c_void_p(addr))   # (untag(0) is free(NULL): nothing)
    n = _lib.dpmem_tag_free(ctypes.c_void_p(addr))
    if not known:
        warnings.warn("dpmem: untag of an unknown or already untagged address %#x" % addr, RuntimeWarning, stacklevel=2)
    return n


def tag_bytes(obj):
    return _lib.dpmem_tag_bytes(ctypes.c_void_p(_address(obj, "dpmem.tag_bytes")[0]))


def oom(nbytes, tag="untagged", space=HOST, device_used=0, device_total=0):  # noqa: A002
    """The OOM post-mortem (an OOM event and a paragraph on stderr), for an allocator with a limit."""
    _lib.dpmem_oom(_size(nbytes, "dpmem.oom: nbytes"), _b(tag, "dpmem.oom: the tag"), int(space),
                   _size(device_used, "dpmem.oom: device_used"), _size(device_total, "dpmem.oom: device_total"))


# ---- scopes --------------------------------------------------------------------------------------
# The kit keeps one scope stack per thread; this mirror of it lets a misused scope (ended twice,
# out of order, or on another thread) be reported and repaired instead of unbalancing the log.
_tls = threading.local()


class _Open:
    __slots__ = ("name", "thread", "done", "orphan")

    def __init__(self, name):
        self.name, self.thread, self.done, self.orphan = name, threading.get_ident(), False, False


def _stack():
    st = getattr(_tls, "stack", None)
    if st is None:
        st = _tls.stack = []
        t = threading.current_thread()
        if t is not threading.main_thread():
            thread_name(t.name[:31])
    return st


def _settle(st):
    """Pops this thread's scopes that another thread ended, once nothing opened later is above them."""
    while st and st[-1].orphan:
        st.pop()
        _lib.dpmem_range_pop()


def range_push(name):
    """Opens a scope on this thread; returns the handle range_pop_handle() takes (or use range_pop)."""
    st = _stack()
    _settle(st)
    e = _Open(str(name))
    _lib.dpmem_range_push(_b(e.name))
    st.append(e)
    return e


def _end(e):
    if e.done:
        warn("scope '%s' ended twice" % e.name)
        return
    e.done = True
    if e.thread != threading.get_ident():
        e.orphan = True
        warn("scope '%s' ended on another thread than the one that began it: closed when that thread next "
             "opens or ends a scope" % e.name)
        return
    st = _stack()
    _settle(st)
    if e not in st:
        return
    if st[-1] is not e:
        warn("scope '%s' ended before the %d scope(s) opened inside it: they end with it"
             % (e.name, len(st) - 1 - st.index(e)))
    while st:
        x = st.pop()
        x.done = True
        _lib.dpmem_range_pop()
        if x is e:
            break
    _settle(st)


def range_pop():
    """Closes this thread's innermost scope (a WARN event when none is open)."""
    st = _stack()
    _settle(st)
    if not st:
        warn("range_pop without an open scope on this thread")
        return
    _end(st[-1])


def scope_path():
    """This thread's open scopes, outermost first (what the kit's stack holds)."""
    return [e.name for e in _stack() if not e.orphan]


class scope:  # noqa: N801 (used like a function: `with dpmem.scope("forward"):`, `@dpmem.scope("step")`)
    """A named range in the log (and an NVTX range in the `dpmem` domain) for a `with` block or,
    as a decorator, for each call of a function."""

    def __init__(self, name):
        self.name = str(name)
        self._open = []

    def __enter__(self):
        self._open.append(range_push(self.name))
        return self

    def __exit__(self, *exc):
        # the innermost of this object's entries made on this thread (the same object may be entered
        # by several threads, or recursively)
        me = threading.get_ident()
        for k in range(len(self._open) - 1, -1, -1):
            if self._open[k].thread == me:
                _end(self._open.pop(k))
                return False
        if self._open:
            _end(self._open.pop())
        else:
            warn("scope '%s' ended without being begun" % self.name)
        return False

    def __call__(self, fn):
        name = self.name

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with scope(name):
                return fn(*args, **kwargs)
        return wrapper


# DPMEM_LOG under a launcher: the kit opens it at its first event, so each rank's own name must be in
# the environment before then (two ranks on one path: the second would write run.<pid>.log instead)
def _rank_env_log():
    if not os.environ.get("DPMEM_LOG"):
        return
    try:
        rank, size = world()
    except ValueError as e:   # no log rather than two ranks in one (dpmem.open raises the same)
        sys.stderr.write("%s: DPMEM_LOG=%s not opened\n" % (e, os.environ.pop("DPMEM_LOG")))
        return
    if size > 1:
        os.environ["DPMEM_LOG"] = rank_path(os.environ["DPMEM_LOG"], rank)
        _meta_world(rank, size)


_rank_env_log()
