#!/bin/sh
# test_classify_ckpt.sh — classify checkpoints against transformers (tests/test_classify_ckpt.py): a causal
# LM's checkpoint starts a classifier (score from the seed), --save loads in
# LlamaForSequenceClassification.from_pretrained, and loads back with the same loss; a LoRA classifier's
# adapter directory is PEFT's for SEQ_CLS (the score head in it), and PEFT applies it as the merged model.
PY_SAN_SKIP="the checkpoint round trip runs in the plain pass" \
PY_NEEDS=torch . tests/python_env.sh
for t in train_vanilla train_lora; do [ -x "$B/$t" ] || { echo "FAIL: $B/$t is not built"; exit 1; }; done
OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive "$PY" tests/test_classify_ckpt.py "$B" "$tmp"
