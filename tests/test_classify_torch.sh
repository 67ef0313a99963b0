#!/bin/sh
# test_classify_torch.sh — --task classify against transformers' LlamaForSequenceClassification (loss and
# every gradient, padded rows) and Opacus (every DP method's per-sample norms, clipped sum and noised step), full
# and LoRA (against PEFT's sequence-classification LoRA; SKIP without peft):
# tests/test_classify_torch.py on the tensors build/tests/test_classify --dump writes.
PY_SAN_SKIP="the comparison runs in the plain pass; test_classify runs sanitized on its own" \
PY_NEEDS=torch . tests/python_env.sh
[ -x "$B/tests/test_classify" ] || { echo "FAIL: $B/tests/test_classify is not built"; exit 1; }
"$PY" tests/test_classify_torch.py "$B" "$tmp"
