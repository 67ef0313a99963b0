#!/bin/sh
# test_include_floors.sh — every #include "..." of the project's C, C++ and CUDA sources points down
# the floors (README "Layout"), never up:
#   0 common/            helpers every floor may use (file guards, UTF-8, timing statistics)
#   1 dpmem.h, dpmem_cuda.h   the kit
#   2 kernels/           the ops (cpu/, cuda/, plan/, the noise)
#   3 samples/llama/     the trainer library: model, loop, configuration, data, checkpoints, ranks
#   4 samples/dp/        the DP-SGD strategy, its configuration, the accountant
#   5 tools/read/        the log reader and what the tools compute from it (statistics, units, output)
#   6 tools/charts/, tools/trace/   drawing (figures, charts, timelines) and the Perfetto writer:
#                        siblings, neither includes the other
#   7 programs: samples/*.c, bench/, tools/*.c, tests/, python/
# An include is resolved as the compilers do: beside the including file, then -I. -Ikernels -Isamples
# -Itools (the Makefile's order) and -Ikernels/cuda (the CUDA backend's); one found nowhere is a
# system or dependency header and is not judged. Also: the three DP samples stay one table
# (samples/train_dp.c), not three mains. Inside samples/llama/ the ranks' stack depends one way too (LLAMA_ORDER:
# comm < the model's files < dist < shard < grad_reduce < the loop), so that no loop between them can come back.
# Run from the repository root; ROOT= to check another tree.
set -u
ROOT=${ROOT:-.}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
python3 - "$ROOT" <<'PY'
import os, re, subprocess, sys
root = sys.argv[1]
SRC = (".c", ".h", ".cu", ".cuh", ".cpp")
OUTPUTS = {"build", "results", ".git", ".venv", ".deps", ".gpu"}
def walk(root):
    out = []
    for d, ds, fs in os.walk(root):
        ds[:] = [x for x in ds if x not in OUTPUTS]
        out += [os.path.relpath(os.path.join(d, f), root) for f in fs if f.endswith(SRC)]
    return sorted(out)
try:   # the tracked sources; outside a git checkout (an unpacked archive), the tree minus its outputs
    files = subprocess.run(["git", "-C", root, "ls-files"] + ["*" + e for e in SRC],
                           capture_output=True, text=True, check=True).stdout.split()
except (OSError, subprocess.CalledProcessError):
    files = walk(root)
def floor(p):
    if p.startswith("common/"): return 0
    if p in ("dpmem.h", "dpmem_cuda.h"): return 1
    if p.startswith("kernels/"): return 2
    if p.startswith("samples/llama/"): return 3
    if p.startswith("samples/dp/"): return 4
    if p.startswith("tools/read/"): return 5
    if p.startswith(("tools/charts/", "tools/trace/")): return 6
    if re.match(r"(samples|bench|tests|python)/", p) or re.fullmatch(r"tools/[^/]+", p): return 7
    return None
NAMES = ["common", "kit", "kernels", "samples/llama", "samples/dp", "tools/read", "tools/charts|trace", "programs"]
def folder(p): return os.path.dirname(p)
# samples/llama/ by a file's stem: the transport, the model and its files, then the ranks' layers, the loop on top
LLAMA_ORDER = [["comm", "comm_nccl"],
               ["file_errors", "safetensors", "hf_config", "config", "data", "mfu", "lora", "classify", "llama", "checkpoint"],
               ["dist"], ["shard"], ["grad_reduce"], ["train", "train_cuda", "train_gpu_time", "eval", "plan_time"]]
LLAMA_LEVEL = {stem: k for k, stems in enumerate(LLAMA_ORDER) for stem in stems}
def llama_level(p):
    return LLAMA_LEVEL.get(os.path.splitext(os.path.basename(p))[0]) if p.startswith("samples/llama/") else None
search = [".", "kernels", "samples", "tools", "kernels/cuda"]
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
bad, checked, unknown = [], 0, []
for f in files:
    ff = floor(f)
    if ff is None: unknown.append(f); continue
    for n, line in enumerate(open(os.path.join(root, f), encoding="utf-8", errors="replace"), 1):
        m = inc.match(line)
        if not m: continue
        name = m.group(1)
        cands = [os.path.normpath(os.path.join(os.path.dirname(f), name))] + \
                [os.path.normpath(os.path.join(d, name)) for d in search]
        target = next((c for c in cands if os.path.isfile(os.path.join(root, c))), None)
        if target is None: continue
        checked += 1
        tf = floor(target)
        if tf is None: unknown.append(target); continue
        if tf > ff:
            bad.append(f"{f}:{n}: includes {target} ({NAMES[tf]}, above {NAMES[ff]})")
        elif tf == ff == 3:
            lf, lt = llama_level(f), llama_level(target)
            if lf is None: unknown.append(f + " (samples/llama/'s LLAMA_ORDER)")
            elif lt is None: unknown.append(target + " (samples/llama/'s LLAMA_ORDER)")
            elif lt > lf:
                bad.append(f"{f}:{n}: includes {target} (above it in samples/llama/: {' < '.join('|'.join(x) for x in LLAMA_ORDER)})")
        elif tf == ff == 6 and folder(f) != folder(target):
            bad.append(f"{f}:{n}: includes {target} (tools/charts and tools/trace are siblings)")
for b in bad: print("FAIL", b)
for u in sorted(set(unknown)): print("FAIL", u, "is on no floor (add it to the test's table)")
mains = [f for f in files if re.fullmatch(r"samples/train_(dpsgd|ghost|flash)\.c", f)]
for m in mains: print("FAIL", m, "is a main of its own: the DP samples are rows of samples/train_dp.c")
if bad or unknown or mains: sys.exit(1)
print(f"ok   {checked} includes in {len(files)} files, each to its own floor or one below")
PY
