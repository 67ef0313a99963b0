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
     LlamaForSequenceClassification computes on the same first batch (<= 1e-5 relative): the round trip;
  4. train_lora --task classify --save: its adapter directory is PEFT's for sequence classification
     (adapter_config.json task_type SEQ_CLS, modules_to_save with score; the trained score head as
     base_model.model.score.weight, equal to the merged model's), and PeftModel.from_pretrained on a
     LlamaForSequenceClassification of the base LM gives the merged model's logits (<= 1e-5 of their
     largest); without peft that last check is left out and the test ends with one SKIP line (exit 77).
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


def run(*args, trainer="train_vanilla"):
    r = subprocess.run([os.path.join(BUILD, trainer), "--device", "cpu", "--threads", "1"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print("FAIL: %s %s: exit %d\n%s" % (trainer, " ".join(args), r.returncode, r.stdout[-2000:]))
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

# 4. LoRA: the adapter directory as PEFT writes it for SEQ_CLS, and applied by PEFT = the merged model
lora = os.path.join(TMP, "lora")
run("--init-from", lm_dir, "--steps", "2", "--lr", "1e-2", "--data", data, "--lora-rank", "2", "--lora-targets", "q,v,down",
    "--noise-multiplier", "0.5", "--noise-seed", "7", "--save", lora, *common, trainer="train_lora")
acfg = json.load(open(os.path.join(lora, "adapter", "adapter_config.json")))
check(acfg.get("task_type") == "SEQ_CLS" and "score" in (acfg.get("modules_to_save") or []),
      "adapter_config.json: task_type %s, modules_to_save %s (PEFT's SEQ_CLS: SEQ_CLS, with score)"
      % (acfg.get("task_type"), acfg.get("modules_to_save")))
adapter = load_file(os.path.join(lora, "adapter", "adapter_model.safetensors"))
merged = load_file(os.path.join(lora, "model.safetensors"))
head = adapter.get("base_model.model.score.weight")
check(head is not None and torch.equal(head, merged["score.weight"]),
      "the adapter file's score head: %s (want base_model.model.score.weight = the merged model's score.weight)"
      % ("missing" if head is None else "differs"))
check(head is not None and not torch.equal(head, load_file(os.path.join(TMP, "new-a", "model.safetensors"))["score.weight"]),
      "the LoRA run's score head did not train (it is the seed's)")
try:
    from peft import PeftModel
    no_peft = None
except ImportError as e:
    no_peft = "PEFT's loading of the classify adapter not checked: peft does not import (%s; make pyenv installs it)" % e
if no_peft is None:
    base = LlamaForSequenceClassification.from_pretrained(lm_dir, num_labels=3, pad_token_id=0).float().eval()
    peft_model = PeftModel.from_pretrained(base, os.path.join(lora, "adapter")).eval()
    full = LlamaForSequenceClassification.from_pretrained(lora).float().eval()
    with torch.no_grad():
        want = full(input_ids=ids, attention_mask=(ids != 0).long()).logits
        got = peft_model(input_ids=ids, attention_mask=(ids != 0).long()).logits
    e = (got - want).abs().max().item() / want.abs().max().item()
    check(e <= 1e-5, "PEFT's base + classify adapter: logits off the merged model's by %.3g of their largest" % e)
    print("ok   train_lora --task classify --save: PEFT's SEQ_CLS adapter (score in modules_to_save); base + adapter in PEFT = "
          "the merged model (logits within %.1e)" % e)
if fails:
    sys.exit(1)
if no_peft:
    print("SKIP: " + no_peft)
    sys.exit(77)
sys.exit(0)
