"""dpmem.torch: PyTorch (and Opacus) memory under dpmem's tags and scopes.

    tracker = dpmem.torch.track(model, optimizer, criterion=criterion)   # after make_private, if Opacus
    for x, y in loader:
        with tracker.step():                         # scope "step", and what it allocates is seen
            out = model(x)                           # scope "forward"; saved tensors -> activations/...
            loss = tracker.criterion(out, y)         # scope "loss"
            loss.backward()                          # scope "backward"; grads/..., per_sample_grads/...
            optimizer.step()                         # scopes "clip", "noise" (add_noise, scale_grad), "optimizer_step"
            optimizer.zero_grad()                    # scope "zero_grad"

What is tagged, each storage once (the first tag wins; views and tied weights share a storage):
  params/<name>              every parameter (and buffers/<name> for buffers), from track() on
  grads/<name>               p.grad when the backward accumulates it; Opacus's p.summed_grad as
                             grads/<name>.summed_grad
  optimizer/<name>.<key>     optimizer state (exp_avg, exp_avg_sq, step, ...) once the step made it
  activations/<module path>  tensors saved for backward (torch.autograd.graph.saved_tensors_hooks),
                             by the module running when they were saved; Opacus's captured inputs
  per_sample_grads/<name>    Opacus's p.grad_sample (hooks mode), and what its grad samplers allocate
  norms/<name>               Opacus's per-sample norms (p._norm_sample, the per-sample norm vector,
                             the clip factors)
  ghost/<module path>.<op>   what ghost clipping's norm samplers allocate (the B×T×T Gram matrices)
  untagged/<scope path>      inside tracker.step(), every other tensor an operator makes (temporaries,
                             gradients of activations, ...), so nothing is invisible; on CUDA the
                             allocator library does this for every device allocation
A tag is removed when PyTorch frees the storage (a weakref finalizer on the storage), so after the
model, the optimizer and the graph are gone nothing is left tagged.

Under torch.distributed (torchrun): each rank's log is its own (dpmem.open("run.log") opens
run.rank<R>.log) with META comm.rank, comm.world_size and comm.backend, and the collectives are scopes:
  allreduce        DDP's gradient all-reduce, a bucket at a time (a comm hook around DDP's default
                   one); Opacus's DistributedDPOptimizer.reduce_gradients (DPDDP: one per step)
  all_gather,      FSDP2's (fully_shard) collectives, through its set_custom_all_gather and
  reduce_scatter   set_custom_reduce_scatter
  comm/allreduce_bucket.<i>        DDP's bucket i
  comm/all_gather.<module path>,   the buffers FSDP2's collectives allocate
  comm/reduce_scatter.<module path>
A scope waits for its collective to finish (comm_wait=True), so that its time is the collective's:
the overlap DDP and FSDP2 would have with the backward is given up while tracking; comm_wait=False
keeps it, and the scope then covers only the launch. params_hash(model) checks that the ranks agree.

Timing: hooks tag at the moment a buffer appears (saved tensors, grads, per-sample gradients and
norms after each module's backward, operator outputs); what Opacus assigns outside any hook
(summed_grad, the noised grad) is tagged when the phase that made it ends."""
import contextlib
import functools
import hashlib
import threading
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import dpmem
from dpmem import _native

__all__ = ["track", "Tracker", "tag_tensor", "tagged", "allocation_tag", "use_cuda_allocator", "memory_stats",
           "max_memory_allocated", "memory_allocated", "reset_peak_memory_stats", "params_hash", "UNTAGGED"]

UNTAGGED = "untagged"
_lib = dpmem._lib

# ---- the storage registry: one tag per live storage, dropped when PyTorch frees it ---------------
_lock = threading.RLock()   # finalizers may run inside a registry call (a GC pass): re-entrant
_live = {}                  # data_ptr -> _Rec
_alloc = None               # the CUDA allocator library, when use_cuda_allocator() installed it


class _Rec:
    __slots__ = ("ref", "tag", "token", "owned")

    def __init__(self, ref, tag, owned):
        self.ref, self.tag, self.token, self.owned = ref, tag, object(), owned


def _category(tag):
    return tag.split("/", 1)[0]


def _on_free(ptr, token):
    try:
        with _lock:
            rec = _live.get(ptr)
            if rec is None or rec.token is not token:
                return          # the address was re-tagged for a newer storage
            del _live[ptr]
            if rec.owned:
                _lib.dpmem_tag_free(ptr)
    except Exception:           # interpreter shutdown: modules half torn down
        pass


def _storage_of(t):
    if type(t).__name__ == "DTensor":   # FSDP2's parameters and gradients: this rank's shard
        t = t.to_local()
    try:
        st = t.untyped_storage()
    except Exception:           # sparse, meta, functorch wrappers: no plain storage
        return None
    if st.device.type == "meta" or st.nbytes() == 0 or st.data_ptr() == 0:
        return None
    return st


def _tag_storage(st, tag, retag_from=(UNTAGGED,)):
    """Tags a storage unless it has a tag already (then only a tag of a category in retag_from is
    replaced). Returns True when this call tagged it."""
    ptr, n = st.data_ptr(), st.nbytes()
    device = st.device.type == "cuda"
    with _lock:
        rec = _live.get(ptr)
        if rec is not None and rec.ref() is st:
            if rec.tag == tag or _category(rec.tag) not in retag_from:
                return False
            if not rec.owned:                       # the allocator owns the record: rename it
                _alloc.dpmem_torch_retag(ptr, dpmem._b(tag))
                rec.tag = tag
                return True
            _lib.dpmem_tag_free(ptr)
            del _live[ptr]
        elif rec is not None:                       # a dead storage whose finalizer has not run yet
            if _live.pop(ptr, None) is rec and rec.owned:
                _lib.dpmem_tag_free(ptr)
        owned = not (device and _alloc is not None)
        if owned:
            _lib.dpmem_tag_alloc_space(ptr, n, dpmem._b(tag), dpmem.DEVICE if device else dpmem.HOST)
        elif _alloc.dpmem_torch_retag(ptr, dpmem._b(tag)) != 0:
            owned = True                            # made before the allocator was installed
            _lib.dpmem_tag_alloc_space(ptr, n, dpmem._b(tag), dpmem.DEVICE)
        new = _Rec(weakref.ref(st), tag, owned)
        _live[ptr] = new
        fin = weakref.finalize(st, _on_free, ptr, new.token)
        fin.atexit = False                          # at exit the log keeps what was live
        return True


def tag_tensor(t, tag):
    """Tags the storage of `t` (all of it: a view tags its whole storage) until PyTorch frees it.
    A storage already tagged keeps its tag (a WARN event says so; an `untagged/...` one is renamed).
    Returns True when it tagged."""
    dpmem._b(tag, "dpmem.torch.tag_tensor: the tag")   # refused before any record changes
    st = _storage_of(t)
    if st is None:
        return False
    if _tag_storage(st, tag):
        return True
    have = tagged(t)
    if have != tag:
        dpmem.warn("storage already tagged %s: %s not applied" % (have, tag), st.data_ptr())
    return False


def tagged(t):
    """The tag of the storage of `t`, or None."""
    st = _storage_of(t)
    if st is None:
        return None
    with _lock:
        rec = _live.get(st.data_ptr())
        return rec.tag if rec is not None and rec.ref() is st else None


def _tag_new(t, tag, retag_from=(UNTAGGED,)):
    st = _storage_of(t) if isinstance(t, torch.Tensor) else None
    return st is not None and _tag_storage(st, tag, retag_from)


# ---- context: which module is running, which tag the catch-all gives ----------------------------
_tls = threading.local()


def _modules():
    m = getattr(_tls, "modules", None)
    if m is None:
        m = _tls.modules = []
    return m


def _override():
    return getattr(_tls, "override", None)


@contextlib.contextmanager
def _tagging_as(prefix):
    old = _override()
    _tls.override = prefix
    try:
        yield
    finally:
        _tls.override = old


class _TagOutputs(TorchDispatchMode):
    """Tags every fresh storage an operator returns (not one of its inputs'): as the enclosing
    override says (ghost/..., per_sample_grads/...), else untagged/<scope path>."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        try:
            outs = [o for o in tree_leaves(out) if isinstance(o, torch.Tensor)]
            if outs:
                inputs = {s.data_ptr() for s in (_storage_of(x) for x in tree_leaves((args, kwargs))
                                                 if isinstance(x, torch.Tensor)) if s is not None}
                prefix = _override()
                for o in outs:
                    st = _storage_of(o)
                    if st is None or st.data_ptr() in inputs:
                        continue
                    tag = ("%s.%s" % (prefix, func.__name__.split(".")[0]) if prefix
                           else "/".join([UNTAGGED] + dpmem.scope_path()) if dpmem.scope_path()
                           else UNTAGGED + "/(no scope)")
                    _tag_storage(st, tag)
        except Exception as e:  # never break the user's computation
            dpmem.warn("dpmem.torch: could not tag an output of %s: %s" % (func, e))
        return out


def _mode_active():
    return getattr(_tls, "mode_depth", 0) > 0


@contextlib.contextmanager
def _catching():
    """The catch-all dispatch mode, entered once per thread however deeply nested."""
    if _mode_active():
        yield
        return
    _tls.mode_depth = 1
    try:
        with _TagOutputs():
            yield
    finally:
        _tls.mode_depth = 0


# ---- the CUDA allocator --------------------------------------------------------------------------
def use_cuda_allocator(path=None):
    """Makes every CUDA allocation of this process a tagged dpmem_cuda_malloc (untagged/<scope path>
    until dpmem.torch learns its name): torch.cuda.memory.CUDAPluggableAllocator over
    libdpmem_torch_alloc.so. Call it before the first CUDA allocation. Returns the library's path.
    PyTorch cannot read its own statistics from such an allocator (torch.cuda.max_memory_allocated()
    raises): use dpmem.torch.memory_stats(), max_memory_allocated() and memory_allocated() instead."""
    path = path or _native.find("libdpmem_torch_alloc.so")
    if path is None:
        raise RuntimeError("dpmem: no libdpmem_torch_alloc.so (built where the CUDA toolkit is: make python)")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "dpmem_torch_malloc", "dpmem_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)
    _use_allocator_library(path)
    return path


_NSTATS = 9   # dpmem_torch_stats's counters, in its order (python/dpmem/native/torch_alloc.c)


def _use_allocator_library(path):
    """Loads the allocator library and makes it the one allocation_tag() and memory_stats() talk to
    (use_cuda_allocator() does this after handing it to PyTorch; the tests, with a simulated GPU)."""
    global _alloc
    import ctypes
    lib = ctypes.CDLL(path)
    lib.dpmem_torch_retag.restype, lib.dpmem_torch_retag.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
    lib.dpmem_torch_push_tag.argtypes = [ctypes.c_char_p]
    lib.dpmem_torch_stats.restype = ctypes.c_int
    lib.dpmem_torch_stats.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int]
    lib.dpmem_torch_reset_peak.restype, lib.dpmem_torch_reset_peak.argtypes = None, []
    _alloc = lib
    return lib


# Keys of torch.cuda.memory_stats() whose meaning is the same under dpmem's allocator (it caches
# nothing: every block PyTorch holds is one cudaMalloc, so what is allocated is also what is reserved).
_TORCH_KEYS = ("allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
               "allocated_bytes.all.freed", "allocation.all.current", "allocation.all.peak",
               "allocation.all.allocated", "allocation.all.freed", "reserved_bytes.all.current",
               "reserved_bytes.all.peak", "num_ooms")


def _category_key(cat):
    """The name of a category in memory_stats()'s keys. A category named "all" would overwrite the
    totals (dpmem_bytes.all.current said 7 for a 107-byte total): it is "[all]", and "[all]" is
    "[[all]]" and so on, whatever order they come in. Other names stand as they are: the suffix
    follows the last dot, so two categories' keys never meet otherwise."""
    n = len(cat) - len(cat.lstrip("["))
    return "[%s]" % cat if cat[n:] == "all" + "]" * n else cat


def memory_stats(device=None):
    """torch.cuda.memory_stats() where dpmem's allocator serves CUDA memory (PyTorch cannot read its
    own from a CUDAPluggableAllocator), plus the kit's figures per category. A dict:
      allocated_bytes.all.{current,peak,allocated,freed}   bytes PyTorch holds from the allocator: now,
                                                           at the peak (since the last reset), in all
      allocation.all.{current,peak,allocated,freed}        the same in allocations
      reserved_bytes.all.{current,peak}                    = allocated_bytes (nothing is cached)
      num_ooms                                             allocations that failed for lack of memory
      dpmem_bytes.all.{current,peak}                       the kit's live and peak bytes, every tag in
                                                           every memory space (host tensors too)
      dpmem_bytes.<category>.{current,peak,at_peak}        per category (params, grads, activations,
                                                           ...): live, its own peak, its part of the
                                                           total at the total's peak; a category
                                                           named "all" is dpmem_bytes.[all].*, never
                                                           the totals
    The torch keys count every device together (device is accepted for torch's signature). Without
    use_cuda_allocator() they are torch.cuda.memory_stats()'s own, where CUDA is initialized."""
    import ctypes
    stats = {}
    if _alloc is not None:
        v = (ctypes.c_ulonglong * _NSTATS)()
        _alloc.dpmem_torch_stats(v, _NSTATS)
        cur, peak, total, freed, n, npeak, nall, nfreed, ooms = (int(x) for x in v)
        stats.update({"allocated_bytes.all.current": cur, "allocated_bytes.all.peak": peak,
                      "allocated_bytes.all.allocated": total, "allocated_bytes.all.freed": freed,
                      "allocation.all.current": n, "allocation.all.peak": npeak,
                      "allocation.all.allocated": nall, "allocation.all.freed": nfreed,
                      "reserved_bytes.all.current": cur, "reserved_bytes.all.peak": peak, "num_ooms": ooms})
    elif torch.cuda.is_available() and torch.cuda.is_initialized():
        own = torch.cuda.memory_stats(device)
        stats.update({k: own[k] for k in _TORCH_KEYS if k in own})
    stats["dpmem_bytes.all.current"] = dpmem.live_bytes()
    stats["dpmem_bytes.all.peak"] = dpmem.peak_bytes()
    for cat in dpmem.categories():
        key = _category_key(cat)
        stats["dpmem_bytes.%s.current" % key] = dpmem.live_bytes(cat)
        stats["dpmem_bytes.%s.peak" % key] = dpmem.peak_bytes(cat)
        stats["dpmem_bytes.%s.at_peak" % key] = dpmem.bytes_at_peak(cat)
    return stats


def max_memory_allocated(device=None):
    """torch.cuda.max_memory_allocated(): the peak of bytes PyTorch held from the allocator since the
    start or the last reset_peak_memory_stats() (0 when no CUDA memory was ever allocated)."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_allocated(device=None):
    """torch.cuda.memory_allocated(): the bytes PyTorch holds from the allocator now."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def reset_peak_memory_stats(device=None):
    """torch.cuda.reset_peak_memory_stats(): every peak of memory_stats() starts again from what is live
    now, the allocator's and the kit's (dpmem.reset_peak())."""
    if _alloc is not None:
        _alloc.dpmem_torch_reset_peak()
    elif torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats(device)
    dpmem.reset_peak()


@contextlib.contextmanager
def allocation_tag(tag):
    """CUDA allocations made in this block on this thread get `tag` (needs use_cuda_allocator())."""
    if _alloc is None:
        yield
        return
    _alloc.dpmem_torch_push_tag(dpmem._b(tag))
    try:
        yield
    finally:
        _alloc.dpmem_torch_pop_tag()


# ---- wrapping methods of objects we do not own ---------------------------------------------------
def _wrap(obj, name, before=None, after=None, scope=None, enter=None, leave=None):
    """Replaces obj.name (a method) on the instance by one that runs in `scope` and calls before()
    and after(result) around it, inside the scope; enter() before the scope opens and leave() after
    it closes, as leave(ok) (ok: False when the method raised), for a phase that spans several methods. Idempotent per
    (object, name). The wrapper holds the object weakly: stored in a tensor's own __dict__, a strong
    reference would keep the tensor alive for good."""
    orig = getattr(obj, name, None)
    if orig is None or getattr(orig, "_dpmem_wrapped", False):
        return False
    unbound = getattr(type(obj), name, None)
    if getattr(orig, "__func__", None) is getattr(unbound, "__func__", unbound) and unbound is not None:
        ref = weakref.ref(obj)
        call = lambda *a, **k: unbound(ref(), *a, **k)   # noqa: E731
    else:
        call = orig

    def wrapper(*args, **kwargs):   # no functools.wraps: its __wrapped__ would hold the object
        if enter:
            enter()
        ok = False
        try:
            with dpmem.scope(scope) if scope else contextlib.nullcontext():
                if before:
                    before()
                r = call(*args, **kwargs)
                if after:
                    after(r)
            ok = True
            return r
        finally:
            if leave:
                leave(ok)
    wrapper._dpmem_wrapped = True
    wrapper.__name__, wrapper.__doc__ = name, getattr(orig, "__doc__", None)
    object.__setattr__(obj, name, wrapper) if isinstance(obj, torch.nn.Module) else setattr(obj, name, wrapper)
    return True


def _opacus_samplers():
    """Opacus's per-layer grad samplers and ghost norm samplers, when Opacus is installed."""
    try:
        from opacus.grad_sample import GradSampleModule
        from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import \
            GradSampleHooksFastGradientClipping as Ghost
    except Exception:
        return []
    return [(GradSampleModule.GRAD_SAMPLERS, "per_sample_grads"), (Ghost.GRAD_SAMPLERS, "per_sample_grads"),
            (Ghost.NORM_SAMPLERS, "ghost")]


def _wrap_sampler(fn, category):
    if getattr(fn, "_dpmem_wrapped", False):
        return fn

    @functools.wraps(fn)
    def sampler(layer, activations, backprops):
        path = getattr(layer, "_dpmem_path", None)
        if path is None:
            return fn(layer, activations, backprops)
        with _tagging_as("%s/%s" % (category, path)), _catching():
            return fn(layer, activations, backprops)
    sampler._dpmem_wrapped = True
    return sampler


# ---- torch.distributed: the ranks, their collectives as scopes, their buffers as comm/... ---------
def _dist():
    """torch.distributed when a process group is initialised, else None."""
    try:
        import torch.distributed as dist
        return dist if dist.is_available() and dist.is_initialized() else None
    except Exception:
        return None


def _meta_world():
    """META comm.rank, comm.world_size, comm.backend, as the C trainers write them."""
    dist = _dist()
    if dist is not None:
        dpmem._meta_world(dist.get_rank(), dist.get_world_size())
        dpmem.meta("comm.backend", dist.get_backend())


def _is_ddp(m):
    """torch's DistributedDataParallel or Opacus's DifferentiallyPrivateDistributedDataParallel
    (DPDDP): wrappers whose model is m.module."""
    return (isinstance(m, torch.nn.parallel.DistributedDataParallel)
            or type(m).__name__ == "DifferentiallyPrivateDistributedDataParallel")


def _wrapped_chain(model):
    """The model and the models it wraps: Opacus's GradSampleModule (._module), DDP and DPDDP
    (.module), torch.compile (._orig_mod), outermost first."""
    chain = [model]
    while True:
        m = chain[-1]
        inner = (m._module if hasattr(m, "_module") and hasattr(m, "enable_hooks")
                 else m.module if _is_ddp(m) else getattr(m, "_orig_mod", None))
        if not isinstance(inner, torch.nn.Module) or inner in chain:
            return chain
        chain.append(inner)


def _scoped_wait(scope, launch, wait):
    """Runs launch() (a collective) in `scope`; with wait, its completion too."""
    with dpmem.scope(scope):
        r = launch()
        if wait and r is not None:
            r.wait()
        return r


def _ddp_comm_hook(state, bucket):
    """DDP's default all-reduce of one bucket, as scope "allreduce", its buffer tagged."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    group, wait = state
    _tag_new(bucket.buffer(), "comm/allreduce_bucket.%d" % bucket.index())
    return _scoped_wait("allreduce", lambda: default_hooks.allreduce_hook(group, bucket), wait)


def _hook_ddp(ddp, wait):
    """Registers the scoped all-reduce as DDP's comm hook (once per DDP: a hook cannot be removed or
    registered twice, so it stays after Tracker.close()). A DDP that has another hook is left as it is."""
    if getattr(ddp, "_dpmem_comm_hook", False) or not isinstance(ddp, torch.nn.parallel.DistributedDataParallel):
        return
    try:
        ddp.register_comm_hook((ddp.process_group, wait), _ddp_comm_hook)
        ddp._dpmem_comm_hook = True
    except RuntimeError as e:   # a hook registered already, or the first backward has run
        dpmem.warn("dpmem.torch: DDP's all-reduce is not scoped: %s" % e)


def _fsdp_comm_classes():
    try:
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter
        from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter
    except Exception:   # a torch without FSDP2's custom collectives
        return None
    return FSDPModule, AllGather, ReduceScatter, DefaultAllGather, DefaultReduceScatter


def _scoped_comm(base, scope, tag, inner, wait):
    """An FSDP2 collective (AllGather or ReduceScatter) that delegates to `inner` (FSDP2's own), its
    buffer tagged `tag` and its call a scope."""
    class Scoped(base):
        def allocate(self, size, *, dtype, device):
            t = inner.allocate(size, dtype=dtype, device=device)
            _tag_new(t, tag)
            return t

        def __call__(self, *args, **kwargs):
            return _scoped_wait(scope, lambda: inner(*args, **kwargs), wait)
    Scoped.__name__ = "DpmemScoped" + type(inner).__name__
    return Scoped()


def _hook_fsdp(model, wait):
    """FSDP2's all-gathers and reduce-scatters as scopes, for each fully_shard module of the model."""
    cls = _fsdp_comm_classes()
    if cls is None:
        return
    FSDPModule, AllGather, ReduceScatter, DefaultAllGather, DefaultReduceScatter = cls
    for name, m in model.named_modules():
        if not isinstance(m, FSDPModule) or getattr(m, "_dpmem_comm", False):
            continue
        path = _clean(name, True) or type(m).__name__
        try:
            groups = m._get_fsdp_state()._fsdp_param_groups
            if len(groups) != 1:    # no parameters of its own, or per-parameter meshes
                continue
            ag = getattr(groups[0], "_all_gather_comm", None) or DefaultAllGather()
            rs = getattr(groups[0], "_reduce_scatter_comm", None) or DefaultReduceScatter()
            m.set_custom_all_gather(_scoped_comm(AllGather, "all_gather", "comm/all_gather." + path, ag, wait))
            m.set_custom_reduce_scatter(_scoped_comm(ReduceScatter, "reduce_scatter", "comm/reduce_scatter." + path,
                                                     rs, wait))
            m._dpmem_comm = True
        except Exception as e:
            dpmem.warn("dpmem.torch: FSDP2's collectives of %s are not scoped: %s" % (path, e))


def params_hash(model, check=True):
    """A hash of the model's parameters (SHA-256 of their bytes in named_parameters order, 16 hex
    digits), written as META comm.params_hash as the C trainers write theirs. With check, under
    torch.distributed, the ranks compare theirs and a difference raises RuntimeError naming each
    rank's. An FSDP2 parameter (a DTensor) is hashed whole (full_tensor(): a gather)."""
    h = hashlib.sha256()
    with torch.no_grad():
        for _, p in model.named_parameters():
            t = p.full_tensor() if type(p).__name__ == "DTensor" else p
            h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    digest = h.hexdigest()[:16]
    dpmem.meta("comm.params_hash", digest)
    dist = _dist()
    if check and dist is not None and dist.get_world_size() > 1:
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, digest)
        if len(set(every)) > 1:
            raise RuntimeError("dpmem: the ranks' parameters differ: " +
                               ", ".join("rank %d %s" % (r, d) for r, d in enumerate(every)))
    return digest


# ---- the tracker ---------------------------------------------------------------------------------
class Tracker:
    """What track() returns: hooks on the model, the optimizer and Opacus's objects, and step()."""

    def __init__(self, model, optimizer=None, criterion=None, *, saved_tensors=True, catch_all=None,
                 opacus=True, phases=True, comm_wait=True):
        self._model = weakref.ref(model)
        self._optimizer = weakref.ref(optimizer) if optimizer is not None else None
        self._names = {}            # id(param) -> name
        self._params = []           # weakrefs
        self._handles = []
        self.saved_tensors = saved_tensors
        # on CUDA the allocator sees everything; elsewhere the dispatch mode does (inside step())
        self.catch_all = (_alloc is None) if catch_all is None else catch_all
        gsm = model if hasattr(model, "_module") and hasattr(model, "enable_hooks") else None
        self._gsm_ref = weakref.ref(gsm) if gsm is not None else (lambda: None)
        # module backward hooks only where Opacus put its own (they change how outputs may be used)
        self.opacus = opacus and (gsm is not None or hasattr(model, "autograd_grad_sample_hooks"))
        self._hooks_cm = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._closed = False
        self._wrapped = []          # (weakref to object, method name): undone by close()
        chain = _wrapped_chain(model)
        ddp = any(_is_ddp(m) for m in chain)    # names lose DDP's "module." prefix too
        self.comm_wait = comm_wait
        if _dist() is not None:
            _meta_world()
            for m in chain:
                _hook_ddp(m, comm_wait)
            _hook_fsdp(model, comm_wait)

        for name, p in model.named_parameters(remove_duplicate=False):
            name = _clean(name, ddp)
            self._names.setdefault(id(p), name)
            self._params.append(weakref.ref(p))
            _tag_new(p, "params/" + name)
            if p.requires_grad and hasattr(p, "register_post_accumulate_grad_hook"):
                # a hook on a tensor is held by C++, where the garbage collector cannot see a
                # cycle: it reaches the tracker through a weak reference only
                self._handles.append(p.register_post_accumulate_grad_hook(_weakly(self._on_grad)))
        for name, b in model.named_buffers():
            _tag_new(b, "buffers/" + _clean(name, ddp))
        for name, m in model.named_modules():
            m._dpmem_path = _clean(name, ddp) or type(m).__name__
            self._handles.append(m.register_forward_pre_hook(self._enter_module))
            self._handles.append(m.register_forward_hook(self._leave_module, always_call=True))
            if self.opacus and any(True for _ in m.parameters(recurse=False)):
                self._handles.append(m.register_full_backward_hook(self._after_module_backward))
        if phases:
            self._handles.append(model.register_forward_pre_hook(self._forward_begin))
            self._handles.append(model.register_forward_hook(self._forward_end, always_call=True))
        if opacus:
            for table, category in _opacus_samplers():
                for k in list(table):
                    table[k] = _wrap_sampler(table[k], category)
            if gsm is not None and phases:
                self._wrap(gsm, "get_clipping_coef", scope="clip", after=self._tag_clip_factors)
                self._wrap(gsm, "disable_hooks", after=lambda _: self._push_phase("second_backward"))
                self._wrap(gsm, "enable_hooks", before=self._pop_phase_if("second_backward"))
        if optimizer is not None:
            self._track_optimizer(optimizer, phases)
        self.criterion = self._wrap_criterion(criterion) if criterion is not None else None

    def _wrap(self, obj, name, **kw):
        if _wrap(obj, name, **kw):
            self._wrapped.append((weakref.ref(obj), name))

    # -- hooks --
    def _pack(self, t):
        st = _storage_of(t)
        if st is not None:
            mods = _modules()
            where = mods[-1] if mods else (dpmem.scope_path() or ["(no module)"])[-1]
            _tag_storage(st, "activations/" + where)
        # detached: the same storage without its grad_fn. Returning `t` itself would make a saved
        # output hold its own node (a cycle through C++ that a graph never run backward keeps alive)
        return t.detach()

    def _enter_module(self, m, args):
        _modules().append(m._dpmem_path)

    def _leave_module(self, m, args, out):
        mods = _modules()
        if mods and mods[-1] == m._dpmem_path:
            mods.pop()
        acts = getattr(m, "activations", None)          # Opacus's captured inputs
        if self.opacus and isinstance(acts, list) and acts:
            for t in tree_leaves(acts[-1]):
                if isinstance(t, torch.Tensor):
                    _tag_new(t, "activations/%s.opacus_input" % m._dpmem_path)

    def _forward_begin(self, m, args):
        self._push_phase("forward")
        if self.saved_tensors and not getattr(_tls, "hooks_on", False):
            self._hooks_cm.__enter__()
            _tls.hooks_on = "forward"

    def _forward_end(self, m, args, out):
        if getattr(_tls, "hooks_on", False) == "forward":
            self._hooks_cm.__exit__(None, None, None)
            _tls.hooks_on = False
        self._pop_phase_if("forward")()

    def _on_grad(self, p):
        if p.grad is not None:
            _tag_new(p.grad, "grads/" + self._names.get(id(p), "?"))

    def _after_module_backward(self, m, grad_in, grad_out):
        for p in m.parameters(recurse=False):
            self._scan_param(p)

    def _tag_clip_factors(self, coef):
        _tag_new(coef, "norms/clip_factors")
        gsm = self._gsm_ref()
        if gsm is not None:
            _tag_new(getattr(gsm, "_per_sample_gradient_norms", None), "norms/per_sample_norm")

    # -- phases as scopes (a phase opened by a hook is closed by the matching one) --
    def _push_phase(self, name):
        st = getattr(_tls, "phases", None)
        if st is None:
            st = _tls.phases = []
        st.append((name, dpmem.range_push(name)))

    def _pop_phase_if(self, name):
        def pop(*_):
            st = getattr(_tls, "phases", None)
            if st and st[-1][0] == name:
                dpmem._end(st.pop()[1])
        return pop

    # -- scans: what Opacus and the optimizer assign outside any hook --
    def _scan_param(self, p):
        name = self._names.get(id(p), "?")
        if p.grad is not None:
            _tag_new(p.grad, "grads/" + name)
        # what a sampler returned was tagged by the op that made it (ghost/<module>.sqrt, ...): the
        # attribute Opacus stores it in says what it is
        sampled = (UNTAGGED, "ghost", "per_sample_grads")
        for attr, tag in (("grad_sample", "per_sample_grads/" + name),
                          ("_current_grad_sample", "per_sample_grads/" + name),
                          ("summed_grad", "grads/%s.summed_grad" % name),
                          ("_norm_sample", "norms/" + name)):
            v = p.__dict__.get(attr)
            for t in (v if isinstance(v, (list, tuple)) else [v]):
                if isinstance(t, torch.Tensor):
                    _tag_new(t, tag, sampled)

    def scan(self):
        """Tags what appeared since the last hook (called at the end of every phase)."""
        for ref in self._params:
            p = ref()
            if p is not None:
                self._scan_param(p)
        opt = self._optimizer() if self._optimizer else None
        inner = getattr(opt, "original_optimizer", opt)
        if inner is not None:
            for p, state in inner.state.items():
                name = self._names.get(id(p), "?")
                for k, v in state.items():
                    if isinstance(v, torch.Tensor):
                        _tag_new(v, "optimizer/%s.%s" % (name, k))

    def _track_optimizer(self, opt, phases):
        inner = getattr(opt, "original_optimizer", opt)
        for group in inner.param_groups:
            for p in group["params"]:
                self._names.setdefault(id(p), "param%d" % len(self._names))
        scan = lambda *_: self.scan()   # noqa: E731
        # Opacus's DistributedDPOptimizer (DPDDP): the all-reduce of every gradient, after the noise
        self._wrap(opt, "reduce_gradients", scope="allreduce")
        if phases:
            self._handles.append(inner.register_step_pre_hook(lambda *_: self._push_phase("optimizer_step")))
            self._handles.append(inner.register_step_post_hook(
                lambda *_: (self.scan(), self._pop_phase_if("optimizer_step")())))
            self._wrap(opt, "zero_grad", scope="zero_grad", after=scan)
            # Opacus's DPOptimizer: clipping (hooks mode) or the clipped sum's copy (ghost), then noise
            self._wrap(opt, "clip_and_accumulate", scope="clip", after=scan)
            self._wrap(opt, "accumulate", scope="clip", after=scan)
            # "noise" is one phase a step, as the C trainers' (noise, then the 1/B average): it opens
            # before add_noise and closes after scale_grad, each of them a scope of its own inside it
            # (closed at once when add_noise raises: scale_grad will not run)
            end_noise = self._pop_phase_if("noise")
            self._wrap(opt, "add_noise", scope="add_noise", after=scan, enter=lambda: self._push_phase("noise"),
                       leave=lambda ok: ok or end_noise())
            self._wrap(opt, "scale_grad", scope="scale_grad", after=scan, leave=lambda ok: end_noise())
        else:
            self._handles.append(inner.register_step_post_hook(scan))

    def _wrap_criterion(self, criterion):
        tracker = self

        def wrap_loss(loss):
            if hasattr(loss, "backward") and not getattr(loss.backward, "_dpmem_wrapped", False):
                _wrap(loss, "backward", scope="backward", after=lambda _: tracker.scan())
            return loss

        def crit(*args, **kwargs):
            with dpmem.scope("loss"), tracker._saving():
                return wrap_loss(criterion(*args, **kwargs))
        return crit

    @contextlib.contextmanager
    def _saving(self):
        if self.saved_tensors and not getattr(_tls, "hooks_on", False):
            with self._hooks_cm:
                _tls.hooks_on = "step"
                try:
                    yield
                finally:
                    _tls.hooks_on = False
        else:
            yield

    # -- the public parts --
    @contextlib.contextmanager
    def step(self, name="step"):
        """One training step: a scope, and the catch-all for what no hook names (on CPU; the CUDA
        allocator does it on the GPU). Saved-tensor hooks are on in the forward and the loss only:
        torch.func (Opacus's functorch per-sample gradients) refuses to run under them."""
        with dpmem.scope(name), (_catching() if self.catch_all else contextlib.nullcontext()):
            yield self
        self.scan()

    def phase(self, name):
        """A scope for a phase track() cannot see by itself (e.g. loss.backward() of a loss not made
        by tracker.criterion); it scans for new buffers when it ends."""
        tracker = self

        @contextlib.contextmanager
        def cm():
            with dpmem.scope(name):
                yield
            tracker.scan()
        return cm()

    def close(self):
        """Removes the hooks and the method wrappers (tags stay until the storages are freed)."""
        if self._closed:
            return
        self._closed = True
        for h in self._handles:
            h.remove()
        self._handles = []
        for ref, name in self._wrapped:
            obj = ref()
            if obj is not None and name in obj.__dict__:
                object.__delattr__(obj, name)
        self._wrapped = []
        model = self._model()
        if model is not None:
            for m in model.modules():   # Opacus's samplers stay wrapped: without a path they pass through
                m.__dict__.pop("_dpmem_path", None)


def _unpack(t):
    return t


def _weakly(method):
    ref = weakref.WeakMethod(method)

    def call(*args):
        m = ref()
        if m is not None:
            m(*args)
    return call


def _clean(name, ddp=False):
    """Parameter and module names without the wrappers' prefixes (Opacus's _module., compile's
    _orig_mod., and DDP's and DPDDP's module. where the model is wrapped in one)."""
    prefixes = ("_module", "_orig_mod") + (("module",) if ddp else ())
    stripped = True
    while stripped:
        stripped = False
        for prefix in prefixes:
            if name.startswith(prefix + "."):
                name, stripped = name[len(prefix) + 1:], True
    return "" if name in prefixes else name


def track(model, optimizer=None, criterion=None, **options):
    """Tags the model's parameters now, and from now on its gradients, the optimizer's state, the
    tensors saved for backward and Opacus's buffers; opens the standard loop's phases as scopes.
    Call it after Opacus's make_private (pass what it returned), and after DDP, DPDDP or fully_shard
    wrapped the model (under torch.distributed it scopes their collectives). Options: saved_tensors=True,
    catch_all (default: on unless the CUDA allocator is installed), opacus=True, phases=True,
    comm_wait=True (a collective's scope waits for it to finish).
    Returns a Tracker: tracker.step() around each step, tracker.criterion for the loss."""
    return Tracker(model, optimizer, criterion, **options)
