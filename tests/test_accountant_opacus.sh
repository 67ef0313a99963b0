#!/bin/sh
# test_accountant_opacus.sh — the C accountant (build/dp-accountant) against Opacus's RDP accountant
# from .venv on a grid where both are finite (tests/test_accountant_opacus.py). Skips as the other
# .venv tests do (tests/python_env.sh) when `make pyenv` did not make it; needs no libdpmem.so.
B=${DPMEM_BUILD:-build}
if [ ! -f .venv/.dpmem-pyenv-ok ]; then
    why=$(cat .venv/.dpmem-pyenv-failed 2>/dev/null)
    echo "SKIP: no .venv with torch, transformers and opacus (make pyenv${why:+: $why})"
    exit 77
fi
[ -x "$B/dp-accountant" ] || { echo "FAIL: $B/dp-accountant is not built"; exit 1; }
OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 .venv/bin/python tests/test_accountant_opacus.py "$B" || exit 1
