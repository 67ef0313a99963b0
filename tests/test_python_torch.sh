#!/bin/sh
# test_python_torch.sh — dpmem.torch with torch and opacus from .venv (tests/test_python_torch.py):
# exact bytes per category, saved tensors deduplicated by storage, nothing left after freeing,
# Opacus's per-sample gradients and norms, the phases' scopes. Then `pip install ./python` of a copy
# of the checkout: the installed package loads its own libdpmem.so and writes a log the tools read.
PY_NEEDS=torch . tests/python_env.sh
"$PY" tests/test_python_torch.py "$B" "$tmp" || exit 1
mkdir -p "$tmp/src" && cp -r python dpmem.h dpmem_cuda.h "$tmp/src/" && rm -rf "$tmp/src/python/build" "$tmp/src/python"/*.egg-info
"$PY" -m pip install -q --no-deps --no-build-isolation --target "$tmp/site" "$tmp/src/python" >"$tmp/pip.out" 2>&1 \
    || { echo "FAIL: pip install ./python:"; tail -n 20 "$tmp/pip.out"; exit 1; }
tools=$(cd "$B" && pwd)
cd "$tmp" && env -u DPMEM_LIB PYTHONPATH="$tmp/site" "$PY" -c '
import sys, dpmem
assert dpmem.LIBRARY.startswith(sys.argv[1]), "loaded %s, not the installed library" % dpmem.LIBRARY
dpmem.open("installed.log"); dpmem.meta("run", "installed")
with dpmem.scope("step"):
    dpmem.tag(0x1000, 123, "params/w")
assert dpmem.live_bytes("params") == 123
dpmem.close()' "$tmp/site/dpmem/" || { echo "FAIL: the installed package"; exit 1; }
"$tools/dpmem-report" "$tmp/installed.log" | grep -q "params" || { echo "FAIL: dpmem-report on the installed package's log"; exit 1; }
echo "pip install ./python: $(ls "$tmp/site/dpmem" | grep '\.so$' | tr '\n' ' ')"
