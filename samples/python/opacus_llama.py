#!/usr/bin/env python3
"""opacus_llama.py — a Hugging Face LlamaForCausalLM trained with Opacus under dpmem, on the CPU.

The model is built from a config with the C trainers' preset shapes (random weights: no hub
download), trained on random tokens with DP-SGD: Opacus's hooks (per-sample gradients, like
build/train_dpsgd) or ghost clipping (two backwards, like build/train_ghost). dpmem.torch tags every
parameter, gradient, optimizer state, saved tensor and Opacus buffer and opens the phases as scopes;
the log is the C kit's format, so build/dpmem-render, dpmem-report and dpmem-trace read it.

    python samples/python/opacus_llama.py --mode ghost --steps 3 --log results/py-ghost.log
    python samples/python/opacus_llama.py --mode ghost --compare build --out results/side-by-side

--compare BUILD runs the same configuration through the C trainer of BUILD (train_ghost or
train_dpsgd) and writes the side-by-side: breakdown.png (one bar per run, by category at its peak),
side_by_side.md (each category's bytes from both and their ratio, and why they differ)."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# tiny: samples/llama/config.c's preset (V, C, L, NH, NKV, F, T, B); F = LLaMA's FFN rule from C
PRESETS = {"tiny": dict(vocab=1000, dim=64, layers=2, heads=4, kv_heads=4, ffn=256, seq_len=64, batch=4)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny", choices=sorted(PRESETS))
    p.add_argument("--mode", default="ghost", choices=["ghost", "hooks"],
                   help="Opacus grad_sample_mode: ghost clipping, or hooks (per-sample gradients)")
    p.add_argument("--seq-len", type=int), p.add_argument("--batch-size", type=int)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--noise-multiplier", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1: like OMP_NUM_THREADS=1)")
    p.add_argument("--log", help="the dpmem log (default: OUT/pytorch-MODE.log)")
    p.add_argument("--out", default="results/opacus_llama", help="folder for the log and the side-by-side")
    p.add_argument("--compare", metavar="BUILD", help="also run the C trainer of BUILD and write the side-by-side")
    p.add_argument("--no-catch-all", action="store_true", help="do not tag operator temporaries as untagged/<scope>")
    a = p.parse_args(argv)
    cfg = dict(PRESETS[a.model])
    cfg["seq_len"] = a.seq_len or cfg["seq_len"]
    cfg["batch"] = a.batch_size or cfg["batch"]
    for k in ("seq_len", "batch"):
        if cfg[k] < 1:
            p.error("--%s must be at least 1" % k.replace("_", "-").replace("batch", "batch-size"))
    if a.steps < 1:
        p.error("--steps must be at least 1")
    a.cfg = cfg
    return a


def build(a):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    c = a.cfg
    conf = LlamaConfig(vocab_size=c["vocab"], hidden_size=c["dim"], intermediate_size=c["ffn"],
                       num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                       num_key_value_heads=c["kv_heads"], max_position_embeddings=max(c["seq_len"], 64),
                       rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                       attention_bias=False, mlp_bias=False)
    torch.manual_seed(a.seed)
    return LlamaForCausalLM(conf)


def train(a, log):
    import torch
    from opacus import PrivacyEngine

    import dpmem
    import dpmem.torch as dtorch

    torch.set_num_threads(a.threads)
    c = a.cfg
    B, T, V = c["batch"], c["seq_len"], c["vocab"]
    dpmem.open(log)
    dpmem.meta("run", "pytorch-opacus-%s" % a.mode)
    for k, v in (("model", a.model), ("seq_len", T), ("batch_size", B), ("steps", a.steps),
                 ("method", "opacus-" + a.mode), ("framework", "pytorch %s" % torch.__version__)):
        dpmem.meta("config." + k, v)
    with dpmem.scope("model_creation"):
        model = build(a)
        optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
        gen = torch.Generator().manual_seed(a.seed)
        rows = torch.randint(0, V, (B * a.steps, T + 1), generator=gen)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(rows), batch_size=B)
        private = PrivacyEngine().make_private(
            module=model, optimizer=optimizer, data_loader=loader, criterion=torch.nn.CrossEntropyLoss(),
            noise_multiplier=a.noise_multiplier, max_grad_norm=a.max_grad_norm, grad_sample_mode=a.mode,
            poisson_sampling=False)
        if a.mode == "ghost":
            model, optimizer, criterion, loader = private
        else:
            (model, optimizer, loader), criterion = private, torch.nn.CrossEntropyLoss()
        tracker = dtorch.track(model, optimizer, criterion=criterion, catch_all=not a.no_catch_all)
    dpmem.meta("dp.noise_multiplier", a.noise_multiplier)
    dpmem.meta("dp.max_grad_norm", a.max_grad_norm)
    t0, loss = time.time(), None
    for (batch,) in loader:
        with tracker.step():
            with dpmem.scope("data"):
                x, y = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
                dtorch.tag_tensor(x, "input/tokens")
                dtorch.tag_tensor(y, "input/targets")
            logits = model(input_ids=x).logits
            dtorch.tag_tensor(logits, "activations/logits")
            if a.mode == "ghost":   # per-sequence losses: the privacy unit is one sequence
                loss = tracker.criterion(logits.view(-1, V), y.view(-1), shape=logits.shape)
            else:
                loss = tracker.criterion(logits.view(-1, V), y.view(-1))
            del logits
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print("step loss %.4f" % loss.item(), flush=True)
    del loss
    secs = time.time() - t0
    print("%s: %d steps in %.2f s; peak %.2f MiB tagged (%s)" % (
        a.mode, a.steps, secs, dpmem.peak_bytes() / 2**20,
        ", ".join("%s %.2f" % (k, dpmem.bytes_at_peak(k) / 2**20) for k in dpmem.categories() if dpmem.bytes_at_peak(k))))
    tracker.close()
    dpmem.close()


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    log = a.log or os.path.join(a.out, "pytorch-%s.log" % a.mode)
    try:
        import dpmem  # noqa: F401  (pip install ./python)
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))   # the checkout's, on build/python
    if a.compare:
        sys.path.insert(0, HERE)
        import side_by_side
        side_by_side.trainer(a)   # a missing C trainer is said before the run, not after
    try:
        import opacus  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        sys.exit("opacus_llama.py: %s (make pyenv, then .venv/bin/python)" % e)
    train(a, log)
    print("log: %s" % log)
    if a.compare:
        side_by_side.run(a, log)


if __name__ == "__main__":
    main()
