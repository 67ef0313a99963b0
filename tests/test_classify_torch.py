#!/usr/bin/env python3
"""test_classify_torch.py — the C trainer's sequence classification against transformers and Opacus.

    python tests/test_classify_torch.py BUILD TMPDIR

Runs BUILD/tests/test_classify --dump TMPDIR C (a tiny GQA LLaMA classifier, K = 3 labels, pad id 0, a
batch of 3 rows of T = 9, two of them right-padded), then loads its weights into transformers'
LlamaForSequenceClassification (fp32, pad_token_id 0, the same batch with its attention mask) and checks:
  - the loss (the mean over the rows) and the gradient of every tensor: max |C - torch| <= 1e-5 of the
    tensor's largest |gradient|;
  - every DP method of the C trainer (direct, ghost, flash, mixed norms; two-pass and book-keeping
    clipping): the per-sample norms equal Opacus's (GradSampleModule, per-sample gradients from its
    hooks; and its ghost clipping, GradSampleModuleFastGradientClipping) <= 1e-6 relative, and the
    clipped sum Σ_b min(1, C/(‖g_b‖ + 1e-6)) g_b (σ = 0: Opacus's noise comes from torch's generator,
    ours from kernels/noise.h, so the noisy steps cannot be compared value for value; the noise itself
    is checked by test_noise) equals Opacus's <= 1e-6 of the largest entry.
Per-sample loss: the sample's cross-entropy (Opacus with loss_reduction "sum": the C trainer's DP
per-sample gradient is that of the sample's own loss, a mean over its loss terms, one for classify). Exit 0 on pass, 1 with FAIL lines."""
import os
import subprocess
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
BUILD, TMP = sys.argv[1], sys.argv[2]
MAX_GRAD_NORM = 4.9   # between the per-sample norms (4.19 .. 5.41): some samples clip, some do not
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def load(name, shape=None, dtype=np.float32):
    a = np.fromfile(os.path.join(TMP, name), dtype=dtype)
    return torch.from_numpy(a.reshape(shape) if shape is not None else a)


subprocess.run([os.path.join(BUILD, "tests", "test_classify"), "--dump", TMP, repr(MAX_GRAD_NORM)], check=True)
cfg = {}
with open(os.path.join(TMP, "config.txt")) as f:
    for line in f:
        k, v = line.split()
        cfg[k] = float(v) if "." in v else int(v)
B, T, K = cfg["B"], cfg["T"], cfg["K"]

from transformers import LlamaConfig, LlamaForSequenceClassification  # noqa: E402

conf = LlamaConfig(vocab_size=cfg["vocab"], hidden_size=cfg["dim"], intermediate_size=cfg["ffn"],
                   num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"],
                   num_key_value_heads=cfg["kv_heads"], max_position_embeddings=64, rms_norm_eps=1e-6,
                   rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                   pad_token_id=cfg["pad"], num_labels=K)
torch.manual_seed(0)


def model():
    m = LlamaForSequenceClassification(conf).float()
    m.config._attn_implementation = "eager"
    state = {n: load("weight." + n, p.shape) for n, p in m.named_parameters()}
    m.load_state_dict(state, strict=True)
    return m


ids = load("tokens", (B, T), np.int32).long()
labels = load("targets", (B, T), np.int32)[:, 0].long()
mask = (ids != cfg["pad"]).long()
check(bool((mask.sum(1) < T).sum() >= 2), "the batch must hold padded rows")

# ---- vanilla: loss and every gradient ------------------------------------------------------------
m = model()
out = m(input_ids=ids, attention_mask=mask, labels=labels)
out.loss.backward()
c_loss = float(np.fromfile(os.path.join(TMP, "loss"), dtype=np.float64)[0])
check(abs(c_loss - out.loss.item()) <= 1e-5 * abs(out.loss.item()),
      "loss: C %.9g, transformers %.9g" % (c_loss, out.loss.item()))
worst = 0.0
for n, p in m.named_parameters():
    g = load("grad." + n, p.shape)
    scale = p.grad.abs().max().item()
    e = (g - p.grad).abs().max().item() / scale
    worst = max(worst, e)
    check(scale > 0 and e <= 1e-5, "gradient of %s: off by %.3g of its largest entry %.3g" % (n, e, scale))
print("vanilla: loss %.6f (transformers %.6f), %d gradients, worst relative difference %.2e"
      % (c_loss, out.loss.item(), len(list(m.parameters())), worst))

# ---- Opacus: per-sample gradients (hooks) and ghost clipping's norms -------------------------------
from opacus import GradSampleModule  # noqa: E402
from opacus.grad_sample import GradSampleModuleFastGradientClipping  # noqa: E402

m = model()
gsm = GradSampleModule(m, loss_reduction="sum")
logits = gsm(input_ids=ids, attention_mask=mask).logits
torch.nn.functional.cross_entropy(logits, labels, reduction="sum").backward()
names = [n for n, _ in m.named_parameters()]
psg = {n: p.grad_sample.detach().clone() for n, p in m.named_parameters()}
norms = torch.sqrt(sum((psg[n].reshape(B, -1).double() ** 2).sum(1) for n in names))
factors = torch.clamp(MAX_GRAD_NORM / (norms + 1e-6), max=1.0)
clipped = {n: torch.einsum("b,b...->...", factors, psg[n].double()) for n in names}
check(bool((factors < 1).any() and (factors == 1).any()),
      "max_grad_norm %.3g clips nothing (norms %s)" % (MAX_GRAD_NORM, norms.tolist()))

m2 = model()
ghost = GradSampleModuleFastGradientClipping(m2, max_grad_norm=MAX_GRAD_NORM, use_ghost_clipping=True, loss_reduction="sum")
logits = ghost(input_ids=ids, attention_mask=mask).logits
per_sample = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
per_sample.sum().backward(retain_graph=True)
ghost_norms = ghost.get_norm_sample().detach().double()
check(torch.allclose(ghost_norms, norms, rtol=1e-6, atol=0),
      "Opacus's hooks and ghost clipping disagree: %s vs %s" % (norms.tolist(), ghost_norms.tolist()))

methods = ["%s-%s" % (n, c) for n in ("direct", "ghost", "flash", "mixed") for c in ("twopass", "bk")]
for meth in methods:
    path = "norm2." + meth
    if not os.path.exists(os.path.join(TMP, path)):
        check(False, "%s: no dump" % meth)
        continue
    n2 = load(path).double()
    rel = ((n2.sqrt() - norms).abs() / norms).max().item()
    check(rel <= 1e-6, "%s: per-sample norms %s, Opacus %s (relative %.3g)" % (meth, n2.sqrt().tolist(), norms.tolist(), rel))
    worst = 0.0
    for n in names:
        g = load("clipped.%s.%s" % (meth, n), psg[n].shape[1:]).double()
        scale = clipped[n].abs().max().item()
        e = (g - clipped[n]).abs().max().item() / scale
        worst = max(worst, e)
        check(e <= 1e-6, "%s: clipped sum of %s off by %.3g of its largest entry" % (meth, n, e))
    print("%-14s norms within %.1e of Opacus's, clipped sum within %.1e" % (meth, rel, worst))

if failures:
    print("%d checks failed" % len(failures))
    sys.exit(1)
print("classify vs transformers and Opacus: all checks passed")
