# python_env.sh — sourced by the Python tests: B (the build), the interpreter, DPMEM_LIB and
# PYTHONPATH for python/dpmem of this checkout, and the SKIP lines (exit 77) when they cannot run.
# Usage: . tests/python_env.sh, or PY_NEEDS=torch . tests/python_env.sh (the .venv of `make pyenv`)
B=${DPMEM_BUILD:-build}
if [ "$(cat "$B/python/san" 2>/dev/null)" = 1 ]; then
    echo "SKIP: Python tests run in the plain pass only: CPython (and torch's libraries) cannot load ASan-instrumented code without libasan preloaded into the interpreter"
    exit 77
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
