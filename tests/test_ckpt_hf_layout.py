#!/usr/bin/env python3
"""test_ckpt_hf_layout.py — writes a tiny LLaMA checkpoint exactly as Hugging Face lays one out, with
nothing but the standard library (struct, json), and computes its loss independently.

    python3 tests/test_ckpt_hf_layout.py DIR [--sharded]

DIR gets config.json (Llama-3.2 style: GQA 4/2 heads, tied embeddings, llama3 rope scaling with all
three frequency bands present at head_dim 8) and either model.safetensors (BF16 tensors, names sorted
as safetensors' save_file sorts them, header padded with spaces to 8 bytes, {"format": "pt"}) or,
with --sharded, model.safetensors.index.json + two shards mixing BF16, F16 and F32 tensors plus an
old-style rotary_emb.inv_freq buffer that loaders ignore. Every value is a multiple of 1/64 small
enough to be exact in BF16 and F16, given by value_of(name, k) so the C side can check every element.

It also writes DIR/expected.txt: the mean cross-entropy of a fixed batch, computed here by a pure
Python forward pass with transformers' LlamaForCausalLM semantics (RMSNorm, rotate-half RoPE with
_compute_llama3_parameters frequencies, repeat_kv GQA, causal softmax, SiLU-gated MLP, tied head).
That is the independent oracle for the loss the C trainer computes from the loaded checkpoint."""
import json
import math
import os
import struct
import sys

V, C, L, NH, NKV, F = 50, 32, 2, 4, 2, 64
HS = C // NH
B, T = 2, 8
EPS, THETA = 1e-5, 10000.0
# original_max_position_embeddings 64 puts the four frequencies of head_dim 8 (wavelengths 6.3, 63,
# 628, 6283) in the high, medium, low and low bands, and makes the scaling matter within T = 8.
SCALING = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 64, "rope_type": "llama3"}


def value_of(name, k):
    """Element k of tensor `name`: exact in BF16 and F16 (a multiple of 1/64 below 2 in magnitude)."""
    h = sum(name.encode()) % 97
    if name.endswith("layernorm.weight") or name == "model.norm.weight":
        return 1.0 + ((k + h) % 5 - 2) / 8.0
    return (((h * 7 + k * 13) % 255) - 127) / 64.0 / 8.0


def shapes():
    s = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    for l in range(L):
        p = "model.layers.%d." % l
        s[p + "self_attn.q_proj.weight"] = (NH * HS, C)
        s[p + "self_attn.k_proj.weight"] = (NKV * HS, C)
        s[p + "self_attn.v_proj.weight"] = (NKV * HS, C)
        s[p + "self_attn.o_proj.weight"] = (C, NH * HS)
        s[p + "mlp.gate_proj.weight"] = (F, C)
        s[p + "mlp.up_proj.weight"] = (F, C)
        s[p + "mlp.down_proj.weight"] = (C, F)
        s[p + "input_layernorm.weight"] = (C,)
        s[p + "post_attention_layernorm.weight"] = (C,)
    return s


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def encode(values, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    # BF16: the top half of the F32 pattern (the values are exact, so no rounding is involved)
    return b"".join(struct.pack("<f", v)[2:4] for v in values)


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, values). Sorted by name, as save_file orders one dtype."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dtype, shape, values in sorted(tensors, key=lambda t: t[0]):
        blob = encode(values, dtype)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def inv_freqs():
    out = []
    for i in range(0, HS, 2):
        f = 1.0 / (THETA ** (i / HS))
        old, lo, hi, fac = (SCALING["original_max_position_embeddings"], SCALING["low_freq_factor"],
                            SCALING["high_freq_factor"], SCALING["factor"])
        wavelen = 2 * math.pi / f
        g = f / fac if wavelen > old / lo else f
        if not (wavelen < old / hi) and not (wavelen > old / lo):
            s = (old / wavelen - lo) / (hi - lo)
            g = (1 - s) * g / fac + s * g
        out.append(g)
    return out


def reference_loss(W):
    def mat(name):
        r, c = shapes()[name]
        v = W[name]
        return [v[i * c:(i + 1) * c] for i in range(r)]

    def linear(x, w):  # x [C_in], w [out][in]
        return [sum(a * b for a, b in zip(row, x)) for row in w]

    def rmsnorm(x, w):
        r = 1.0 / math.sqrt(sum(a * a for a in x) / len(x) + EPS)
        return [a * r * g for a, g in zip(x, w)]

    def rope(vec, t, inv):
        half = HS // 2
        out = list(vec)
        for i in range(half):
            c, s = math.cos(t * inv[i]), math.sin(t * inv[i])
            out[i] = vec[i] * c - vec[i + half] * s
            out[i + half] = vec[i + half] * c + vec[i] * s
        return out

    inv = inv_freqs()
    emb = mat("model.embed_tokens.weight")
    total, count = 0.0, 0
    for b in range(B):
        toks = [(b * 7 + t * 3 + 1) % V for t in range(T + 1)]
        xs = [list(emb[toks[t]]) for t in range(T)]
        for l in range(L):
            p = "model.layers.%d." % l
            hs = [rmsnorm(x, W[p + "input_layernorm.weight"]) for x in xs]
            q = [linear(h, mat(p + "self_attn.q_proj.weight")) for h in hs]
            k = [linear(h, mat(p + "self_attn.k_proj.weight")) for h in hs]
            v = [linear(h, mat(p + "self_attn.v_proj.weight")) for h in hs]
            for t in range(T):
                q[t] = sum((rope(q[t][h * HS:(h + 1) * HS], t, inv) for h in range(NH)), [])
                k[t] = sum((rope(k[t][h * HS:(h + 1) * HS], t, inv) for h in range(NKV)), [])
            attn = [[0.0] * (NH * HS) for _ in range(T)]
            for h in range(NH):
                g = h // (NH // NKV)  # repeat_kv
                for t in range(T):
                    qs = q[t][h * HS:(h + 1) * HS]
                    sc = [sum(a * c for a, c in zip(qs, k[s][g * HS:(g + 1) * HS])) / math.sqrt(HS) for s in range(t + 1)]
                    m = max(sc)
                    e = [math.exp(x - m) for x in sc]
                    z = sum(e)
                    for d in range(HS):
                        attn[t][h * HS + d] = sum(e[s] / z * v[s][g * HS + d] for s in range(t + 1))
            xs = [[a + o for a, o in zip(x, linear(at, mat(p + "self_attn.o_proj.weight")))] for x, at in zip(xs, attn)]
            for t in range(T):
                h2 = rmsnorm(xs[t], W[p + "post_attention_layernorm.weight"])
                gate = linear(h2, mat(p + "mlp.gate_proj.weight"))
                up = linear(h2, mat(p + "mlp.up_proj.weight"))
                act = [gg / (1 + math.exp(-gg)) * u for gg, u in zip(gate, up)]
                xs[t] = [a + d for a, d in zip(xs[t], linear(act, mat(p + "mlp.down_proj.weight")))]
        for t in range(T):
            h = rmsnorm(xs[t], W["model.norm.weight"])
            logits = linear(h, emb)  # tied lm_head
            m = max(logits)
            lse = m + math.log(sum(math.exp(z - m) for z in logits))
            total += lse - logits[toks[t + 1]]
            count += 1
    return total / count


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: test_ckpt_hf_layout.py DIR [--sharded]")
    out, sharded = sys.argv[1], "--sharded" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "head_dim": HS, "hidden_act": "silu", "hidden_size": C,
        "initializer_range": 0.02, "intermediate_size": F, "max_position_embeddings": 131072, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": NH, "num_hidden_layers": L, "num_key_value_heads": NKV,
        "pretraining_tp": 1, "rms_norm_eps": EPS, "rope_scaling": SCALING, "rope_theta": THETA,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.45.0",
        "use_cache": True, "vocab_size": V}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    W = {name: [value_of(name, k) for k in range(numel(shape))] for name, shape in shapes().items()}
    if not sharded:
        write_safetensors(os.path.join(out, "model.safetensors"),
                          [(n, "BF16", shapes()[n], W[n]) for n in W])
    else:
        names = sorted(W)
        first = [n for n in names if n.startswith("model.layers.0.") or n == "model.embed_tokens.weight"]
        second = [n for n in names if n not in first]
        def dtype(n):
            return "F32" if n.endswith("layernorm.weight") else "F16" if n == "model.norm.weight" else "BF16"
        files = {"model-00001-of-00002.safetensors": first, "model-00002-of-00002.safetensors": second}
        weight_map = {}
        for fname, group in files.items():
            tensors = [(n, dtype(n), shapes()[n], W[n]) for n in group]
            if fname.startswith("model-00002"):
                tensors.append(("model.layers.1.self_attn.rotary_emb.inv_freq", "F32", (HS // 2,), inv_freqs()))
            write_safetensors(os.path.join(out, fname), tensors)
            for t in tensors:
                weight_map[t[0]] = fname
        total = sum(numel(shapes()[n]) * (4 if dtype(n) == "F32" else 2) for n in W) + 4 * (HS // 2)
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("%.10f\n" % reference_loss(W))


if __name__ == "__main__":
    main()
