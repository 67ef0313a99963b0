#!/bin/sh
# test_readme_commands.sh — runs every command block of README.md and docs/*.md marked runnable, so
# the documentation cannot rot. The marker is a line `<!-- run -->` (an HTML comment: invisible when
# rendered) right before a ```sh block. Each block runs with `sh -e` in a fresh temporary folder
# where build/ (-> $DPMEM_BUILD), tools/, samples/, kernels/, tests/ and docs/ point into the
# repository and the headers are linked, so blocks may write results/ and logs freely. Lines calling
# `make demo` or `make test` are skipped (they would run this test again); a block that fails or
# runs over 300 s fails the test, named by file and line. The blocks run as many at once as there are
# cores. Exits 0 on pass, 1 on failure.
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
        /^```sh[ \t]*$/ && marked == NR - 1 { k++; out = dir "/" k ".sh"; print f ":" NR + 1 > (dir "/" k ".where"); inblock = 1; next }
        /^```/ && inblock { inblock = 0; close(out); next }
        inblock {
            if ($0 ~ /^[ \t]*make[ \t]+(demo|test)([ \t]|$)/) { print "echo \"(skipped: " $0 ")\"" > out; next }
            print > out
        }
        { marked = 0 }' "$f"
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
(cd "$w" && DPMEM_BUILD=build timeout 300 sh -e "$tmp/blocks/$k.sh") >"$tmp/out$k" 2>&1
rc=$?; secs=$(( $(date +%s) - start ))
if [ $rc -ne 0 ]; then
    { echo "FAIL $where (exit $rc, ${secs}s):"; sed 's/^/    | /' "$tmp/blocks/$k.sh"; tail -n 15 "$tmp/out$k" | sed 's/^/    > /'; } >"$tmp/res.$k"
else echo "ok   $where (${secs}s): $(grep -c . "$tmp/blocks/$k.sh") line(s)" >"$tmp/res.$k"; fi
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
[ $fail -eq 0 ] && echo "all $n marked blocks ran"
exit $fail
