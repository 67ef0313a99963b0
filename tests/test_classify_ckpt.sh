#!/bin/sh
# test_classify_ckpt.sh — classify checkpoints against transformers (tests/test_classify_ckpt.py): a causal
# LM's checkpoint starts a classifier (score from the seed), --save loads in
# LlamaForSequenceClassification.from_pretrained, and loads back with the same loss.
PY_SAN_SKIP="the checkpoint round trip runs in the plain pass" \
PY_NEEDS=torch . tests/python_env.sh
[ -x "$B/train_vanilla" ] || { echo "FAIL: $B/train_vanilla is not built"; exit 1; }
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive "$PY" tests/test_classify_ckpt.py "$B" "$tmp"
