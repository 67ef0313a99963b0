"""test_python_torch.py — dpmem.torch against the tensors themselves: exact bytes of params, grads,
optimizer state, saved tensors (deduplicated by storage) and Opacus's per-sample gradients and norms;
nothing tagged once the model, the optimizer and the graph are gone; the phases' scopes in the log;
memory_stats()/max_memory_allocated()/memory_allocated()/reset_peak_memory_stats() exact over dpmem's
CUDA allocator library (on the simulated GPU: without CUDA, PyTorch cannot install it).
Run by tests/test_python_torch.sh: .venv/bin/python tests/test_python_torch.py BUILD TMPDIR."""
import gc
import json
import os
import subprocess
import sys
import warnings

import torch

import dpmem
import dpmem.torch as dt

BUILD, TMP = sys.argv[1], sys.argv[2]
warnings.simplefilter("ignore")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def storages(tensors):
    """Unique storages: {data_ptr: nbytes}."""
    return {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}


class Net(torch.nn.Module):
    """Embedding -> Linear -> exp/sin (one storage saved twice) -> tied head (one storage, two names)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.fc = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.fc(self.emb(x)).exp().sin())


# ---- 1. a plain model: exact bytes ----------------------------------------------------------------
dpmem.open(os.path.join(TMP, "plain.log"))
torch.manual_seed(0)
net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
tr = dt.track(net, opt, catch_all=False)
params = storages(net.parameters())
check(len(params) == 3, "the tied head shares the embedding's storage (%d storages)" % len(params))
check(dpmem.live_bytes("params") == sum(params.values()), "params: %d, want %d" % (dpmem.live_bytes("params"), sum(params.values())))

# what autograd saves, recorded independently on an identical model, minus parameters
twin = Net()
twin.load_state_dict(net.state_dict())
x = torch.randint(0, 50, (4, 8))
saved = {}
twin_params = storages(twin.parameters())
with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.setdefault(t.untyped_storage().data_ptr(), (t.untyped_storage().nbytes(), t.detach())) and t.detach(), lambda t: t):
    twin(x).sum()
want_act = sum(n for p, (n, t) in saved.items() if p not in twin_params and p != x.untyped_storage().data_ptr())

out = net(x)
check(dpmem.live_bytes("activations") == want_act + x.untyped_storage().nbytes(),
      "saved tensors: %d tagged, want %d (deduplicated storages, with the input)" % (dpmem.live_bytes("activations"), want_act + x.untyped_storage().nbytes()))
loss = out.sum()
loss.backward()
del out, loss
xb = x.untyped_storage().nbytes()   # the input, saved by the embedding, lives on in x
check(dpmem.live_bytes("activations") == xb, "activations after the backward freed the graph: %d (want the input's %d)" % (dpmem.live_bytes("activations"), xb))
grads = storages(p.grad for p in net.parameters())
check(dpmem.live_bytes("grads") == sum(grads.values()), "grads: %d, want %d" % (dpmem.live_bytes("grads"), sum(grads.values())))
opt.step()
state = storages(v for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
check(dpmem.live_bytes("optimizer") == sum(state.values()),
      "optimizer state: %d, want %d (%d tensors)" % (dpmem.live_bytes("optimizer"), sum(state.values()), len(state)))
opt.zero_grad(set_to_none=True)
check(dpmem.live_bytes("grads") == 0, "grads after zero_grad(set_to_none): %d" % dpmem.live_bytes("grads"))

# a graph never run backward (evaluation with grad on): its saved tensors go when its output goes
base = dpmem.live_bytes("activations")
out = net(x)
check(dpmem.live_bytes("activations") > base, "a second forward saved tensors")
del out
gc.collect()
check(dpmem.live_bytes("activations") == base, "a graph dropped without backward leaves nothing tagged: %d, want %d"
      % (dpmem.live_bytes("activations"), base))

# misuse: a tensor tagged again under another name keeps its first tag, with a warning
w = net.fc.weight
before = dpmem.live_bytes()
check(not dt.tag_tensor(w, "activations/not_a_param"), "a second tag of a storage is refused")
check(dpmem.live_bytes() == before and dt.tagged(w) == "params/fc.weight", "the first tag and the total stay")
check(dpmem.untag(0x1234) == 0, "untag of an unknown address")
y = torch.empty(100)
for call in (lambda: dt.tag_tensor(y, 5), lambda: dpmem.tag(y, None, 5)):
    try:
        call()
        check(False, "a tensor tagged 5 raises TypeError")
    except TypeError:
        pass
check(dt.tagged(y) is None and dpmem.live_bytes() == before, "a tensor tagged 5: nothing recorded")
check(dt.tag_tensor(y, "activations/mine") and dpmem.live_bytes("activations") == xb + 400, "tag_tensor of a new tensor")
del y
gc.collect()
check(dpmem.live_bytes("activations") == xb, "a tagged tensor freed: untagged")

tr.close()
check("zero_grad" not in opt.__dict__ and not hasattr(net.fc, "_dpmem_path"), "close() undoes the wrappers")
base = dpmem.live_bytes()
out = net(x)
check(dpmem.live_bytes() == base, "after close() a forward tags nothing")
del out
del net, opt, tr, w, twin, saved, x
gc.collect()
check(dpmem.live_bytes() == 0, "nothing tagged after the model and optimizer are freed: %d left (%s)"
      % (dpmem.live_bytes(), {c: dpmem.live_bytes(c) for c in dpmem.categories() if dpmem.live_bytes(c)}))
dpmem.close()

# ---- 2. Opacus: per-sample gradients (hooks), norms (ghost), phases ------------------------------
from opacus import PrivacyEngine  # noqa: E402


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(40, 12)
        self.fc1 = torch.nn.Linear(12, 24)
        self.fc2 = torch.nn.Linear(24, 40)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(self.emb(x))))


def opacus_run(mode):
    log = os.path.join(TMP, "opacus-%s.log" % mode)
    dpmem.open(log)
    torch.manual_seed(1)
    model = Mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randint(0, 40, (8, 7)))
    r = PrivacyEngine().make_private(module=model, optimizer=opt, data_loader=torch.utils.data.DataLoader(data, batch_size=4),
                                     noise_multiplier=1.0, max_grad_norm=1.0, criterion=torch.nn.CrossEntropyLoss(),
                                     grad_sample_mode=mode, poisson_sampling=False)
    if mode == "ghost":
        model, opt, crit, loader = r
    else:
        (model, opt, loader), crit = r, torch.nn.CrossEntropyLoss()
    tr = dt.track(model, opt, criterion=crit)
    seen = {}
    for (b,) in loader:
        with tr.step():
            x, y = b[:, :-1].contiguous(), b[:, 1:].contiguous()
            out = model(x)
            loss = tr.criterion(out.reshape(-1, 40), y.reshape(-1), **({"shape": out.shape} if mode == "ghost" else {}))
            loss.backward()
            ps = list(model.parameters())
            if mode == "hooks":
                psg = storages(p.grad_sample for p in ps)
                seen["psg"] = (dpmem.live_bytes("per_sample_grads"), sum(psg.values()), 4 * sum(p.numel() for p in ps) * 4)
            else:
                ns = storages(p._norm_sample for p in ps)
                seen["norms"] = (dpmem.live_bytes("norms"), sum(ns.values()))
            opt.step()
            opt.zero_grad()
        del out, loss
    tr.close()
    del model, opt, crit, loader, tr, r, ps, x, y, b
    gc.collect()
    left = dpmem.live_bytes()
    dpmem.close()
    return log, seen, left


log_h, seen, left = opacus_run("hooks")
live, want, formula = seen["psg"]
check(live == want == formula, "hooks: per_sample_grads %d tagged, grad_sample %d, B*|theta|*4 = %d" % (live, want, formula))
check(left == 0, "hooks: nothing left tagged (%d)" % left)
log_g, seen, left = opacus_run("ghost")
# the norms category holds each parameter's _norm_sample (B floats) plus the per-sample norm vector
# the module keeps (B floats); the clip factors (B floats) died with Opacus's backward
live, want = seen["norms"]
check(live == want + 4 * 4, "ghost: norms %d tagged, want %d (+ the per-sample norm vector)" % (live, want + 16))
check(left == 0, "ghost: nothing left tagged (%d)" % left)


def scopes(log):
    out = os.path.join(TMP, "t.json")
    subprocess.run([os.path.join(BUILD, "dpmem-trace"), log, "-o", out, "--no-allocs"], check=True)
    with open(out) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") in ("B", "E")]
    names, depth, ok = [], 0, True
    for e in ev:
        depth += 1 if e["ph"] == "B" else -1
        ok = ok and depth >= 0
        if e["ph"] == "B":
            names.append("  " * (depth - 1) + e["name"])
    return names, ok and depth == 0


names, ok = scopes(log_h)
check(ok, "hooks: scopes balanced")
# one "noise" a step (add_noise and scale_grad inside it), as the C trainers' noise: not two
noise = ["  noise", "    add_noise", "    scale_grad"]
step = ["step", "  forward", "  loss", "  backward", "  clip"] + noise + ["  optimizer_step", "  zero_grad"]
check(names == step * 2, "hooks: the phases of two steps: %s" % names)
names, ok = scopes(log_g)
check(ok, "ghost: scopes balanced")
step = ["step", "  forward", "  loss", "  backward", "    zero_grad", "    clip", "    second_backward", "  clip",
        ] + noise + ["  optimizer_step", "  zero_grad"]
check(names == step * 2, "ghost: the phases of two steps: %s" % names)
# dpmem-report's scope table: noise, add_noise and scale_grad each once a step (2 steps), not twice
rep = subprocess.run([os.path.join(BUILD, "dpmem-report"), log_h], check=True, capture_output=True, text=True).stdout
counts = {f[0]: int(f[1]) for f in (line.split() for line in rep.splitlines()) if len(f) > 2 and f[1].isdigit()}
check([counts.get(k) for k in ("step", "noise", "add_noise", "scale_grad")] == [2, 2, 2, 2],
      "dpmem-report counts per step: %s" % {k: counts.get(k) for k in ("step", "noise", "add_noise", "scale_grad")})

# ---- memory_stats() and friends: torch.cuda's statistics, which a CUDAPluggableAllocator cannot give --
# Without use_cuda_allocator() (and no CUDA here) only the kit's figures, and no peak to report.
st = dt.memory_stats()
check("allocated_bytes.all.peak" not in st and dt.max_memory_allocated() == 0 and dt.memory_allocated() == 0,
      "torch keys without dpmem's allocator or CUDA: %s" % sorted(k for k in st if not k.startswith("dpmem_bytes")))
check(st["dpmem_bytes.all.current"] == dpmem.live_bytes() and st["dpmem_bytes.all.peak"] == dpmem.peak_bytes(),
      "dpmem_bytes.all: %d/%d" % (st["dpmem_bytes.all.current"], st["dpmem_bytes.all.peak"]))
# A category named "all" must not overwrite the totals (it reported 7 for a 107-byte total).
dpmem.open(os.path.join(TMP, "all.log"))
base = dpmem.live_bytes()
dpmem.tag(0x9000, 100, "params/w")
dpmem.tag(0x9100, 7, "all/x")
dpmem.tag(0x9200, 3, "[all]/y")                       # and the name "all" is shown as
st = dt.memory_stats()
check(st["dpmem_bytes.all.current"] == base + 110 and st["dpmem_bytes.all.peak"] == dpmem.peak_bytes(),
      "a category named all overwrote the totals: dpmem_bytes.all.current %d, want %d" % (st["dpmem_bytes.all.current"], base + 110))
check(st["dpmem_bytes.[all].current"] == 7 and st["dpmem_bytes.[[all]].current"] == 3 and "dpmem_bytes.all.at_peak" not in st,
      "the categories [all] and all: %s" % {k: v for k, v in st.items() if "all]" in k})
for a in (0x9000, 0x9100, 0x9200):
    dpmem.untag(a)
dpmem.close()
# The allocator library itself, on the simulated GPU (tests/test_cuda_fakert.c), called as PyTorch
# calls it: PyTorch's pluggable allocator cannot be installed without CUDA.
fake = os.path.join(BUILD, "tests", "libdpmem_torch_alloc_fake.so")
if not os.path.isfile(fake):
    print("memory_stats over the allocator not checked: no %s (built where the CUDA toolkit is)" % fake)
else:
    import ctypes
    lib = dt._use_allocator_library(fake)
    lib.dpmem_torch_malloc.restype = ctypes.c_void_p
    lib.dpmem_torch_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.dpmem_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.fake_cuda_fail_next.argtypes = [ctypes.c_int]
    dpmem.open(os.path.join(TMP, "stats.log"))
    A, Bb = 3 << 20, 1000
    with dt.allocation_tag("activations/layers.0"):
        a = lib.dpmem_torch_malloc(A, 0, None)
    with dpmem.scope("step"):
        b = lib.dpmem_torch_malloc(Bb, 0, None)
    st = dt.memory_stats()
    check(a and b and dt.memory_allocated() == A + Bb and dt.max_memory_allocated() == A + Bb,
          "after two allocations: allocated %d, peak %d, want %d" % (dt.memory_allocated(), dt.max_memory_allocated(), A + Bb))
    check(st["allocation.all.current"] == 2 and st["reserved_bytes.all.current"] == A + Bb and st["num_ooms"] == 0,
          "allocations %d, reserved %d, ooms %d" % (st["allocation.all.current"], st["reserved_bytes.all.current"], st["num_ooms"]))
    check(st["dpmem_bytes.activations.current"] == A and st["dpmem_bytes.untagged.current"] == Bb,
          "per category: activations %d (want %d), untagged %d (want %d)"
          % (st["dpmem_bytes.activations.current"], A, st["dpmem_bytes.untagged.current"], Bb))
    lib.fake_cuda_fail_next(2)                                     # cudaErrorMemoryAllocation
    check(not lib.dpmem_torch_malloc(1 << 20, 0, None) and dt.memory_stats()["num_ooms"] == 1, "a failed allocation: num_ooms")
    lib.dpmem_torch_free(a, A, 0, None)
    check(dt.memory_allocated() == Bb and dt.max_memory_allocated() == A + Bb,
          "after a free: allocated %d, peak %d" % (dt.memory_allocated(), dt.max_memory_allocated()))
    dt.reset_peak_memory_stats()
    st = dt.memory_stats()
    check(st["allocated_bytes.all.peak"] == Bb and st["allocation.all.peak"] == 1 and st["dpmem_bytes.activations.peak"] == 0,
          "after reset_peak_memory_stats: peak %d, allocations %d, activations peak %d"
          % (st["allocated_bytes.all.peak"], st["allocation.all.peak"], st["dpmem_bytes.activations.peak"]))
    lib.dpmem_torch_free(b, Bb, 0, None)
    st = dt.memory_stats()
    check((st["allocated_bytes.all.current"], st["allocated_bytes.all.allocated"], st["allocated_bytes.all.freed"],
           st["allocation.all.allocated"], st["allocation.all.freed"]) == (0, A + Bb, A + Bb, 2, 2),
          "at the end: %s" % {k: v for k, v in st.items() if not k.startswith("dpmem_bytes")})
    dpmem.close()

print("test_python_torch: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
