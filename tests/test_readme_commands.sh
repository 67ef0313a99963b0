#!/bin/sh
# test_readme_commands.sh — runs every command block of README.md and docs/*.md marked runnable, so
# the documentation cannot rot. The marker is a line `<!-- run -->` (an HTML comment: invisible when
# rendered) right before a ```sh block. Each block runs with `sh -e` in a fresh temporary folder
# where build/ (-> $DPMEM_BUILD), tools/, samples/, kernels/, tests/ and docs/ point into the
# repository and the headers are linked, so blocks may write results/ and logs freely. Lines calling
# `make demo` or `make test` are skipped (they would run this test again); a block that fails or
# runs over 300 s fails the test, named by file and line. The blocks run as many at once as there are
# cores. Exits 0 on pass, 1 on failure.
# What a block prints, shown below it, is checked too: a plain fenced block (``` or ```text) after a
# run block, before the next heading or code block, is its output. Marked `<!-- output -->`, it must
# appear in that block's standard output, its lines contiguous and in order (trailing blanks aside),
# so a table shown as a command's output cannot go stale. One that cannot be checked (it holds times)
# is marked `<!-- dated -->` instead, and the text line just above the marker says when it was made
# (a YYYY-MM-DD date); an output block with neither marker fails the test. The same holds after a
# ```sh block that is not marked runnable (too long, or needing what the suite lacks: a GPU, torch):
# the output shown after it cannot be checked, so it must be marked dated.
B=${DPMEM_BUILD:-build}
repo=$(pwd)
case $B in /*) build=$B ;; *) build=$repo/$B ;; esac
[ -x "$build/train_vanilla" ] || { echo "FAIL: $build/train_vanilla not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
fail=0; n=0

# extract FILE: writes each marked block to $tmp/blocks/N.sh and its origin to N.where
mkdir -p "$tmp/blocks"
for f in README.md docs/*.md; do
    [ -f "$f" ] || continue
    awk -v f="$f" -v dir="$tmp/blocks" -v start="$(ls "$tmp/blocks" | grep -c '\.sh$')" '
        BEGIN { k = start }
        /^<!-- run -->[ \t]*$/ { marked = NR; next }
        /^<!-- output -->[ \t]*$/ && after { want = "expect"; next }
        /^<!-- dated -->[ \t]*$/ && after {
            want = "dated"
            if (prev !~ /20[0-9][0-9]-[0-1][0-9]-[0-3][0-9]/) print f ":" NR ": a <!-- dated --> output block without a date (YYYY-MM-DD) on the line above the marker" >> (dir "/problems")
            next
        }
        /^```sh[ \t]*$/ && marked == NR - 1 { k++; out = dir "/" k ".sh"; print f ":" NR + 1 > (dir "/" k ".where"); inblock = 1; after = 0; unrun = 0; next }
        /^```sh[ \t]*$/ && !inblock && !inexp && !skip { unrunblock = 1; after = 0; next }   # shown, not run
        /^```/ && unrunblock { unrunblock = 0; after = 1; unrun = 1; want = ""; next }
        unrunblock { next }
        /^```/ && inblock { inblock = 0; close(out); after = 1; want = ""; unrun = 0; next }
        inblock {
            if ($0 ~ /^[ \t]*make[ \t]+(demo|test)([ \t]|$)/) { print "echo \"(skipped: " $0 ")\"" > out; next }
            print > out
            next
        }
        /^```/ && inexp { inexp = 0; close(ef); after = 0; next }
        inexp { print > ef; next }
        /^```(text|console)?[ \t]*$/ && after {
            if (want == "expect" && !unrun) { ef = dir "/" k ".expect"; printf "" > ef; print f ":" NR + 1 > (dir "/" k ".expwhere"); inexp = 1; next }
            if (want == "expect") print f ":" NR ": output marked <!-- output --> after a block not marked <!-- run -->: nothing runs it to check" >> (dir "/problems")
            else if (want != "dated" && unrun) print f ":" NR ": the output shown after a ```sh block that does not run (no <!-- run -->) is not dated (<!-- dated -->)" >> (dir "/problems")
            else if (want != "dated") print f ":" NR ": the output shown after a run block is neither checked (<!-- output -->) nor dated (<!-- dated -->)" >> (dir "/problems")
            after = 0; skip = 1; next
        }
        /^```/ && skip { skip = 0; next }
        skip { next }
        /^```/ || /^#/ { after = 0 }
        { marked = 0; if ($0 !~ /^[ \t]*$/) prev = $0 }' "$f"
done

# run_block K: block K in its own folder; its result line goes to $tmp/res.K, its status to $tmp/rc.K
cat > "$tmp/run_block.sh" <<'EOS'
tmp=$1; build=$2; repo=$3; k=$4
where=$(cat "$tmp/blocks/$k.where")
w=$tmp/work$k
mkdir -p "$w"
ln -s "$build" "$w/build"
for d in tools samples kernels common bench tests docs Makefile mk dpmem.h dpmem_cuda.h; do [ -e "$repo/$d" ] && ln -s "$repo/$d" "$w/$d"; done
start=$(date +%s)
(cd "$w" && DPMEM_BUILD=build timeout 300 sh -e "$tmp/blocks/$k.sh") >"$tmp/out$k" 2>"$tmp/err$k"
rc=$?; secs=$(( $(date +%s) - start ))
shown=""
if [ $rc -eq 0 ] && [ -f "$tmp/blocks/$k.expect" ]; then
    # the shown output: contiguous lines of what the block printed, in order, trailing blanks aside
    python3 - "$tmp/blocks/$k.expect" "$tmp/out$k" <<'PY' >"$tmp/diff$k" || rc=99
import sys
strip = lambda p: [l.rstrip() for l in open(p, encoding="utf-8", errors="replace").read().split("\n")]
want, got = strip(sys.argv[1]), strip(sys.argv[2])
while want and want[-1] == "": want.pop()
n = len(want)
if any(got[i:i + n] == want for i in range(len(got) - n + 1)): sys.exit(0)
best = max(range(max(1, len(got) - n + 1)), key=lambda i: sum(a == b for a, b in zip(got[i:i + n], want)))
for a, b in zip(want, got[best:best + n] + [""] * n):
    if a != b: print("shown:   " + a); print("printed: " + b)
sys.exit(1)
PY
    shown=", its shown output ($(cat "$tmp/blocks/$k.expwhere")) checked"
fi
if [ $rc -eq 99 ]; then
    { echo "FAIL $where: the output shown at $(cat "$tmp/blocks/$k.expwhere") is not what the block prints (${secs}s):"; sed 's/^/    | /' "$tmp/blocks/$k.sh"; head -n 20 "$tmp/diff$k" | sed 's/^/    /'; } >"$tmp/res.$k"
elif [ $rc -ne 0 ]; then
    { echo "FAIL $where (exit $rc, ${secs}s):"; sed 's/^/    | /' "$tmp/blocks/$k.sh"; tail -n 15 "$tmp/out$k" "$tmp/err$k" | sed 's/^/    > /'; } >"$tmp/res.$k"
else echo "ok   $where (${secs}s): $(grep -c . "$tmp/blocks/$k.sh") line(s)$shown" >"$tmp/res.$k"; fi
echo $rc >"$tmp/rc.$k"
EOS
# The blocks are independent (a folder each) and single-threaded (OMP_NUM_THREADS=1): as many at once
# as there are cores, the results printed in the documents' order.
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)   # (nproc would say 1: it obeys OMP_NUM_THREADS)
ls "$tmp/blocks" | grep '\.sh$' | sed 's/\.sh$//' | sort -n |
    xargs -P "$jobs" -I{} sh "$tmp/run_block.sh" "$tmp" "$build" "$repo" {}
for k in $(ls "$tmp/blocks" | grep '\.sh$' | sed 's/\.sh$//' | sort -n); do
    n=$((n + 1))
    if [ -f "$tmp/res.$k" ]; then cat "$tmp/res.$k"; else echo "FAIL $(cat "$tmp/blocks/$k.where"): did not run"; fail=1; fi
    [ "$(cat "$tmp/rc.$k" 2>/dev/null)" = 0 ] || fail=1
done
[ $n -gt 0 ] || { echo "FAIL: no block marked <!-- run --> in README.md or docs/*.md"; exit 1; }
if [ -s "$tmp/blocks/problems" ]; then sed 's/^/FAIL /' "$tmp/blocks/problems"; fail=1; fi
[ $fail -eq 0 ] && echo "all $n marked blocks ran"
exit $fail
