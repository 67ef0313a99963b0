#!/bin/sh
# test_python_kit.sh — python/dpmem without torch (tests/test_python_kit.py): tags, scopes, misuse,
# the log through the tools, NVTX through the injection library; dpmem.logread against dpmem-report
# and the reader it replaced (tests/test_python_logread.py). Needs only python3.
. tests/python_env.sh
rc=0
"$PY" tests/test_python_kit.py "$B" "$tmp" || rc=1
"$PY" tests/test_python_logread.py "$B" "$tmp" || rc=1
exit $rc
