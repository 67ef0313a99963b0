#!/bin/sh
# test_readme_commands.sh — runs every command block of README.md and docs/*.md marked runnable, so
# the documentation cannot rot. The marker is a line `<!-- run -->` (an HTML comment: invisible when
# rendered) right before a ```sh block. Each block runs with `sh -e` in a fresh temporary folder
# where build/ (-> $DPMEM_BUILD), tools/, samples/, kernels/, tests/ and docs/ point into the
# repository and the headers are linked, so blocks may write results/ and logs freely. Lines calling
# `make demo` or `make test` are skipped (they would run this test again); a block that fails or
# runs over 300 s fails the test, named by file and line. Exits 0 on pass, 1 on failure.
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

for s in $(ls "$tmp/blocks" | grep '\.sh$' | sort -n); do
    k=${s%.sh}; where=$(cat "$tmp/blocks/$k.where"); n=$((n + 1))
    w=$tmp/work$k
    mkdir -p "$w"
    ln -s "$build" "$w/build"
    for d in tools samples kernels tests docs Makefile mk dpmem.h dpmem_cuda.h; do [ -e "$repo/$d" ] && ln -s "$repo/$d" "$w/$d"; done
    start=$(date +%s)
    (cd "$w" && DPMEM_BUILD=build timeout 300 sh -e "$tmp/blocks/$s") >"$tmp/out$k" 2>&1
    rc=$?; secs=$(( $(date +%s) - start ))
    if [ $rc -ne 0 ]; then
        echo "FAIL $where (exit $rc, ${secs}s):"; sed 's/^/    | /' "$tmp/blocks/$s"; tail -n 15 "$tmp/out$k" | sed 's/^/    > /'; fail=1
    else echo "ok   $where (${secs}s): $(grep -c . "$tmp/blocks/$s") line(s)"; fi
done
[ $n -gt 0 ] || { echo "FAIL: no block marked <!-- run --> in README.md or docs/*.md"; exit 1; }
[ $fail -eq 0 ] && echo "all $n marked blocks ran"
exit $fail
