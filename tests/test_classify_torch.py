#!/usr/bin/env python3
"""test_classify_torch.py — the C trainer's sequence classification against transformers and Opacus.

    python tests/test_classify_torch.py BUILD TMPDIR

Runs BUILD/tests/test_classify --dump TMPDIR C C_LORA (a tiny GQA LLaMA classifier, K = 3 labels, pad id 0, a
batch of 3 rows of T = 9, two of them right-padded), then loads its weights into transformers'
LlamaForSequenceClassification (fp32, pad_token_id 0, the same batch with its attention mask) and checks:
  - the loss (the mean over the rows) and the gradient of every tensor: max |C - torch| <= 1e-5 of the
    tensor's largest |gradient|;
  - every DP method of the C trainer (direct, ghost, flash, mixed norms; two-pass and book-keeping
    clipping): the per-sample norms equal Opacus's (GradSampleModule, per-sample gradients from its
    hooks; and its ghost clipping, GradSampleModuleFastGradientClipping) <= 1e-6 relative, and the
    clipped sum Σ_b min(1, C/(‖g_b‖ + 1e-6)) g_b equals Opacus's <= 1e-6 of the largest entry;
  - the noised step: Opacus's DPOptimizer (hooks) and DPOptimizerFastGradientClipping (ghost clipping),
    σ = 0.7, logical batch B, SGD, with OUR noise σ·C·z (dumped by the C side at dp_sgd's offsets) handed
    to Opacus in place of the draw from torch's generator (the draws themselves cannot agree; the noise
    stream is checked by test_noise): the update's gradient (Σ + σ·C·z) / B equals ours <= 1e-6 of its
    largest entry, and Opacus's std is σ·C;
  - LoRA, as PEFT sets it up for sequence classification (LoraConfig(task_type="SEQ_CLS", r 3, alpha 5,
    all seven projections): score becomes a modules_to_save copy trained whole), our adapters (A from
    our seed, B set non-zero) loaded into PEFT's model: every method's per-sample norms, clipped sums and
    noised step as above, the adapters' step being theirs after SGD (lr 0.5). Without peft the rest is
    checked and the test ends with one SKIP line (exit 77).
Per-sample loss: the sample's cross-entropy (Opacus with loss_reduction "sum", "mean" for the steps: the C trainer's DP
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
MAX_GRAD_NORM_LORA = 3.2   # LoRA's (3.14 .. 3.39): the same
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def load(name, shape=None, dtype=np.float32, sub=""):
    a = np.fromfile(os.path.join(TMP, sub, name), dtype=dtype)
    return torch.from_numpy(a.reshape(shape) if shape is not None else a)


subprocess.run([os.path.join(BUILD, "tests", "test_classify"), "--dump", TMP, repr(MAX_GRAD_NORM), repr(MAX_GRAD_NORM_LORA)],
               check=True)
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

# ---- the pad token used inside a row, and a row of padding: its embedding row learns nothing ---------
# transformers builds nn.Embedding(padding_idx=pad_token_id): the pad's row gets no gradient however the pad is
# used. The dump's second batch (pad_inside/) has the pad inside row 0 (a real token that is also the pad) and
# a row of padding; no attention mask (every position attends as in the C model; the pooled positions see
# only what precedes them). The loss and every gradient as transformers', the pad row's exactly 0, and every
# DP method's per-sample norms those of each row alone through transformers (its own gradient, alone in its
# batch). Opacus's embedding grad sampler ignores padding_idx: its norms differ on the rows that use the pad
# (printed, not checked: docs/DP_METHODS.md says so).
PI = "pad_inside"
ids_p = load("tokens", (B, T), np.int32, PI).long()
labels_p = load("targets", (B, T), np.int32, PI)[:, 0].long()
check(bool((ids_p[0, :-1] == cfg["pad"]).any() and (ids_p[1] == cfg["pad"]).all()), "pad_inside: the batch lacks its pads")
m = model()
out = m(input_ids=ids_p, labels=labels_p)
out.loss.backward()
c_loss = float(np.fromfile(os.path.join(TMP, PI, "loss"), dtype=np.float64)[0])
check(abs(c_loss - out.loss.item()) <= 1e-5 * abs(out.loss.item()), "pad_inside: loss C %.9g, transformers %.9g" % (c_loss, out.loss.item()))
emb = m.model.embed_tokens.weight.grad
check(m.model.embed_tokens.padding_idx == cfg["pad"] and emb[cfg["pad"]].abs().max().item() == 0,
      "transformers' embedding is not nn.Embedding(padding_idx=%d)" % cfg["pad"])
worst = 0.0
for n, p in m.named_parameters():
    g = load("grad." + n, p.shape, sub=PI)
    e = (g - p.grad).abs().max().item() / p.grad.abs().max().item()
    worst = max(worst, e)
    check(e <= 1e-5, "pad_inside: gradient of %s off by %.3g of its largest entry" % (n, e))
pad_row = load("grad.model.embed_tokens.weight", tuple(emb.shape), sub=PI)[cfg["pad"]].abs().max().item()
check(pad_row == 0, "pad_inside: the pad token's embedding gradient is %.4g, want 0" % pad_row)
alone = []
for b in range(B):   # each row alone: the gradient of its own loss (CE, the per-sample loss of DP)
    m.zero_grad()
    torch.nn.functional.cross_entropy(m(input_ids=ids_p[b:b + 1]).logits, labels_p[b:b + 1], reduction="sum").backward()
    alone.append(float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in m.parameters()))))
alone = torch.tensor(alone, dtype=torch.float64)
for meth in ["%s-%s" % (n, c) for n in ("direct", "ghost", "flash", "mixed") for c in ("twopass", "bk")]:
    n2 = load("norm2." + meth, sub=PI).double()
    rel = ((n2.sqrt() - alone).abs() / alone).max().item()
    check(rel <= 1e-5, "pad_inside %s: per-sample norms %s, each row alone through transformers %s" % (meth, n2.sqrt().tolist(), alone.tolist()))
from opacus import GradSampleModule  # noqa: E402
gsm = GradSampleModule(model(), loss_reduction="sum")
torch.nn.functional.cross_entropy(gsm(input_ids=ids_p).logits, labels_p, reduction="sum").backward()
op = torch.sqrt(sum((p.grad_sample.reshape(B, -1).double() ** 2).sum(1) for p in gsm._module.parameters()))
print("pad inside a row and a row of padding: loss and %d gradients as transformers' (worst %.1e), the pad row's 0; "
      "every method's per-sample norms each row's alone; Opacus's norms off by %s (its embedding grad sampler ignores padding_idx)"
      % (len(list(m.parameters())), worst, ", ".join("%.2e" % x for x in ((op - alone).abs() / alone).tolist())))

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


# ---- the noised step: Opacus's DPOptimizer (hooks; ghost clipping's) with our noise in place of its own -----
import opacus.optimizers.optimizer as opacus_optimizer  # noqa: E402
import opacus.optimizers.optimizer_fast_gradient_clipping as opacus_optimizer_fgc  # noqa: E402
from opacus.optimizers import DPOptimizer, DPOptimizerFastGradientClipping  # noqa: E402
from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping  # noqa: E402

SIGMA, LR = cfg["sigma"], cfg["lora_lr"]


def opacus_step(m, named, C, noise, ghost):
    """One DP-SGD step of Opacus on m (its trainable parameters `named`: [(our name, parameter)] in our
    noise order), per-sample loss = the sample's CE, loss_reduction "mean", logical batch B, SGD (lr LR),
    with noise[name] (our σ·C·z) added where Opacus draws its own. Returns the per-sample norms, Opacus's
    clipped sums (hooks only), the noised gradients (Σ + noise) / B and the parameters after the step."""
    before = {n: p.detach().clone() for n, p in named}
    params = [p for _, p in named]
    sgd = torch.optim.SGD(params, lr=LR)
    if ghost:
        gsm = GradSampleModuleFastGradientClipping(m, max_grad_norm=C, use_ghost_clipping=True, loss_reduction="mean")
        opt = DPOptimizerFastGradientClipping(sgd, noise_multiplier=SIGMA, max_grad_norm=C, expected_batch_size=B,
                                              loss_reduction="mean")
        crit = DPLossFastGradientClipping(gsm, opt, torch.nn.CrossEntropyLoss(reduction="mean"), loss_reduction="mean")
        crit(gsm(input_ids=ids, attention_mask=mask).logits, labels).backward()
        norms_ = gsm.get_norm_sample().detach().double()
        sums = None
    else:
        gsm = GradSampleModule(m, loss_reduction="mean")
        opt = DPOptimizer(sgd, noise_multiplier=SIGMA, max_grad_norm=C, expected_batch_size=B, loss_reduction="mean")
        torch.nn.functional.cross_entropy(gsm(input_ids=ids, attention_mask=mask).logits, labels).backward()
        norms_ = torch.sqrt(sum((p.grad_sample.reshape(B, -1).double() ** 2).sum(1) for p in params))
    queue = [(n, noise[n]) for n, _ in named]

    def ours(std, reference, generator=None, secure_mode=False):   # Opacus's _generate_noise, our values
        n, z = queue.pop(0)
        check(abs(std - SIGMA * C) <= 1e-12 * SIGMA * C, "Opacus's noise std %.9g, want σ·C = %.9g" % (std, SIGMA * C))
        check(tuple(z.shape) == tuple(reference.shape), "noise of %s: shape %s, Opacus's %s" % (n, tuple(z.shape), tuple(reference.shape)))
        return z.to(reference.dtype)

    saved = opacus_optimizer._generate_noise, opacus_optimizer_fgc._generate_noise
    opacus_optimizer._generate_noise = opacus_optimizer_fgc._generate_noise = ours
    try:
        if not ghost:
            opt.pre_step()   # clip and accumulate (Opacus's clipped sums), then add the noise and scale
            sums = {n: p.summed_grad.detach().double().clone() for n, p in named}
            opt.original_optimizer.step()
        else:
            opt.step()
    finally:
        opacus_optimizer._generate_noise, opacus_optimizer_fgc._generate_noise = saved
    check(not queue, "Opacus did not add the noise of %s" % [n for n, _ in queue])
    grads = {n: p.grad.detach().double().clone() for n, p in named}
    step = {n: p.detach().double() - before[n].double() for n, p in named}
    return norms_, sums, grads, step


def rel_max(a, b):
    return (a.double() - b.double()).abs().max().item() / b.double().abs().max().item()


def compare_steps(meth, C, named, shapes, ref_norms, ref_sums, ref_grads, ref_step, stepped):
    """Our dump of method meth against Opacus's: norms <= 1e-6 relative, clipped sums and the noised step
    <= 1e-6 of their largest entry. stepped: our names whose noised.* dump is the parameter after the step."""
    n2 = load("norm2." + meth).double()
    rel = ((n2.sqrt() - ref_norms).abs() / ref_norms).max().item()
    check(rel <= 1e-6, "%s: per-sample norms %s, Opacus %s (relative %.3g)" % (meth, n2.sqrt().tolist(), ref_norms.tolist(), rel))
    worst_sum = worst_step = 0.0
    for n, _ in named:
        e = rel_max(load("clipped.%s.%s" % (meth, n), shapes[n]), ref_sums[n])
        worst_sum = max(worst_sum, e)
        check(e <= 1e-6, "%s: clipped sum of %s off by %.3g of its largest entry" % (meth, n, e))
        got = load("noised.%s.%s" % (meth, n), shapes[n]).double()
        if n in stepped:   # the adapter after our SGD step: the step is it minus the adapter before
            e = rel_max(got - load("lora_init." + n, shapes[n]).double(), ref_step[n])
        else:
            e = rel_max(got, ref_grads[n])
        worst_step = max(worst_step, e)
        check(e <= 1e-6, "%s: noised step of %s off by %.3g of its largest entry" % (meth, n, e))
    return rel, worst_sum, worst_step


def our_noise(meth, named, shapes):
    return {n: load("noise.%s.%s" % (meth, n), shapes[n]) for n, _ in named}


# the full model: every tensor trains; our noise order is the model's table, which is transformers' parameter order
m = model()
named = list(m.named_parameters())
shapes = {n: tuple(p.shape) for n, p in named}
noise = our_noise("direct-twopass", named, shapes)
for meth in methods[1:]:
    for n, _ in named:
        check(torch.equal(load("noise.%s.%s" % (meth, n), shapes[n]), noise[n]), "%s: the noise of %s differs from direct-twopass's" % (meth, n))
ref = opacus_step(m, named, MAX_GRAD_NORM, noise, ghost=False)
check(torch.allclose(ref[0], norms, rtol=1e-6, atol=0), "Opacus's DPOptimizer run: norms %s, its hooks' above %s" % (ref[0].tolist(), norms.tolist()))
m = model()
gref = opacus_step(m, list(m.named_parameters()), MAX_GRAD_NORM, noise, ghost=True)
check(torch.allclose(gref[0], norms, rtol=1e-6, atol=0), "Opacus's ghost clipping run: norms %s, hooks %s" % (gref[0].tolist(), norms.tolist()))
e = max(rel_max(gref[2][n], ref[2][n]) for n, _ in named)
check(e <= 1e-6, "Opacus's hooks and ghost clipping: noised steps differ by %.3g" % e)
for meth in methods:
    rel, ws, wn = compare_steps(meth, MAX_GRAD_NORM, named, shapes, ref[0], ref[1], ref[2], ref[3], ())
    print("%-20s noised step within %.1e of Opacus's (hooks; its ghost clipping's within %.1e of that)" % (meth, wn, e))

# ---- LoRA: PEFT's sequence classification (score in modules_to_save) ---------------------------------
try:
    from peft import LoraConfig, get_peft_model
    no_peft = None
except ImportError as e:   # the rest is checked; the test then says SKIP (exit 77), not a pass
    no_peft = "LoRA against PEFT not checked: peft does not import in the .venv (%s; make pyenv installs it)" % e
if no_peft is None:
    TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

    def peft_model():
        """Our base weights, PEFT's LoRA for SEQ_CLS on all seven projections, our adapters loaded into it;
        named: its trainable parameters under our names, in our noise order (score, then per layer and
        projection lora_A, lora_B)."""
        pm = get_peft_model(model(), LoraConfig(task_type="SEQ_CLS", r=cfg["lora_r"], lora_alpha=cfg["lora_alpha"],
                                                lora_dropout=0.0, target_modules=TARGETS))
        theirs = {n: p for n, p in pm.named_parameters() if p.requires_grad}
        named = [("score.weight", theirs.pop("base_model.model.score.modules_to_save.default.weight"))]
        for layer in range(cfg["layers"]):
            for t in TARGETS:
                mod = "model.layers.%d.%s.%s" % (layer, "mlp" if t in ("gate_proj", "up_proj", "down_proj") else "self_attn", t)
                for ab in ("lora_A", "lora_B"):
                    p = theirs.pop("base_model.model.%s.%s.default.weight" % (mod, ab))
                    with torch.no_grad():
                        p.copy_(load("lora_init.%s.%s" % (mod, ab), p.shape))
                    named.append(("%s.%s" % (mod, ab), p))
        check(not theirs, "PEFT trains tensors we do not: %s" % sorted(theirs))
        check(abs(pm.base_model.model.model.layers[0].self_attn.q_proj.scaling["default"] - cfg["lora_alpha"] / cfg["lora_r"]) < 1e-12,
              "PEFT's scaling is not alpha / r")
        return pm, named

    pm, named = peft_model()
    shapes = {n: tuple(p.shape) for n, p in named}
    stepped = set(n for n, _ in named if n != "score.weight")
    lmethods = ["lora-" + x for x in methods]
    noise = our_noise(lmethods[0], named, shapes)
    ref = opacus_step(pm, named, MAX_GRAD_NORM_LORA, noise, ghost=False)
    n_clip = int((ref[0] > MAX_GRAD_NORM_LORA).sum())
    check(0 < n_clip < B, "LoRA: max_grad_norm %.3g clips %d of %d samples (norms %s)" % (MAX_GRAD_NORM_LORA, n_clip, B, ref[0].tolist()))
    pm, named = peft_model()
    gref = opacus_step(pm, named, MAX_GRAD_NORM_LORA, noise, ghost=True)
    check(torch.allclose(gref[0], ref[0], rtol=1e-6, atol=0), "LoRA: Opacus's ghost clipping norms %s, hooks %s" % (gref[0].tolist(), ref[0].tolist()))
    e = max(rel_max(gref[3][n], ref[3][n]) for n, _ in named)
    check(e <= 1e-6, "LoRA: Opacus's hooks and ghost clipping: steps differ by %.3g" % e)
    for meth in lmethods:
        rel, ws, wn = compare_steps(meth, MAX_GRAD_NORM_LORA, named, shapes, ref[0], ref[1], ref[2], ref[3], stepped)
        print("%-20s norms within %.1e of PEFT+Opacus's, clipped sum within %.1e, noised step within %.1e"
              % (meth, rel, ws, wn))

if failures:
    print("%d checks failed" % len(failures))
    sys.exit(1)
if no_peft:
    print("SKIP: " + no_peft)
    sys.exit(77)
print("classify vs transformers and Opacus (and PEFT): all checks passed")
