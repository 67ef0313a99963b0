"""test_python_kit.py — python/dpmem (no torch): tags, queries, scopes and misuse, against the log as the
tools read it (build/dpmem-trace's JSON, build/dpmem-report's JSON) and against what an NVTX tool
receives (tests/nvtx_inject.c, attached through NVTX_INJECTION64_PATH as Nsight attaches).
Run by tests/test_python_kit.sh: python3 tests/test_python_kit.py BUILD TMPDIR."""
import ctypes
import json
import os
import subprocess
import sys
import threading
import warnings

BUILD, TMP = sys.argv[1], sys.argv[2]
INJECT = os.path.abspath(os.path.join(BUILD, "tests", "libnvtx_inject.so"))
os.environ["NVTX_INJECTION64_PATH"] = INJECT          # before the kit's first NVTX call
warnings.simplefilter("ignore", RuntimeWarning)       # misuse warns on purpose below

import dpmem  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def tool(name, *args):
    r = subprocess.run([os.path.join(BUILD, "dpmem-" + name)] + list(args), capture_output=True, text=True)
    check(r.returncode == 0, "dpmem-%s %s exited %d: %s" % (name, " ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


def trace(log):
    out = os.path.join(TMP, os.path.basename(log) + ".json")
    tool("trace", log, "-o", out)
    with open(out) as f:
        return json.load(f)


def scopes_by_thread(tr):
    """thread id -> [(ph, name)] of the B/E events, in order."""
    by = {}
    for e in tr["traceEvents"]:
        if e.get("ph") in ("B", "E") and e.get("cat", "") != "gpu":
            by.setdefault(e["tid"], []).append((e["ph"], e.get("name", "")))
    return by


def balanced(events):
    """True when every E closes the innermost open B of the same name (the trace names E events by
    their BEGIN; an unnamed E is accepted)."""
    st = []
    for ph, name in events:
        if ph == "B":
            st.append(name)
        elif not st or (name and st[-1] != name):
            return False
        else:
            st.pop()
    return not st


# ---- 1. tags, queries, nested scopes: exact numbers -----------------------------------------------
log1 = os.path.join(TMP, "kit.log")
dpmem.open(log1)
dpmem.meta("run", "python-kit")
dpmem.meta("config.seq_len", 64)
check(dpmem.logging(), "logging() after open")


@dpmem.scope("step")
def step(i):
    with dpmem.scope("forward"):
        dpmem.tag(0x10000, 1000, "activations/h")
        dpmem.tag(0x20000, 3000, "activations/big")
    with dpmem.scope("backward"):
        dpmem.tag(0x30000, 500, "grads/w")
        check(dpmem.untag(0x20000) == 3000, "untag returns the bytes")
        with dpmem.scope("clip"):
            check(dpmem.scope_path() == ["step", "backward", "clip"], "scope_path inside clip: %s" % dpmem.scope_path())
    dpmem.untag(0x10000)
    dpmem.untag(0x30000)


dpmem.tag(0x1000, 4096, "params/w")
step(0)
step(1)
check(dpmem.live_bytes() == 4096, "live total after the steps: %d" % dpmem.live_bytes())
check(dpmem.peak_bytes() == 4096 + 1000 + 3000 + 500, "peak: %d" % dpmem.peak_bytes())
check(dpmem.bytes_at_peak("activations") == 4000, "activations at the peak: %d" % dpmem.bytes_at_peak("activations"))
check(dpmem.bytes_at_peak("grads") == 500, "grads at the peak: %d" % dpmem.bytes_at_peak("grads"))
check(dpmem.peak_bytes("grads") == 500, "grads' own peak: %d" % dpmem.peak_bytes("grads"))
check(dpmem.categories() == ["params", "activations", "grads"], "categories: %s" % dpmem.categories())
check(dpmem.tag_bytes(0x1000) == 4096, "tag_bytes")
dpmem.snapshot("end")
dpmem.untag(0x1000)
dpmem.close()
check(not dpmem.logging(), "logging() after close")

rep_path = os.path.join(TMP, "kit.json")
tool("report", log1, "--json", rep_path, "-q")
with open(rep_path) as f:
    rep = json.load(f)[0]
check(rep["run"] == "python-kit" and rep["closed"] == 1, "report: run name and clean close")
check(rep["peak_bytes"] == 8596 and rep["at_peak.activations"] == 4000, "report: peak %s" % rep["peak_bytes"])
check(rep["scope.step.count"] == 2 and rep["scope.clip.count"] == 2, "report: scope counts")
check(rep["warnings"] == 0, "report: no warnings in a correct run (%s)" % rep["warnings"])
check(rep["config.seq_len"] == "64", "report: config.seq_len")
ev = scopes_by_thread(trace(log1))
main_events = max(ev.values(), key=len)
check(balanced(main_events), "scopes balanced and nested in the log")
check([n for ph, n in main_events if ph == "B"] == ["step", "forward", "backward", "clip"] * 2,
      "scope order in the log: %s" % [n for ph, n in main_events if ph == "B"])

# ---- 2. misuse: warnings in the log, never a crash or a wrong total -------------------------------
log2 = os.path.join(TMP, "misuse.log")
dpmem.open(log2)
with warnings.catch_warnings(record=True) as raised:   # each misuse of a tag: a RuntimeWarning, as PYTHON.md says
    warnings.simplefilter("always")
    dpmem.tag(0x5000, 100, "params/a")
    check(not raised, "a first tag warned: %s" % [str(w.message) for w in raised])
    dpmem.tag(0x5000, 300, "params/a")             # tagged twice: the second replaces the first
    check(dpmem.live_bytes("params") == 300, "tagged twice: live params %d (want 300)" % dpmem.live_bytes("params"))
    check(dpmem.untag(0xdead) == 0, "untag of an unknown address returns 0")
    check(dpmem.live_bytes() == 300, "untag of an unknown address changes nothing")
    got = [(w.category, str(w.message)) for w in raised]
    check(got == [(RuntimeWarning, "dpmem: address 0x5000 tagged again without an untag: the new tag replaces the old"),
                  (RuntimeWarning, "dpmem: untag of an unknown or already untagged address 0xdead")],
          "RuntimeWarnings of a second tag and an unknown untag: %s" % got)
    check(all(w.filename == os.path.abspath(__file__) or w.filename == __file__ for w in raised),
          "the warnings point at the caller: %s" % [w.filename for w in raised])
    del raised[:]
    dpmem.tag(0x5100, 0, "params/empty")          # a tag of 0 bytes is live: its untag is no misuse
    dpmem.untag(0x5100)
    dpmem.untag(0)                                 # free(NULL): nothing
    check(not raised, "a 0-byte tag's untag or untag(0) warned: %s" % [str(w.message) for w in raised])

s = dpmem.scope("twice")
s.__enter__()
s.__exit__(None, None, None)
h = dpmem.range_push("again")
dpmem._end(h)
dpmem._end(h)                                      # ended twice

outer, inner = dpmem.scope("outer"), dpmem.scope("inner")
outer.__enter__()
inner.__enter__()
outer.__exit__(None, None, None)                   # out of order: inner ends with it
inner.__exit__(None, None, None)                   # ... and its own end is a warning, not a pop
dpmem.range_pop()                                  # nothing open: a warning

crossed = dpmem.scope("crossed")
crossed.__enter__()                                # begun on the main thread ...
t = threading.Thread(target=lambda: crossed.__exit__(None, None, None), name="closer")
t.start()
t.join()                                           # ... ended on another
with dpmem.scope("after"):                         # the main thread's next scope settles it
    check(dpmem.scope_path() == ["after"], "after a cross-thread end: %s" % dpmem.scope_path())

done = []


def worker():
    with dpmem.scope("worker"):
        with dpmem.scope("noise"):
            done.append(1)


th = [threading.Thread(target=worker, name="w%d" % i) for i in range(4)]
for x in th:
    x.start()
for x in th:
    x.join()
check(len(done) == 4, "threads ran")
dpmem.untag(0x5000)
check(dpmem.live_bytes() == 0, "all untagged: %d" % dpmem.live_bytes())
try:
    dpmem.tag(0x6000, None, "params/x")
    check(False, "tag of a bare address without nbytes raises")
except TypeError:
    pass
dpmem.close()

tool("report", log2, "--json", rep_path, "-q")
with open(rep_path) as f:
    rep = json.load(f)[0]
tr = trace(log2)
msgs = sorted(e["name"] for e in tr["traceEvents"] if e.get("name", "").startswith("warning:"))
want = ["address tagged again", "free of an unknown", "scope 'again' ended twice", "scope 'outer' ended before",
        "scope 'inner' ended twice", "range_pop without an open scope", "scope 'crossed' ended on another thread"]
for w in want:
    check(any(w in m for m in msgs), "warning in the log: %s (have %s)" % (w, msgs))
check(rep["warnings"] == len(want), "warnings counted: %s (want %d)" % (rep["warnings"], len(want)))
check(rep["end_live_bytes"] == 0 and rep["peak_bytes"] == 300, "misuse log totals: end %s peak %s"
      % (rep["end_live_bytes"], rep["peak_bytes"]))
ev = scopes_by_thread(tr)
check(all(balanced(v) for v in ev.values()), "every thread's scopes balanced after the misuse: %s" % ev)
check(sum(1 for v in ev.values() if [n for ph, n in v if ph == "B"] == ["worker", "noise"]) == 4,
      "the four worker threads' scopes")

# ---- 3. NVTX: the same ranges reach a tool -------------------------------------------------------
if dpmem.nvtx_enabled():
    inj = ctypes.CDLL(INJECT)
    inj.nvtx_capture_count.restype = ctypes.c_int
    inj.nvtx_capture_get.restype = ctypes.c_char_p
    inj.nvtx_capture_get.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.POINTER(ctypes.c_uint32),
                                     ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_char_p)]
    caps = {}
    for i in range(inj.nvtx_capture_count()):
        kind, color, thread, dom = ctypes.c_char(), ctypes.c_uint32(), ctypes.c_ulong(), ctypes.c_char_p()
        name = inj.nvtx_capture_get(i, ctypes.byref(kind), ctypes.byref(color), ctypes.byref(thread), ctypes.byref(dom))
        check(dom.value == b"dpmem", "NVTX domain %s" % dom.value)
        caps.setdefault(thread.value, []).append(("B" if kind.value == b"P" else "E", name.decode() if kind.value == b"P" else ""))
    main_nvtx = max(caps.values(), key=len)
    first = [n for ph, n in main_nvtx if ph == "B"][:8]
    check(first == ["step", "forward", "backward", "clip"] * 2, "NVTX ranges in order: %s" % first)
    check(all(balanced(v) for v in caps.values()), "NVTX pushes and pops balanced on every thread")
    workers = [x for k, v in caps.items() if v is not main_nvtx for x in v]   # thread ids are reused
    check([n for ph, n in workers if ph == "B"] == ["worker", "noise"] * 4, "NVTX ranges of the worker threads")
else:
    print("note: libdpmem.so was built without NVTX: the NVTX part is not checked")

# ---- 4. hostile input: sizes out of range, names that are not strings or not UTF-8 -----------------
def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    except Exception as e:  # noqa: BLE001 (the wrong exception is a failure, not a crash of the test)
        print("  raised %s: %s" % (type(e).__name__, e))
    return False


log4 = os.path.join(TMP, "hostile.log")
dpmem.open(log4)
base_live, base_cats = dpmem.live_bytes(), dpmem.categories()
dpmem.tag(0x7000, 100, "hostile/a")
for bad in (-1, -(2 ** 63), 2 ** 63, 2 ** 64 - 1, 2 ** 64, 10 ** 30):
    # ctypes would wrap them into a size_t: -1 became 2^64-1 and every total wrapped
    check(raises(ValueError, dpmem.tag, 0x7100, bad, "hostile/b"), "tag of %d bytes raises ValueError" % bad)
    check(raises(ValueError, dpmem.oom, bad, "hostile/b"), "oom of %d bytes raises ValueError" % bad)
check(dpmem.live_bytes() == base_live + 100 and dpmem.live_bytes("hostile") == 100,
      "refused sizes change nothing: live %d (want %d)" % (dpmem.live_bytes(), base_live + 100))
check(dpmem.tag_bytes(0x7100) == 0, "a refused tag records no address")
check(raises(TypeError, dpmem.tag, 0x7200, 10, 5), "tag=5 raises TypeError")
check(raises(TypeError, dpmem.tag, 0x7200, 10, None), "tag=None raises TypeError")
check(raises(TypeError, dpmem.oom, 10, 5), "oom with tag=5 raises TypeError")
check(raises(TypeError, dpmem.live_bytes, 5), "live_bytes(5) raises TypeError")


class FakeTensor:       # what dpmem.tag takes for a torch tensor: refused before dpmem.torch is imported
    def untyped_storage(self):
        raise AssertionError("a tensor with a non-string tag reached its storage")


check(raises(TypeError, dpmem.tag, FakeTensor(), None, 5), "a tensor tagged 5 raises TypeError")
check(dpmem.tag_bytes(0x7200) == 0 and "" not in dpmem.categories(),
      "a non-string tag records nothing (categories %s)" % dpmem.categories())
dpmem.tag(0x7300, 7, b"caf\xc3\xa9/x")             # bytes are the name as given
dpmem.tag(0x7400, 9, b"bad\xff\xfename/x")           # not UTF-8: U+FFFD for each bad byte
try:
    cats = dpmem.categories()
except UnicodeDecodeError as e:
    cats = []
    check(False, "categories() with a category that is not UTF-8: %s" % e)
check(cats == base_cats + ["hostile", "caf\u00e9", "bad\ufffd\ufffdname"], "categories: %s" % cats)
check(dpmem.live_bytes("caf\u00e9") == 7 and dpmem.live_bytes(b"bad\xff\xfename") == 9, "the bytes-named categories' bytes")
for a in (0x7000, 0x7300, 0x7400):
    dpmem.untag(a)
dpmem.tag(0x7500, 2 ** 63 - 1, "hostile/edge")       # the largest size accepted
check(dpmem.tag_bytes(0x7500) == 2 ** 63 - 1, "a tag of 2^63-1 bytes is accepted")
check(dpmem.untag(0x7500) == 2 ** 63 - 1, "untag of 2^63-1 bytes")
dpmem.tag(0x7600, 0, "hostile/empty")                # and the smallest
check(dpmem.untag(0x7600) == 0, "a tag of 0 bytes")
check(dpmem.live_bytes() == base_live, "all untagged: %d" % dpmem.live_bytes())
# An address beyond a pointer: ctypes wrapped 2^64 + 0x5000 to 0x5000 and re-tagged the live
# allocation there (its category dropped to 0).
dpmem.tag(0x5000, 64, "hostile/live")
for bad in (2 ** 64 + 0x5000, 2 ** 64, -1, -(2 ** 64) + 0x5000):
    check(raises(ValueError, dpmem.tag, bad, 8, "hostile/wrap"), "tag at address %#x raises ValueError" % bad)
    check(raises(ValueError, dpmem.untag, bad), "untag at address %#x raises ValueError" % bad)
    check(raises(ValueError, dpmem.tag_bytes, bad), "tag_bytes at address %#x raises ValueError" % bad)
check(dpmem.tag_bytes(0x5000) == 64 and dpmem.live_bytes("hostile") == 64 and "hostile/wrap" not in dpmem.categories(),
      "refused addresses leave 0x5000's tag alone: %d bytes, hostile %d" % (dpmem.tag_bytes(0x5000), dpmem.live_bytes("hostile")))
dpmem.tag(2 ** 64 - 64, 8, "hostile/top")             # the last addresses are addresses
check(dpmem.untag(2 ** 64 - 64) == 8 and dpmem.untag(0x5000) == 64, "the top address and 0x5000 untagged")
dpmem.close()

# A FIFO given to dpmem.logread.read() is refused at once, as dpmem-report refuses it (it blocked
# forever in the open); a directory too.
fifo = os.path.join(TMP, "log.fifo")
os.mkfifo(fifo)
for path, kind in ((fifo, "a FIFO"), (TMP, "a directory")):
    try:
        out = subprocess.run([sys.executable, "-c", "import sys; from dpmem import logread; logread.read(sys.argv[1])", path],
                             capture_output=True, text=True, timeout=10)
        check(out.returncode != 0 and ("%s: not a regular file (%s)" % (path, kind)) in out.stderr,
              "logread.read on %s: rc %d, %s" % (kind, out.returncode, out.stderr.strip()[-200:]))
    except subprocess.TimeoutExpired:
        check(False, "logread.read on %s still blocked after 10 s" % kind)
os.unlink(fifo)

# ---- 5. ranks: each rank of a launcher (RANK, WORLD_SIZE) its own log, named as the C trainers' ------
# samples/llama/comm.c's comm_rank_path gives these (compiled and run on these five paths)
for path, want in (("run.log", "run.rank3.log"), ("logs/run", "logs/run.rank3"), (".hidden", ".rank3.hidden"),
                   ("a.b/run", "a.b/run.rank3"), ("results/x.y.log", "results/x.y.rank3.log")):
    check(dpmem.rank_path(path, 3) == want, "rank_path(%r, 3) = %r, want %r" % (path, dpmem.rank_path(path, 3), want))
check(dpmem.world() == (0, 1), "world() without a launcher: %s" % (dpmem.world(),))


def as_rank(rank, size, code, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "DPMEM_LOG")}
    e.update(RANK=rank, WORLD_SIZE=size, **env)
    return subprocess.run([sys.executable, "-c", "import sys, dpmem\n" + code], capture_output=True, text=True,
                          env=e, timeout=60)


def rank_meta(path):
    from dpmem.logread import read
    m = read(path).meta
    return m.get("comm.rank"), m.get("comm.world_size")


# DPMEM_LOG=env.log under rank 1 of 2: env.rank1.log, with META comm.rank and comm.world_size
out = as_rank("1", "2", "dpmem.tag(0x1000, 64, 'params/w')", DPMEM_LOG=os.path.join(TMP, "env.log"))
check(out.returncode == 0 and os.path.exists(os.path.join(TMP, "env.rank1.log"))
      and not os.path.exists(os.path.join(TMP, "env.log")), "DPMEM_LOG under RANK=1: rc %d, %s, files %s"
      % (out.returncode, out.stderr.strip()[-200:], sorted(f for f in os.listdir(TMP) if f.startswith("env"))))
if out.returncode == 0:
    check(rank_meta(os.path.join(TMP, "env.rank1.log")) == ("1", "2"), "env.rank1.log's META: %s"
          % (rank_meta(os.path.join(TMP, "env.rank1.log")),))
# dpmem.open("o.log") under rank 1 of 2 opens o.rank1.log and says so
out = as_rank("1", "2", "print(dpmem.open(sys.argv[1])); dpmem.close()".replace("sys.argv[1]", repr(os.path.join(TMP, "o.log"))))
check(out.returncode == 0 and out.stdout.strip() == os.path.join(TMP, "o.rank1.log")
      and rank_meta(os.path.join(TMP, "o.rank1.log")) == ("1", "2"), "dpmem.open under RANK=1: rc %d, %r, %s"
      % (out.returncode, out.stdout.strip(), out.stderr.strip()[-200:]))
# a launcher's RANK outside its WORLD_SIZE (or not a number): open refuses, naming both; DPMEM_LOG is
# not opened (a line says so) rather than two ranks writing one log
for rank, size in (("2", "2"), ("x", "2"), ("0", "0"), ("-1", "2")):
    out = as_rank(rank, size, "dpmem.open(%r)" % os.path.join(TMP, "bad.log"))
    check(out.returncode != 0 and "RANK=%r and WORLD_SIZE=%r are not a rank of a world" % (rank, size) in out.stderr,
          "open under RANK=%s WORLD_SIZE=%s: rc %d, %s" % (rank, size, out.returncode, out.stderr.strip()[-200:]))
    out = as_rank(rank, size, "dpmem.tag(0x1000, 64, 'params/w')", DPMEM_LOG=os.path.join(TMP, "bad.log"))
    check(out.returncode == 0 and "DPMEM_LOG=%s not opened" % os.path.join(TMP, "bad.log") in out.stderr,
          "DPMEM_LOG under RANK=%s WORLD_SIZE=%s: rc %d, %s" % (rank, size, out.returncode, out.stderr.strip()[-200:]))
check(not [f for f in os.listdir(TMP) if f.startswith("bad")], "a log was written under a bad RANK: %s"
      % [f for f in os.listdir(TMP) if f.startswith("bad")])

print("%s: %d failure(s)" % ("test_python_kit", len(failures)))
sys.exit(1 if failures else 0)
