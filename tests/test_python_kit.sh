#!/bin/sh
# test_python_kit.sh — python/dpmem without torch (tests/test_python_kit.py): tags, scopes, misuse,
# the log through the tools, NVTX through the injection library. Needs only python3.
. tests/python_env.sh
"$PY" tests/test_python_kit.py "$B" "$tmp"
