"""side_by_side.py — the same configuration in the C trainer and in PyTorch/Opacus, compared by category.

Called by opacus_llama.py --compare BUILD after its PyTorch run: runs BUILD/train_ghost (for
--mode ghost: ghost norms, two-pass clipping, as Opacus) or BUILD/train_dpsgd (--mode hooks: direct
per-sample gradients, as Opacus's hooks) with the same model, T, B, steps, clipping and noise,
then writes into --out:
  breakdown.png     build/dpmem-report --charts: one bar per run, by category at its peak
  side_by_side.md   each category's bytes at each run's peak, the ratio PyTorch / C, and every tag
                    live at each peak (the evidence for the differences, explained in docs/PYTHON.md)
  report.txt        build/dpmem-report's comparison of the two logs"""
import os
import shutil
import subprocess

from dpmem.logread import category, read

C_TRAINER = {"ghost": ("train_ghost", ["--norm", "ghost", "--clip", "twopass"]),
             "hooks": ("train_dpsgd", ["--norm", "direct", "--clip", "bk"])}
ORDER = ["params", "grads", "optimizer", "activations", "per_sample_grads", "norms", "ghost", "bk", "workspace",
         "untagged", "input", "buffers"]


def _mib(n):
    return "%.3f" % (n / 2**20)


def by_category(tags):
    out = {}
    for t, n in tags.items():
        out[category(t)] = out.get(category(t), 0) + n
    return out


def table(c, py):
    """Markdown rows: category, C bytes, PyTorch bytes, ratio, difference."""
    cc, pc = by_category(c.at_peak), by_category(py.at_peak)
    cats = [k for k in ORDER if k in cc or k in pc] + sorted((set(cc) | set(pc)) - set(ORDER))
    rows = ["| category | C trainer (B) | PyTorch/Opacus (B) | PyTorch / C | difference (B) |", "|---|---:|---:|---:|---:|"]
    for k in cats + ["total"]:
        a, b = (c.peak_bytes, py.peak_bytes) if k == "total" else (cc.get(k, 0), pc.get(k, 0))
        ratio = "%.3f" % (b / a) if a else ("—" if not b else "only PyTorch")
        rows.append("| %s | %d | %d | %s | %+d |" % (k if k != "total" else "**total (peak)**", a, b, ratio, b - a))
    return rows


def tag_list(log, title):
    rows = ["", "### %s: every tag live at its peak (%s MiB)" % (title, _mib(log.peak_bytes)), "",
            "| tag | bytes |", "|---|---:|"]
    for t, n in sorted(log.at_peak.items(), key=lambda kv: (category(kv[0]), -kv[1], kv[0])):
        rows.append("| %s | %d |" % (t, n))
    return rows


def trainer(a):
    """The C trainer's path and flags for a's mode; exits with one line when it is not built."""
    name, flags = C_TRAINER[a.mode]
    exe = os.path.join(a.compare, name)
    if not os.access(exe, os.X_OK):
        raise SystemExit("opacus_llama.py --compare: no %s (build it: make %s)" % (exe, exe))
    return name, exe, flags


def run(a, py_log):
    build = a.compare
    name, exe, flags = trainer(a)
    c_log = os.path.join(a.out, "c-%s.log" % a.mode)
    cfg = a.cfg
    cmd = [exe, "--model", a.model, "--seq-len", str(cfg["seq_len"]), "--batch-size", str(cfg["batch"]),
           "--steps", str(a.steps), "--max-grad-norm", str(a.max_grad_norm),
           "--noise-multiplier", str(a.noise_multiplier), "--lr", str(a.lr), "--seed", str(a.seed),
           "--log", c_log, "--run-name", "c-%s" % a.mode] + flags
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit("opacus_llama.py --compare: %s failed: %s" % (" ".join(cmd), r.stderr.strip()[-400:]))
    charts = os.path.join(a.out, "charts")
    rep = subprocess.run([os.path.join(build, "dpmem-report"), c_log, py_log, "--charts", charts],
                         capture_output=True, text=True)
    if rep.returncode != 0:
        raise SystemExit("opacus_llama.py --compare: dpmem-report failed: %s" % rep.stderr.strip())
    with open(os.path.join(a.out, "report.txt"), "w") as f:
        f.write(rep.stdout)
    shutil.copy(os.path.join(charts, "breakdown.png"), os.path.join(a.out, "breakdown.png"))
    c, py = read(c_log), read(py_log)
    head = ["# Side by side: %s vs PyTorch %s/Opacus %s" % (name, _version("torch"), _version("opacus")), "",
            "Model %s (V=%d C=%d L=%d NH=%d F=%d), T=%d, B=%d, %d steps, DP: C=%g, sigma=%g. C: `%s`." % (
                a.model, cfg["vocab"], cfg["dim"], cfg["layers"], cfg["heads"], cfg["ffn"], cfg["seq_len"],
                cfg["batch"], a.steps, a.max_grad_norm, a.noise_multiplier, " ".join(cmd)), "",
            "Bytes of each category live at each run's own peak of tagged memory "
            "(docs/PYTHON.md explains the differences).", ""]
    lines = head + table(c, py) + tag_list(c, "C trainer") + tag_list(py, "PyTorch/Opacus")
    md = os.path.join(a.out, "side_by_side.md")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(head[2:3] + table(c, py)))
    print("side by side: %s, %s" % (md, os.path.join(a.out, "breakdown.png")))


def _version(mod):
    try:
        return __import__(mod).__version__
    except Exception:
        return "?"
