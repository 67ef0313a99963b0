#!/bin/sh
# test_python_dist.sh — dpmem.torch under torchrun: 2 ranks on gloo (python -m torch.distributed.run
# --nproc_per_node 2, one launch) with DDP (its all-reduce waited for in its scope, and overlapped:
# comm_wait=False), Opacus's DPDDP (σ = 1; hooks and ghost clipping) and FSDP2 (fully_shard on the
# CPU), a tiny model each (tests/test_python_dist.py: each rank's bytes, its parameters against a single-process
# run of the same logical batch, noise included for DPDDP, and params_hash() across the ranks). Then
# the ranks' logs as the tools read the C trainers': named run.rank<R>.log with META comm.*, the
# collectives' scopes counted per step in dpmem-trace's merged trace (a process per rank),
# dpmem-report's ranks table, dpmem-render --compare.
PY_NEEDS=torch . tests/python_env.sh
for t in dpmem-report dpmem-trace dpmem-render; do
    [ -x "$B/$t" ] || { echo "FAIL: $B/$t is not built"; exit 1; }
done
STEPS=3
"$PY" -m torch.distributed.run --standalone --nproc_per_node 2 tests/test_python_dist.py "$tmp" >"$tmp/run.out" 2>&1 \
    || { grep -E "FAIL|Error" "$tmp/run.out" | head -n 20; echo "FAIL: 2 ranks under torchrun"; exit 1; }
for mode in ddp ddp-nowait dpddp dpddp-ghost fsdp; do
    [ ! -e "$tmp/$mode.log" ] || { echo "FAIL: $mode: a log named $mode.log beside the ranks' logs"; exit 1; }
    for r in 0 1; do
        [ -s "$tmp/$mode.rank$r.log" ] || { echo "FAIL: $mode: no $mode.rank$r.log"; exit 1; }
    done
    # META as the C trainers write it, once; both ranks' parameters hash alike
    "$PY" - "$tmp" "$mode" <<'PYEOF' || exit 1
import sys
from dpmem.logread import read
tmp, mode = sys.argv[1], sys.argv[2]
hashes = []
for r in (0, 1):
    meta = read("%s/%s.rank%d.log" % (tmp, mode, r)).meta
    want = {"run": "torch-" + mode, "comm.rank": str(r), "comm.world_size": "2", "comm.backend": "gloo"}
    got = {k: meta.get(k) for k in want}
    if got != want:
        sys.exit("FAIL: %s rank %d: META %s, want %s" % (mode, r, got, want))
    hashes.append(meta.get("comm.params_hash"))
if hashes[0] is None or hashes[0] != hashes[1]:
    sys.exit("FAIL: %s: comm.params_hash %s" % (mode, hashes))
PYEOF
    "$B/dpmem-report" "$tmp/$mode.rank0.log" "$tmp/$mode.rank1.log" >"$tmp/report.$mode" 2>&1 \
        || { cat "$tmp/report.$mode"; echo "FAIL: dpmem-report on $mode's ranks"; exit 1; }
    grep -q "^== ranks of torch-$mode: 2 of 2 ranks' logs" "$tmp/report.$mode" || { cat "$tmp/report.$mode"; echo "FAIL: no ranks table for $mode"; exit 1; }
    # its rows: each rank's peak bytes = that log's peak (dpmem.logread), max and sum of the two
    "$PY" - "$tmp" "$mode" <<'PYEOF' || { cat "$tmp/report.$mode"; exit 1; }
import re, sys
from dpmem.logread import read
tmp, mode = sys.argv[1], sys.argv[2]
text = open("%s/report.%s" % (tmp, mode)).read().split("== ranks of", 1)[1]
rows = {m.group(1): int(m.group(2)) for m in re.finditer(r"^  (0|1|max|sum) +(\d+) ", text, re.M)}
peaks = [read("%s/%s.rank%d.log" % (tmp, mode, r)).peak_bytes for r in (0, 1)]
want = {"0": peaks[0], "1": peaks[1], "max": max(peaks), "sum": sum(peaks)}
if rows != want:
    sys.exit("FAIL: %s: dpmem-report's ranks table %s, want %s" % (mode, rows, want))
PYEOF
    [ "$(grep -c "settings:.*comm.world_size=2" "$tmp/report.$mode")" = 2 ] \
        && ! grep -q "settings:.*comm.world_size=2.*comm.world_size=2" "$tmp/report.$mode" \
        || { grep settings "$tmp/report.$mode"; echo "FAIL: $mode: comm.world_size not once per rank's log"; exit 1; }
    "$B/dpmem-trace" "$tmp/$mode.rank0.log" "$tmp/$mode.rank1.log" -o "$tmp/$mode.json" || { echo "FAIL: dpmem-trace on $mode"; exit 1; }
    "$B/dpmem-render" --compare "$tmp/$mode.rank0.log" "$tmp/$mode.rank1.log" -o "$tmp/$mode.png" >/dev/null \
        && [ -s "$tmp/$mode.png" ] || { echo "FAIL: dpmem-render --compare on $mode"; exit 1; }
done
# The collectives per step, on each rank (a process per rank in the merged trace): DDP one bucket at
# this size; DPDDP one reduce_gradients; FSDP2 each of the 2 sharded layers gathered for its forward
# and again for its backward (resharded after the forward), its gradient reduce-scattered once.
"$PY" - "$tmp" $STEPS <<'PYEOF' || exit 1
import collections, json, sys
tmp, steps = sys.argv[1], int(sys.argv[2])
want = {"ddp": {"allreduce": steps, "step": steps}, "ddp-nowait": {"allreduce": steps, "step": steps},
        "dpddp": {"allreduce": steps, "step": steps}, "dpddp-ghost": {"allreduce": steps, "step": steps},
        "fsdp": {"all_gather": 4 * steps, "reduce_scatter": 2 * steps, "allreduce": 0, "step": steps}}
for mode, counts in want.items():
    d = json.load(open("%s/%s.json" % (tmp, mode)))
    names = {e["pid"]: e["args"]["name"] for e in d["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"}
    if sorted(names.values()) != ["dpmem: torch-%s [rank 0]" % mode, "dpmem: torch-%s [rank 1]" % mode]:
        sys.exit("FAIL: %s: the trace's processes are %s" % (mode, sorted(names.values())))
    n = collections.Counter((e["pid"], e["name"]) for e in d["traceEvents"] if e.get("ph") == "B")
    for pid, who in names.items():
        got = {k: n[(pid, k)] for k in counts}
        if got != counts:
            sys.exit("FAIL: %s %s: scopes %s, want %s" % (mode, who, got, counts))
    print("%s: per rank %s" % (mode, ", ".join("%s %d" % kv for kv in counts.items())))
PYEOF
grep -E "^(DDP|DPDDP|FSDP2)( [^:]*)?:" "$tmp/run.out"
grep -o "rank [01]: [a-z-]*: params hash [0-9a-f]*" "$tmp/run.out" | sort
