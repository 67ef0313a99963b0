"""test_python_logread.py — dpmem.logread (python/dpmem/logread.py) against build/dpmem-report and
against the reader it replaced (kept below as `reference`: the whole file in memory, every event
sorted, the live dict copied at each new peak), on logs the kit writes from Python:
  - 4 threads tagging and freeing across several chunks each: the same META, strings, peak, peak time
    and breakdown at the peak as the reference, and the report's peak and categories at the peak;
  - 40000 tags, each a new peak: read in under 5 s (the copy at each peak made it quadratic: over
    15 s), the peak and the 40000 tags at it exact;
  - the threads' log with 1 GiB of hole after it (a sparse log): the same answers, in under 3 s, and
    the reader's peak RSS grows by less than 64 MiB (it read the whole file: 1 GiB more).
Run by tests/test_python_kit.sh: python3 tests/test_python_logread.py BUILD TMPDIR."""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import threading
import time

BUILD, TMP = sys.argv[1], sys.argv[2]
import dpmem  # noqa: E402
from dpmem import logread  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def report(log):
    out = os.path.join(TMP, os.path.basename(log) + ".json")
    r = subprocess.run([os.path.join(BUILD, "dpmem-report"), log, "--json", out, "-q"], capture_output=True, text=True)
    check(r.returncode == 0, "dpmem-report %s exited %d: %s" % (log, r.returncode, r.stderr.strip()))
    with open(out) as f:
        return json.load(f)[0]


def reference(path):
    """The reader before issue 27, verbatim in what it computes."""
    with open(path, "rb") as f:
        data = f.read()
    version, header, chunk = struct.unpack_from("<III", data, 8)
    meta, strings, events, metas, closed = {}, {}, [], [], False
    for base in range(header, len(data) - 31, chunk):
        if struct.unpack_from("<I", data, base)[0] != 0x4B435044:
            continue
        pos, end = base + 32, min(base + chunk, len(data))
        while pos + 16 <= end:
            head, ident, ts = struct.unpack_from("<IIQ", data, pos)
            if head == 0:
                break
            typ, words = head & 0xFF, head >> 16
            if words < 2 or pos + 8 * words > end:
                break
            body = data[pos + 16:pos + 8 * words]
            if typ == 1:
                strings[ident] = body.split(b"\0", 1)[0].decode("utf-8", "replace")
            elif typ == 3:
                metas.append((ident, struct.unpack_from("<I", body)[0]))
            elif typ in (6, 7):
                addr, n = struct.unpack_from("<QQ", body)
                events.append((ts, 1 if typ == 6 else -1, ident, addr, n))
            elif typ == 13:
                closed = True
            pos += 8 * words
    for k, v in metas:
        meta[strings.get(k, "?")] = strings.get(v, "")
    live, total, peak, peak_ts, at_peak = {}, 0, -1, 0, {}
    events.sort()
    for ts, sign, tag, addr, n in events:
        name = strings.get(tag, "?")
        live[name] = live.get(name, 0) + sign * n
        total += sign * n
        if total > peak:
            peak, peak_ts = total, ts
            at_peak = {k: v for k, v in live.items() if v}
    return {"meta": meta, "strings": strings, "closed": closed, "peak_bytes": max(peak, 0), "peak_ts": peak_ts,
            "at_peak": at_peak}


def answers(log):
    return {"meta": log.meta, "strings": log.strings, "closed": log.closed, "peak_bytes": log.peak_bytes,
            "peak_ts": log.peak_ts, "at_peak": log.at_peak}


def by_category(at_peak):
    out = {}
    for tag, v in at_peak.items():
        out[logread.category(tag)] = out.get(logread.category(tag), 0) + v
    return out


# ---- 1. threads, several chunks each: the reference's answers and the report's ------------------
threads_log = os.path.join(TMP, "threads.log")
dpmem.open(threads_log)
dpmem.meta("run", "logread-threads")
dpmem.meta("config.seq_len", 32)
dpmem.meta("run", "logread-threads-last")       # the last value of a key counts


def worker(k):
    base = 0x100000 * (k + 1)
    for i in range(3000):
        dpmem.tag(base + i, 1 + (i * 37 + k) % 500, "w%d/t%d" % (k, i % 50))
        if i >= 20:
            dpmem.untag(base + i - 20)
        if i % 997 == k:
            with dpmem.scope("s%d" % k):
                dpmem.tag(0x9000000 + 64 * k, 100000 + k, "spike/w%d" % k)
                dpmem.untag(0x9000000 + 64 * k)


th = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in th:
    t.start()
for t in th:
    t.join()
dpmem.close()
check(os.path.getsize(threads_log) > 4096 + 8 * 65536, "test bug: the threads' log has too few chunks (%d bytes)"
      % os.path.getsize(threads_log))
want = reference(threads_log)
got = answers(logread.read(threads_log))
for k in want:
    check(got[k] == want[k], "threads: %s differs from the reference reader: %r vs %r" % (k, str(got[k])[:300], str(want[k])[:300]))
check(got["meta"].get("run") == "logread-threads-last", "threads: META run %r" % got["meta"].get("run"))
rep = report(threads_log)
check(rep["peak_bytes"] == got["peak_bytes"], "threads: peak %d, dpmem-report %d" % (got["peak_bytes"], rep["peak_bytes"]))
for cat, v in by_category(got["at_peak"]).items():
    check(rep.get("at_peak." + cat) == v, "threads: %s at the peak %d, dpmem-report %s" % (cat, v, rep.get("at_peak." + cat)))

# ---- 2. 40000 tags, each a new peak: linear time -------------------------------------------------
N = 40000
rising_log = os.path.join(TMP, "rising.log")
dpmem.open(rising_log)
for i in range(N):
    dpmem.tag(0x1000000 + 16 * i, 1 + i % 7, "r/t%d" % i)
dpmem.close()
t0 = time.monotonic()
log = logread.read(rising_log)
secs = time.monotonic() - t0
total = sum(1 + i % 7 for i in range(N))
check(log.peak_bytes == total and len(log.at_peak) == N and log.at_peak["r/t39999"] == 1 + 39999 % 7,
      "rising: peak %d (want %d), %d tags at the peak (want %d)" % (log.peak_bytes, total, len(log.at_peak), N))
check(secs < 5.0, "rising: %d tags, each a new peak, read in %.2f s (want < 5 s: linear)" % (N, secs))
check(report(rising_log)["peak_bytes"] == total, "rising: dpmem-report's peak differs")
print("logread: %d rising tags in %.3f s" % (N, secs))

# ---- 3. a sparse log: memory bounded, the hole skipped ----------------------------------------------
sparse_log = os.path.join(TMP, "sparse.log")
shutil.copyfile(threads_log, sparse_log)
with open(sparse_log, "r+b") as f:
    f.truncate(os.path.getsize(threads_log) + (1 << 30))
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss     # KiB
t0 = time.monotonic()
got = answers(logread.read(sparse_log))
secs = time.monotonic() - t0
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
for k in want:
    check(got[k] == want[k], "sparse: %s differs from the log without the hole" % k)
check(grew < 64 * 1024, "sparse: reading a log with 1 GiB of hole raised the peak RSS by %d KiB (want < 64 MiB)" % grew)
check(secs < 3.0, "sparse: read in %.2f s (want < 3 s)" % secs)
print("logread: a log with 1 GiB of hole in %.3f s, peak RSS +%d KiB" % (secs, grew))

print("%s: %d failure(s)" % ("test_python_logread", len(failures)))
sys.exit(1 if failures else 0)
