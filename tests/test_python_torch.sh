#!/bin/sh
# test_python_torch.sh — dpmem.torch with torch and opacus from .venv (tests/test_python_torch.py):
# exact bytes per category, saved tensors deduplicated by storage, nothing left after freeing,
# Opacus's per-sample gradients and norms, the phases' scopes.
PY_NEEDS=torch . tests/python_env.sh
"$PY" tests/test_python_torch.py "$B" "$tmp"
