#!/usr/bin/env python3
"""test_classify_ckpt.py — classify checkpoints: a causal LM's checkpoint starts a classifier, and what
--save writes is what transformers' LlamaForSequenceClassification.from_pretrained loads.

    python tests/test_classify_ckpt.py BUILD TMPDIR

  1. transformers writes a tiny LlamaForCausalLM (fp32, untied: its lm_head.weight is in the file);
  2. train_vanilla --init-from it --task classify --steps 0 --save: every tensor but the new score head
     is the LM's bit for bit, lm_head is gone, score.weight (3 x C) is drawn from the seed (the same
     seed: the same head; another seed: another; its standard deviation transformers' 0.02), config.json
     says LlamaForSequenceClassification, 3 labels, pad id 0;
  3. two training steps on a labelled file, --save; from_pretrained loads it with no missing or
     unexpected key; the C trainer --init-from that checkpoint (lr 0) reports as its first loss what
     LlamaForSequenceClassification computes on the same first batch (<= 1e-5 relative): the round trip.
Exit 0 on pass, 1 with FAIL lines."""
import json
import os
import struct
import subprocess
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
BUILD, TMP = sys.argv[1], sys.argv[2]
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)
        print("FAIL: " + what)


def run(*args):
    r = subprocess.run([os.path.join(BUILD, "train_vanilla"), "--device", "cpu", "--threads", "1"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print("FAIL: train_vanilla %s: exit %d\n%s" % (" ".join(args), r.returncode, r.stdout[-2000:]))
        sys.exit(1)
    return r.stdout


from safetensors.torch import load_file  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification  # noqa: E402

lm_dir = os.path.join(TMP, "lm")
conf = LlamaConfig(vocab_size=29, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0,
                   tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
torch.manual_seed(3)
LlamaForCausalLM(conf).float().save_pretrained(lm_dir)
lm = load_file(os.path.join(lm_dir, "model.safetensors"))

# labelled rows (tools/make_tokens.py --labels --ids): 6 rows, right-padded with 0 to 6 tokens
rows = os.path.join(TMP, "rows.txt")
with open(rows, "w") as f:
    f.write("2 5 6 7\n0 8 9 10 11 12 13\n1 1 2 3 4 5\n0 9 9 9\n2 3 4 5 6 7 8\n1 4 4 4 4 4\n")
data = os.path.join(TMP, "rows.bin")
subprocess.run([sys.executable, "tools/make_tokens.py", "--labels", "--ids", rows, "--vocab", "29", "--num-labels", "3",
                "--pad-id", "0", "--out", data], check=True, stdout=subprocess.DEVNULL)
common = ["--task", "classify", "--num-labels", "3", "--pad-id", "0", "--seq-len", "6", "--batch-size", "3", "--quiet"]

# 2. a new classifier from the LM
heads = {}
for name, seed in (("a", 1), ("b", 1), ("c", 2)):
    out = os.path.join(TMP, "new-" + name)
    run("--init-from", lm_dir, "--steps", "0", "--seed", str(seed), "--save", out, *common)
    heads[name] = load_file(os.path.join(out, "model.safetensors"))
a = heads["a"]
check("lm_head.weight" not in a and a["score.weight"].shape == (3, 32), "the classifier's head: %s" % sorted(a)[-2:])
same = [k for k in lm if k != "lm_head.weight" and torch.equal(lm[k], a[k])]
check(len(same) == len(lm) - 1, "only %d of %d LM tensors carried over bit for bit" % (len(same), len(lm) - 1))
check(torch.equal(a["score.weight"], heads["b"]["score.weight"]), "the same seed must draw the same score head")
check(not torch.equal(a["score.weight"], heads["c"]["score.weight"]), "another seed must draw another score head")
sd = a["score.weight"].std().item()
check(0.01 < sd < 0.03, "score's standard deviation %.4f, transformers draws 0.02" % sd)
cfg = json.load(open(os.path.join(TMP, "new-a", "config.json")))
check(cfg["architectures"] == ["LlamaForSequenceClassification"] and len(cfg["id2label"]) == 3 and cfg["pad_token_id"] == 0,
      "config.json: %s, %s, pad %s" % (cfg.get("architectures"), cfg.get("id2label"), cfg.get("pad_token_id")))
print("ok   --init-from a causal LM: its tensors bit for bit, a new score head from the seed (std %.4f)" % sd)

# 3. train, save, load in transformers, and round-trip through the C trainer
trained = os.path.join(TMP, "trained")
run("--init-from", lm_dir, "--steps", "2", "--lr", "1e-2", "--data", data, "--save", trained, *common)
model, info = LlamaForSequenceClassification.from_pretrained(trained, output_loading_info=True)
check(not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"],
      "from_pretrained: %s" % info)
check(model.config.num_labels == 3 and model.config.pad_token_id == 0, "loaded config: %d labels, pad %s"
      % (model.config.num_labels, model.config.pad_token_id))
out = run("--init-from", trained, "--steps", "1", "--lr", "0", "--data", data, *[c for c in common if c != "--quiet"])
line = [l for l in out.splitlines() if l.startswith("loss:")]
c_loss = float(line[0].split()[1]) if line else float("nan")
raw = open(data, "rb").read()
body = struct.unpack("<%di" % (6 * 7), raw[1024:1024 + 4 * 42])
ids = torch.tensor([body[i * 7 + 1:i * 7 + 7] for i in range(3)])
labels = torch.tensor([body[i * 7] for i in range(3)])
model.float().eval()
with torch.no_grad():
    ref = model(input_ids=ids, attention_mask=(ids != 0).long(), labels=labels).loss.item()
check(abs(c_loss - ref) <= 1e-5 * abs(ref), "the saved classifier's loss: C %.6f, transformers %.6f" % (c_loss, ref))
print("ok   --save -> from_pretrained (no missing/unexpected keys) -> --init-from: loss %.6f, transformers %.6f" % (c_loss, ref))
sys.exit(1 if fails else 0)
