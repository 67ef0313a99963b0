#!/bin/sh
# test_ckpt_hf.sh — a checkpoint in Hugging Face's exact layout, written independently of our writer
# by tests/test_ckpt_hf_layout.py (BF16 single file; then sharded with an index, BF16/F16/F32 mixed
# and an old inv_freq buffer), loads into the expected config and parameter table, with every value
# and the loss equal to the pure-Python forward's (build/tests/test_ckpt_model --hf DIR).
B=${DPMEM_BUILD:-build}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3 to write the Hugging Face layout checkpoint"; exit 77; }
dir=$(mktemp -d /tmp/test_ckpt_hf.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
python3 tests/test_ckpt_hf_layout.py "$dir/single" || { echo "FAIL: the layout writer failed"; exit 1; }
"$B/tests/test_ckpt_model" --hf "$dir/single" || fail=1
python3 tests/test_ckpt_hf_layout.py "$dir/sharded" --sharded || { echo "FAIL: the layout writer failed (sharded)"; exit 1; }
"$B/tests/test_ckpt_model" --hf "$dir/sharded" || fail=1
exit $fail
