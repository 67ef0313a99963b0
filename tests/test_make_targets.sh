#!/bin/sh
# test_make_targets.sh — what the make targets say and where they write.
# `make test`'s last line gives both passes' tallies, the plain suite's and the sanitized one's (it
# gave only the sanitized pass's): the real recipe on two stand-in tests, with nothing to build (ALL
# empty) and the dependency check already done: one test passes in both passes, the other passes in
# the plain pass and skips under the sanitizers.
# `make demo-picture` (and tools-pictures) write under results/, never over the tracked docs/demo/ and
# docs/tools/ unless DOCS=1 asks (it rewrote five tracked files): their commands as `make -n` lists
# them (nothing built or run).
# `make pyenv` (which make test runs) says, before pip starts, that torch will come from PyPI with
# a 3.0 GB download with the CUDA wheels when PyTorch's CPU-only index fails (with that index's error), shows
# pip's progress (no -q), and PYENV_PYPI_TORCH=0 refuses: against a stand-in python that records
# what pip is asked and fails every install (no network used, nothing installed); the check for a
# torch already there compares its version with 2.15.0 (it compared with "torch==2.15.0": never equal).
# The caller's settings must not change what is tested: `make test PYENV_PYPI_TORCH=0` exports that
# variable into this test's environment (make exports command-line variables), and the pyenv check
# below, about the default, failed under the README's own opt-out. So the settings a caller may give
# are set here on purpose, and every nested make runs with the Makefile's variables unset (mk_clean).
export PYENV_PYPI_TORCH=0 DOCS=1 QUICK=1 SAN=1 OPT=-O0 TRAINER_CUDA=0
mk_clean() {
    env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u PYENV_PYPI_TORCH -u DOCS -u QUICK -u SAN -u OPT \
        -u TRAINER_CUDA -u BUILD -u PYENV -u DEPS -u CUDA_ARCH make "$@"
}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/b/san" "$tmp/venv" && touch "$tmp/b/.deps-ok" "$tmp/b/san/.deps-ok" "$tmp/venv/.dpmem-pyenv-ok"
# PYENV: a stand-in whose stamp is new, so that the nested make test does not make .venv/ (make pyenv)
printf 'case $DPMEM_BUILD in */san) echo "SKIP: not under the sanitizers"; exit 77 ;; esac\nexit 0\n' >"$tmp/a.sh"
echo 'exit 0' >"$tmp/b.sh"
mk_clean --no-print-directory test BUILD="$tmp/b" PYENV="$tmp/venv" ALL= TESTS="$tmp/a.sh $tmp/b.sh" >"$tmp/out" 2>&1
rc=$?
last=$(tail -n 1 "$tmp/out")
want="make test: 2 passed, 0 failed, 0 skipped (the suite); 1 passed, 0 failed, 1 skipped (again under ASan+UBSan)"
if [ $rc -ne 0 ] || [ "$last" != "$want" ]; then
    echo "FAIL: make test exited $rc, its last line is '$last', not '$want':"; cat "$tmp/out"; exit 1
fi
# a trainer linked without the CUDA backend says why at --device cuda (train.c prints the reason the
# build writes into it): it said "no nvcc at build time" after make demo had printed "✓ nvcc found"
why() { mk_clean --no-print-directory "$@" "$tmp/w/obj/trainer/cuda_why.c" >/dev/null 2>&1 && cat "$tmp/w/obj/trainer/cuda_why.c"; }
if [ -x /usr/local/cuda/bin/nvcc ]; then
    w=$(why BUILD="$tmp/w" TRAINER_CUDA=0)
    case $w in *"linked with TRAINER_CUDA=0"*"nvcc is there"*) ;; *) echo "FAIL: TRAINER_CUDA=0's reason: '$w'"; exit 1 ;; esac
    w=$(why BUILD="$tmp/w" SAN=1)
    case $w in *"sanitizer build (SAN=1)"*) ;; *) echo "FAIL: SAN=1's reason: '$w'"; exit 1 ;; esac
fi
w=$(why BUILD="$tmp/w" CUDA_HOME="$tmp/no-cuda")
case $w in *"no nvcc at build time, none under CUDA_HOME=$tmp/no-cuda"*) ;; *) echo "FAIL: no nvcc's reason: '$w'"; exit 1 ;; esac
# a failing test: make test fails, and its last lines name it
echo 'exit 3' >"$tmp/c.sh"
mk_clean --no-print-directory test BUILD="$tmp/b" PYENV="$tmp/venv" ALL= TESTS="$tmp/b.sh $tmp/c.sh" >"$tmp/out" 2>&1 \
    && { echo "FAIL: make test passed with a failing test"; cat "$tmp/out"; exit 1; }
grep -q "^failed: $tmp/c.sh" "$tmp/out" || { echo "FAIL: the failing test is not named:"; cat "$tmp/out"; exit 1; }
# ... and the sanitized pass still runs, and both tallies still close the run (it stopped after the first)
grep -qx "make test: 1 passed, 1 failed, 0 skipped (the suite); 1 passed, 1 failed, 0 skipped (again under ASan+UBSan)" "$tmp/out" \
    || { echo "FAIL: with a failing test, make test does not run both passes and give both tallies:"; cat "$tmp/out"; exit 1; }
echo "ok   make test closes with both tallies, also when a test fails"
mk_clean -s -n -o all demo-picture >"$tmp/n" 2>&1 || { echo "FAIL: make -n demo-picture failed:"; cat "$tmp/n"; exit 1; }
if grep -q "docs/demo\\|docs/tools" "$tmp/n" || ! grep -q "results/pictures-[0-9-]*/demo/sweep-1b-plan.png" "$tmp/n" \
   || ! grep -q "results/pictures-[0-9-]*/tools/timeline.png" "$tmp/n"; then
    echo "FAIL: make demo-picture writes elsewhere than results/pictures-<time>/:"; grep -n "docs/\|results/" "$tmp/n"; exit 1
fi
mk_clean -s -n -o all DOCS=1 demo-picture >"$tmp/n" 2>&1
grep -q "docs/demo/sweep-1b-plan.png" "$tmp/n" && grep -q "docs/tools/timeline.png" "$tmp/n" && ! grep -q "results/pictures" "$tmp/n" \
    || { echo "FAIL: make demo-picture DOCS=1 does not refresh docs/:"; cat "$tmp/n"; exit 1; }
echo "ok   make demo-picture writes under results/ (docs/ with DOCS=1)"
pv=$tmp/pv; mkdir -p "$pv/bin"
cat >"$pv/bin/python" <<EOF
#!/bin/sh
echo "\$*" >>"$tmp/pip.calls"
case "\$*" in *--index-url*) echo "ERROR: No matching distribution found for torch==2.15.0 (stand-in)" ;; esac
exit 1
EOF
chmod +x "$pv/bin/python"
mk_clean --no-print-directory pyenv PYENV="$pv" PYENV_PYPI_TORCH=0 >"$tmp/py0" 2>&1
grep -q "PyTorch's CPU-only index did not give torch==2.15.0: ERROR: No matching distribution found for torch==2.15.0 (stand-in)" "$tmp/py0" \
    && grep -q "PYENV_PYPI_TORCH=0: torch not installed" "$pv/.dpmem-pyenv-failed" && ! grep -q "progress-bar" "$tmp/pip.calls" \
    || { echo "FAIL: make pyenv PYENV_PYPI_TORCH=0 with the CPU-only index failing:"; cat "$tmp/py0" "$tmp/pip.calls"; exit 1; }
rm -f "$tmp/pip.calls"
mk_clean --no-print-directory pyenv PYENV="$pv" >"$tmp/py1" 2>&1
grep -q -- "^-m pip install --progress-bar on torch==2.15.0\$" "$tmp/pip.calls" && grep -q "a 3.0 GB download" "$tmp/py1" \
    && grep -q "split('+')\[0\] != '2.15.0')\$" "$tmp/pip.calls" \
    && grep -q "pip could not install torch==2.15.0" "$tmp/py1" \
    || { echo "FAIL: make pyenv does not say it downloads CUDA torch from PyPI, or hides pip's progress:"; cat "$tmp/py1" "$tmp/pip.calls"; exit 1; }
echo "ok   make pyenv says before it downloads CUDA torch from PyPI, shows pip's progress, PYENV_PYPI_TORCH=0 refuses"
# `make demo` builds every program the README goes on to name as build/X (dpmem-render, dpmem-trace,
# quickstart and dp-accountant were "No such file or directory" after it): into an empty build folder,
# `make -n demo` must link each of them (the benchmarks are `make bench`'s, and say so where named).
mkdir -p "$tmp/empty"
mk_clean -s -n demo BUILD="$tmp/empty" >"$tmp/demo-n" 2>&1
root=$(dirname "$0")/..
missing=""
for prog in $(grep -o 'build/[a-z_][a-z_0-9-]*' "$root/README.md" | sed 's|build/||' | sort -u); do
    case $prog in bench_*) continue ;; esac
    grep -q -- "-o $tmp/empty/$prog\\( \\|\$\\)" "$tmp/demo-n" || missing="$missing $prog"
done
[ -z "$missing" ] || { echo "FAIL: the README names build/X that make demo does not build:$missing"; exit 1; }
echo "ok   make demo builds every build/ program the README names"
# Parsing the Makefile writes nothing: the trainers' link-mode stamp was rewritten at parse time by
# every make, so `make demo`'s outer make (TRAINER_CUDA=1) and its inner one (0 where no GPU runs the
# demo) flipped it cuda -> cpu on every run and relinked 14 programs; `make -n` wrote it too.
[ ! -e "$tmp/empty/obj/trainer/link-mode" ] \
    || { echo "FAIL: make -n demo wrote the link-mode stamp ($(cat "$tmp/empty/obj/trainer/link-mode"))"; exit 1; }
echo "ok   make -n demo writes nothing (the link-mode stamp is a rule's, not the parser's)"
