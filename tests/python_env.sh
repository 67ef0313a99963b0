# python_env.sh — sourced by the Python tests: B (the build), the interpreter, DPMEM_LIB and
# PYTHONPATH for python/dpmem of this checkout, and the SKIP lines (exit 77) when they cannot run.
# Usage: . tests/python_env.sh, or PY_NEEDS=torch . tests/python_env.sh (the .venv of `make pyenv`)
B=${DPMEM_BUILD:-build}
# The sanitizer pass built libdpmem.so with ASan+UBSan: the interpreter needs their runtimes first
# in the process. Leak detection is off there: CPython and torch keep memory until exit by design
# (the kit's own leaks are checked by the C tests, which keep it on).
if [ "$(cat "$B/python/san" 2>/dev/null)" = 1 ]; then
    [ -n "${PY_SAN_SKIP:-}" ] && { echo "SKIP: $PY_SAN_SKIP"; exit 77; }
    export LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so) $(${CC:-cc} -print-file-name=libubsan.so)"
    export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi
[ -f "$B/python/libdpmem.so" ] || { echo "FAIL: $B/python/libdpmem.so is not built (make python)"; exit 1; }
export DPMEM_LIB="$B/python/libdpmem.so" PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
if [ "${PY_NEEDS:-}" = torch ]; then
    PY=$(pwd)/.venv/bin/python
    if [ ! -f .venv/.dpmem-pyenv-ok ]; then
        why=$(cat .venv/.dpmem-pyenv-failed 2>/dev/null)
        echo "SKIP: no .venv with torch, transformers and opacus (make pyenv${why:+: $why})"
        exit 77
    fi
else
    PY=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
fi
tmp=$(mktemp -d /tmp/dpmem_py.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
