#!/usr/bin/env python3
"""torch_baseline.py — `make bench`: dpmem's CPU trainer against PyTorch eager and Opacus, side by side.

Every configuration runs in its own process, in interleaved rounds (round r runs every entry once,
in the same order, before round r+1), so a slow spell of a shared machine hits all of them alike:
  dpmem   build/bench/profile_step METHOD --times   (vanilla, direct, ghost+twopass, flash+bk, mixed+bk)
  torch   this file --worker torch          Hugging Face LlamaForCausalLM, the same config, SDPA attention,
                                            torch.optim.AdamW (the same hyper-parameters), eager
  opacus  this file --worker opacus-hooks   Opacus 1.6 PrivacyEngine, grad_sample_mode="hooks" (per-sample
                                            gradients materialized: the family of dpmem's direct)
          this file --worker opacus-ghost   grad_sample_mode="ghost" (ghost clipping, two backward passes:
                                            the family of dpmem's ghost, flash and mixed)
All of them: batch 4, fp32, 2 threads (dpmem's OpenMP threads; torch.set_num_threads(2)), synthetic
tokens, the step = forward, loss, backward (+ per-sample clipping and noise for DP), AdamW, zero grad.
A run's figure is the median of its timed steps (the first step, which allocates, is not timed); a
table entry is the median over the rounds, with the range of the rounds in brackets; a ratio is
the ratio of the medians, with the range of the per-round ratios (each round's two runs side by side);
for dpmem's DP methods also the ratio of CPU time per step (all threads) to vanilla's, which a
shared machine disturbs less (PyTorch's OpenMP threads spin while they wait: its CPU time is not
comparable, so only wall time is compared across frameworks).
"% peak" is forward + loss + backward at the useful flops of the model (6 per weight per token and
causal attention's products, no recomputation counted) over the sgemm peak measured at the start
(OpenBLAS, 2 threads: profile_step --peak), and in brackets over twice the 1-thread peak (measured on
the thread's own CPU time: what two free cores could give; a loaded machine lowers the first).

The PyTorch columns need .venv/bin/python with torch, transformers and opacus (`make pyenv`); without
them they are skipped with one line and the dpmem columns still run.
Usage: python3 bench/torch_baseline.py [--quick] [--rounds N] [--configs small:256,small:1024,medium:1024]
(DPMEM_BENCH_QUICK=1 is --quick: small at T=256, 2 rounds; DPMEM_BUILD: the build directory, build/).
Not here: per-op profiles (profile_step without --times), memory (the plan, docs/DP_METHODS.md)."""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")

# entry name -> (kind, dpmem method or torch worker, family for the DP comparison)
DPMEM = [("vanilla", "vanilla", None), ("direct", "direct", "hooks"), ("ghost+twopass", "ghost", "ghost"),
         ("flash+bk", "flash", "ghost"), ("mixed+bk", "mixed", "ghost")]
TORCH = [("torch eager", "torch", None), ("opacus hooks", "opacus-hooks", "hooks"), ("opacus ghost", "opacus-ghost", "ghost")]


# ---- the worker: one PyTorch configuration in this process ------------------------------------------------

def worker(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True, choices=["torch", "opacus-hooks", "opacus-ghost"])
    for k in ("vocab", "dim", "layers", "heads", "kv-heads", "ffn", "B", "T", "steps", "threads"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--eps", type=float, required=True)
    ap.add_argument("--theta", type=float, required=True)
    a = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.dim, intermediate_size=a.ffn, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, max_position_embeddings=max(a.T, 2048),
                      rms_norm_eps=a.eps, rope_theta=a.theta, tie_word_embeddings=False, use_cache=False,
                      attn_implementation="sdpa", torch_dtype=torch.float32)
    model = LlamaForCausalLM(cfg).float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    B, T, V = a.B, a.T, a.vocab
    x = torch.randint(0, V, (B, T))
    y = torch.randint(0, V, (B, T))
    criterion = None
    if a.worker != "torch":
        from opacus import PrivacyEngine
        from opacus.grad_sample import register_grad_sampler
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        @register_grad_sampler(LlamaRMSNorm)
        def _rmsnorm_grad_sample(layer, activations, backprops):
            # Opacus has no sampler for transformers' RMSNorm: its weight's per-sample gradient is
            # sum_t dy * x_hat, x_hat = x / sqrt(mean(x^2) + eps)
            h = activations[0].float()
            xhat = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + layer.variance_epsilon)
            return {layer.weight: torch.einsum("btc,btc->bc", backprops.float(), xhat)}

        data = torch.utils.data.TensorDataset(torch.randint(0, V, (16 * B, T)), torch.randint(0, V, (16 * B, T)))
        loader = torch.utils.data.DataLoader(data, batch_size=B)
        mode = "hooks" if a.worker == "opacus-hooks" else "ghost"
        out = PrivacyEngine().make_private(module=model, optimizer=opt, data_loader=loader,
                                           criterion=torch.nn.CrossEntropyLoss(), noise_multiplier=1.0,
                                           max_grad_norm=1.0, poisson_sampling=False, grad_sample_mode=mode)
        if mode == "ghost":
            model, opt, criterion, _ = out
        else:
            model, opt, _ = out
    steps, fwd, bwd, cpu = [], [], [], []
    for i in range(a.steps + 1):
        c0 = time.process_time()
        t0 = time.perf_counter()
        logits = model(input_ids=x).logits
        if criterion is not None:
            loss = criterion(logits.view(-1, V), y.view(-1), shape=(B, T, V))
        else:
            loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        c3 = time.process_time()
        if i > 0:   # the first step allocates everything: not timed, as dpmem's step 0
            steps.append(t3 - t0)
            cpu.append(c3 - c0)
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    import transformers
    import opacus
    # PyTorch's BLAS (its build's BLAS_INFO: MKL, which picks its kernels by the CPU itself) and ATen's
    # vector kernels (the CPU capability it dispatched to)
    blas = next((w.split("=", 1)[1] for w in torch.__config__.show().replace(",", " ").split() if w.startswith("BLAS_INFO=")), "?")
    print(json.dumps({"method": a.worker, "step": steps, "step_cpu": cpu, "forward+loss": fwd, "backward": bwd, "torch": torch.__version__,
                      "transformers": transformers.__version__, "opacus": opacus.__version__,
                      "threads": torch.get_num_threads(), "blas": blas, "cpu_capability": torch.backends.cpu.get_cpu_capability()}))


# ---- the driver -------------------------------------------------------------------------------------------

def run_json(cmd, what):
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {r.returncode}): {r.stderr.strip()[-600:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def have_torch():
    if not os.access(VENV_PY, os.X_OK):
        return False, f"{os.path.relpath(VENV_PY, ROOT)} not found"
    r = subprocess.run([VENV_PY, "-c", "import torch, transformers, opacus"], capture_output=True, text=True)
    if r.returncode != 0:
        return False, f"{os.path.relpath(VENV_PY, ROOT)} lacks torch, transformers or opacus"
    return True, ""


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_range(xs, f="{:.2f}"):
    return f"[{f.format(min(xs))}–{f.format(max(xs))}]" if len(xs) > 1 else ""


def load():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--configs", default="")
    ap.add_argument("--build", default=os.environ.get("DPMEM_BUILD", "build"))
    ap.add_argument("--only", default="", help="comma-separated entries (e.g. 'vanilla,torch eager'): the others are skipped")
    a = ap.parse_args()
    quick = a.quick or os.environ.get("DPMEM_BENCH_QUICK") == "1"
    prof = os.path.join(ROOT, a.build, "bench", "profile_step")
    if not os.access(prof, os.X_OK):
        print(f"torch_baseline: {os.path.relpath(prof, ROOT)} is missing (make {a.build}/bench/profile_step)")
        return 1
    configs = a.configs or ("small:256" if quick else "small:256,small:1024,medium:1024")
    configs = [(c.split(":")[0], int(c.split(":")[1])) for c in configs.split(",")]
    torch_ok, why = have_torch()
    only = set(x.strip() for x in a.only.split(",") if x.strip())
    entries = [e for e in DPMEM + (TORCH if torch_ok else []) if not only or e[0] in only or e[0] == "vanilla"]
    machine = "?"
    try:
        with open("/proc/cpuinfo") as f:
            machine = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"dpmem vs PyTorch eager and Opacus on this CPU ({machine}, {os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average at the start {load()}")
    if not torch_ok:
        print(f"SKIP the PyTorch and Opacus columns: {why} (make pyenv creates it)")
    peak = run_json([prof, "--peak"], "profile_step --peak")
    print(f"sgemm peak (OpenBLAS, {peak['threads']} threads, best of 5 products of 2048^3): "
          f"{peak['sgemm_peak'] * 1e-9:.1f} GF/s (1 thread: {peak['sgemm_peak_1thread'] * 1e-9:.1f})")
    print(f"dpmem's BLAS: OpenBLAS core {peak['blas_core']} ({peak['blas_core_from']})")
    results = {}     # (config, entry) -> list of run medians (in round order)
    cpus = {}        # (config, entry) -> list of run medians of the process's CPU time per step
    phases = {}      # (config, entry) -> list of run medians of forward+loss+backward
    info = {}
    for model, T in configs:
        rounds = a.rounds or (2 if quick else 5 if T <= 256 else 3)
        timed = 2 if quick or T >= 1024 else 3
        print(f"\n{model} T={T}: {rounds} interleaved rounds of {len(entries)} runs, {timed} timed steps each "
              f"(after 1 untimed); load {load()}", flush=True)
        cfg = None
        for r in range(rounds):
            for name, what, _family in entries:
                key = ((model, T), name)
                if (name, what, _family) in DPMEM:
                    j = run_json([prof, what, "--times", "--model", model, "--batch-size", "4", "--seq-len", str(T),
                                  "--steps", str(timed + 1)], f"dpmem {name} {model} T={T}")
                    cfg = cfg or j
                    fb = [f + l + b for f, l, b in zip(j["forward"], j.get("loss", [0] * len(j["forward"])), j["backward"])]
                    info[key] = j
                else:
                    c = cfg
                    j = run_json([VENV_PY, os.path.abspath(__file__), "--worker", what, "--vocab", str(c["vocab"]),
                                  "--dim", str(c["dim"]), "--layers", str(c["layers"]), "--heads", str(c["heads"]),
                                  "--kv-heads", str(c["kv_heads"]), "--ffn", str(c["ffn"]), "--eps", str(c["norm_eps"]),
                                  "--theta", str(c["rope_theta"]), "--B", "4", "--T", str(T), "--steps", str(timed),
                                  "--threads", str(c["threads"])], f"{name} {model} T={T}")
                    fb = [f + b for f, b in zip(j["forward+loss"], j["backward"])]
                    info[key] = j
                results.setdefault(key, []).append(med(j["step"]))
                cpus.setdefault(key, []).append(med(j.get("step_cpu", [])))
                phases.setdefault(key, []).append(med(fb))
            print(f"  round {r + 1}/{rounds} done, load {load()}", flush=True)
        flops = cfg["flops_forward"] + cfg["flops_backward"]
        cfgs = f"V={cfg['vocab']} C={cfg['dim']} L={cfg['layers']} NH={cfg['heads']} F={cfg['ffn']}"
        base = results[((model, T), "vanilla")]
        print(f"\n{model} ({cfgs}), B=4, T={T}: step time in s, median over rounds [range]")
        print("| method | step (s) | ÷ dpmem vanilla | (CPU time) | family baseline | its step (s) | ÷ baseline "
              "| fwd+bwd % of sgemm peak (of 2 × 1-thread) | peak MiB |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, _what, family in entries:
            key = ((model, T), name)
            xs = results[key]
            ratio_v = [x / v for x, v in zip(xs, base)]
            row = [name, f"{med(xs):.3f} {fmt_range(xs, '{:.3f}')}",
                   "1" if name == "vanilla" else f"{med(xs) / med(base):.2f}× {fmt_range(ratio_v)}"]
            cv = cpus[((model, T), "vanilla")]
            # CPU time (all threads) per step, dpmem only: steadier than wall time on a shared machine
            row.append(f"{med(cpus[key]) / med(cv):.2f}×" if name in (n for n, _, _ in DPMEM) and name != "vanilla" else "")
            base_name = {None: "torch eager", "hooks": "opacus hooks", "ghost": "opacus ghost"}[family]
            if name in (n for n, _, _ in TORCH):
                row += ["", "", ""]
            elif torch_ok and ((model, T), base_name) in results:
                bs = results[((model, T), base_name)]
                rr = [x / b for x, b in zip(xs, bs)]
                row += [base_name, f"{med(bs):.3f} {fmt_range(bs, '{:.3f}')}", f"{med(xs) / med(bs):.2f}× {fmt_range(rr)}"]
            else:
                row += [base_name, "skipped" if not torch_ok else "not run", ""]
            fb = phases[key]
            row.append(f"{100 * flops / med(fb) / peak['sgemm_peak']:.0f}% ({100 * flops / med(fb) / (2 * peak['sgemm_peak_1thread']):.0f}%)"
                       if name in ("vanilla", "torch eager") else "")
            row.append(f"{info[key]['peak_bytes'] / 2**20:.0f}" if "peak_bytes" in info[key] else "")
            print("| " + " | ".join(row) + " |", flush=True)
    j = next(iter(v for k, v in info.items() if "torch" in v), None)
    if j:
        print(f"\ntorch {j['torch']}, transformers {j['transformers']}, opacus {j['opacus']}, {j['threads']} threads; "
              f"PyTorch's BLAS: {j['blas']} (its own CPU dispatch), ATen's CPU kernels {j['cpu_capability']}; "
              f"dpmem's BLAS: OpenBLAS core {peak['blas_core']}")
    print(f"load average at the end {load()}")
    print("the goals (docs/PERFORMANCE.md): dpmem vanilla ÷ torch eager <= 0.8; >= 60 % of the sgemm peak in fwd+bwd at T=1024; "
          "flash+bk and mixed+bk <= 1.3x dpmem vanilla; every DP method <= 0.5x its Opacus family")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[1:])
    else:
        sys.exit(main())
