#!/usr/bin/env python3
"""test_ckpt_peft.py — checks a LoRA run's --save against PEFT's semantics, with the standard library.

    python3 tests/test_ckpt_peft.py BASE_DIR SAVED_DIR

BASE_DIR is the --init-from checkpoint, SAVED_DIR what `train_lora --init-from BASE_DIR --save
SAVED_DIR` wrote: the merged model in SAVED_DIR/model.safetensors and the adapters in
SAVED_DIR/adapter/. PEFT applies an adapter as W = W0 + (lora_alpha / r) · B · A, with A the
`...lora_A.weight` [r, in] and B the `...lora_B.weight` [out, r] of the module
`base_model.model.<base weight name>`. This script recomputes that from the base and the adapter
files and compares it with the merged weights (every element), checks that the weights without an
adapter are the base's bit for bit, that B is not all zero (the adapters trained), and that
adapter_config.json names the base, r, alpha and the target modules. Exit 0 on pass."""
import json
import os
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if e["dtype"] != "F32":
            sys.exit("FAIL: %s: %s is %s, this check reads F32 only" % (path, name, e["dtype"]))
        vals = struct.unpack("<%df" % ((end - b) // 4), data[b:end])
        out[name] = (e["shape"], vals)
    return out


def main():
    base_dir, saved_dir = sys.argv[1], sys.argv[2]
    base = read_safetensors(os.path.join(base_dir, "model.safetensors"))
    merged = read_safetensors(os.path.join(saved_dir, "model.safetensors"))
    adapters = read_safetensors(os.path.join(saved_dir, "adapter", "adapter_model.safetensors"))
    with open(os.path.join(saved_dir, "adapter", "adapter_config.json")) as f:
        cfg = json.load(f)
    fails = []
    r, alpha = cfg["r"], cfg["lora_alpha"]
    if cfg.get("peft_type") != "LORA" or cfg.get("task_type") != "CAUSAL_LM":
        fails.append("adapter_config.json: peft_type %r task_type %r" % (cfg.get("peft_type"), cfg.get("task_type")))
    if os.path.abspath(cfg.get("base_model_name_or_path", "")) != os.path.abspath(base_dir):
        fails.append("base_model_name_or_path %r is not the --init-from directory" % cfg.get("base_model_name_or_path"))
    adapted, nonzero_b = set(), 0
    prefix = "base_model.model."
    for name in sorted(adapters):
        if not name.endswith(".lora_A.weight"):
            continue
        module = name[len(prefix):-len(".lora_A.weight")]
        wname = module + ".weight"
        (ra, ia), A = adapters[name]
        (ob, rb), Bm = adapters[prefix + module + ".lora_B.weight"]
        (o, i), W0 = base[wname]
        _, W = merged[wname]
        if ra != r or rb != r or ia != i or ob != o:
            fails.append("%s: A %s, B %s do not fit W (%d, %d) at r %d" % (module, (ra, ia), (ob, rb), o, i, r))
            continue
        adapted.add(wname)
        nonzero_b += any(v != 0 for v in Bm)
        s, worst = alpha / r, 0.0
        for row in range(o):
            for col in range(i):
                delta = sum(Bm[row * r + k] * A[k * i + col] for k in range(r))
                want = W0[row * i + col] + s * delta
                worst = max(worst, abs(W[row * i + col] - want))
        if worst > 1e-5:
            fails.append("%s: merged weight differs from W0 + alpha/r * B A by %.3g" % (module, worst))
        if module.split(".")[-1] not in cfg["target_modules"]:
            fails.append("%s is not in target_modules %s" % (module, cfg["target_modules"]))
    if not adapted:
        fails.append("no adapters in adapter_model.safetensors")
    if nonzero_b == 0:
        fails.append("every lora_B is zero: the adapters did not train, the check proves nothing")
    for wname, (_, vals) in base.items():
        if wname not in adapted and merged[wname][1] != vals:
            fails.append("%s has no adapter but changed" % wname)
    for f in fails:
        print("FAIL: " + f)
    if not fails:
        print("PEFT: %d adapters, merged = W0 + %g/%d * B A everywhere, frozen weights unchanged" % (len(adapted), alpha, r))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
