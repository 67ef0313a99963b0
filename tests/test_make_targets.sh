#!/bin/sh
# test_make_targets.sh — what the make targets say and where they write.
# `make test`'s last line gives both passes' tallies, the plain suite's and the sanitized one's (it
# gave only the sanitized pass's): the real recipe on two stand-in tests, with nothing to build (ALL
# empty) and the dependency check already done: one test passes in both passes, the other passes in
# the plain pass and skips under the sanitizers.
# `make demo-picture` (and tools-pictures) write under results/, never over the tracked docs/demo/ and
# docs/tools/ unless DOCS=1 asks (it rewrote five tracked files): their commands as `make -n` lists
# them (nothing built or run).
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/b/san" && touch "$tmp/b/.deps-ok" "$tmp/b/san/.deps-ok"
printf 'case $DPMEM_BUILD in */san) echo "SKIP: not under the sanitizers"; exit 77 ;; esac\nexit 0\n' >"$tmp/a.sh"
echo 'exit 0' >"$tmp/b.sh"
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory test BUILD="$tmp/b" ALL= TESTS="$tmp/a.sh $tmp/b.sh" >"$tmp/out" 2>&1
rc=$?
last=$(tail -n 1 "$tmp/out")
want="make test: 2 passed, 0 failed, 0 skipped (the suite); 1 passed, 0 failed, 1 skipped (again under ASan+UBSan)"
if [ $rc -ne 0 ] || [ "$last" != "$want" ]; then
    echo "FAIL: make test exited $rc, its last line is '$last', not '$want':"; cat "$tmp/out"; exit 1
fi
# a failing test: make test fails, and its last lines name it
echo 'exit 3' >"$tmp/c.sh"
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory test BUILD="$tmp/b" ALL= TESTS="$tmp/b.sh $tmp/c.sh" >"$tmp/out" 2>&1 \
    && { echo "FAIL: make test passed with a failing test"; cat "$tmp/out"; exit 1; }
grep -q "^failed: $tmp/c.sh" "$tmp/out" || { echo "FAIL: the failing test is not named:"; cat "$tmp/out"; exit 1; }
echo "ok   make test closes with both tallies"
make -s -n -o all demo-picture >"$tmp/n" 2>&1 || { echo "FAIL: make -n demo-picture failed:"; cat "$tmp/n"; exit 1; }
if grep -q "docs/demo\\|docs/tools" "$tmp/n" || ! grep -q "results/pictures-[0-9-]*/demo/sweep-1b-plan.png" "$tmp/n" \
   || ! grep -q "results/pictures-[0-9-]*/tools/timeline.png" "$tmp/n"; then
    echo "FAIL: make demo-picture writes elsewhere than results/pictures-<time>/:"; grep -n "docs/\|results/" "$tmp/n"; exit 1
fi
make -s -n -o all DOCS=1 demo-picture >"$tmp/n" 2>&1
grep -q "docs/demo/sweep-1b-plan.png" "$tmp/n" && grep -q "docs/tools/timeline.png" "$tmp/n" && ! grep -q "results/pictures" "$tmp/n" \
    || { echo "FAIL: make demo-picture DOCS=1 does not refresh docs/:"; cat "$tmp/n"; exit 1; }
echo "ok   make demo-picture writes under results/ (docs/ with DOCS=1)"
