#!/bin/sh
# test_ckpt_cli.sh — --save, --init-from and --save-dtype through build/train_vanilla: a saved run
# loads back and saves again byte for byte (F32), --print-params shows the checkpoint's names, BF16
# saves are half the size, and bad checkpoints or flags end with exit 1 and one line naming the
# problem (missing directory, non-LLaMA config, truncated weights, a shape flag that contradicts
# the checkpoint, an unknown --save-dtype); a save that fails (EFBIG, or killed) leaves the checkpoint
# there whole; a save from a Hugging Face layout keeps token ids (a list as a list), max
# positions and rope scaling and copies the tokenizer files (also when saving over the base); a LoRA run's --save matches PEFT (tests/test_ckpt_peft.py);
# the plan backend plans from a config.json without weights (Llama-3.2-1B's, as published).
B=${DPMEM_BUILD:-build}
T="$B/train_vanilla"
[ -x "$T" ] || { echo "FAIL: $T not built"; exit 1; }
d=$(mktemp -d /tmp/test_ckpt_cli.XXXXXX) || exit 1
trap 'rm -rf "$d"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }

# expect_error WHAT SUBSTRING -- command...: exit 1, stderr one line containing SUBSTRING.
expect_error() {
  what=$1; sub=$2; shift 3
  "$@" >"$d/out" 2>"$d/err"; rc=$?
  [ $rc -eq 1 ] || no "$what: exit $rc, want 1"
  [ "$(wc -l <"$d/err")" -eq 1 ] || no "$what: stderr is not one line: $(cat "$d/err")"
  grep -q -- "$sub" "$d/err" || no "$what: stderr lacks '$sub': $(cat "$d/err")"
}

"$T" --steps 2 --quiet --kv-heads 2 --save "$d/a" >/dev/null 2>"$d/err" || no "training with --save failed: $(cat "$d/err")"
[ -s "$d/a/config.json" ] && [ -s "$d/a/model.safetensors" ] || no "--save wrote no config.json/model.safetensors"
"$T" --init-from "$d/a" --steps 0 --quiet --save "$d/b" >/dev/null 2>"$d/err" || no "--init-from then --save failed: $(cat "$d/err")"
cmp -s "$d/a/model.safetensors" "$d/b/model.safetensors" || no "load + save (F32) did not reproduce model.safetensors byte for byte"
cmp -s "$d/a/config.json" "$d/b/config.json" || no "load + save changed config.json"
"$T" --init-from "$d/a" --print-params >"$d/out" 2>&1 || no "--print-params with --init-from failed"
grep -q "^model.layers.1.self_attn.k_proj.weight  *(32, 64)" "$d/out" || no "--print-params does not show the checkpoint's k_proj (32, 64): $(head -5 "$d/out")"
"$T" --init-from "$d/a" --steps 1 --quiet --save "$d/c" --save-dtype bf16 >/dev/null 2>&1 || no "--save-dtype bf16 failed"
a=$(wc -c <"$d/a/model.safetensors"); c=$(wc -c <"$d/c/model.safetensors")
[ $((a - c)) -gt $((a / 2 - 2048)) ] || no "bf16 file is $c bytes, f32 is $a: not about half"
grep -q '"torch_dtype":[[:space:]]*"bfloat16"' "$d/c/config.json" || no "bf16 save's config.json does not say bfloat16"

# A --save over a checkpoint that fails (a file-size limit: EFBIG, or the trainer killed by SIGXFSZ) leaves that
# checkpoint whole: it replaced config.json first, and the old weights beside the new config no longer loaded.
cp "$d/a/config.json" "$d/a.config" && cp "$d/a/model.safetensors" "$d/a.weights"
for how in efbig killed; do
  ( [ $how = efbig ] && trap '' XFSZ; ulimit -f 16; exec "$T" --steps 1 --quiet --kv-heads 4 --save "$d/a" ) >/dev/null 2>"$d/err"; rc=$?
  [ $rc -ne 0 ] || no "$how: a save over the file-size limit exited 0"
  [ $how = killed ] || grep -q "model.safetensors: write failed: File too large" "$d/err" || no "$how: no write error: $(cat "$d/err")"
  cmp -s "$d/a.config" "$d/a/config.json" && cmp -s "$d/a.weights" "$d/a/model.safetensors" \
    || no "$how: a failed --save replaced the checkpoint there (config.json or model.safetensors changed)"
  "$T" --init-from "$d/a" --steps 0 --quiet >/dev/null 2>"$d/err" || no "$how: the checkpoint no longer loads: $(cat "$d/err")"
  rm -rf "$d"/a.tmp.*   # (what a killed writer leaves: its unfinished copy, beside the directory)
done

# From a Hugging Face layout checkpoint: the saved directory keeps the token ids, max positions and
# llama3 scaling of the base, and gets its tokenizer files.
if command -v python3 >/dev/null 2>&1; then
  python3 tests/test_ckpt_hf_layout.py "$d/hf" || no "layout writer failed"
  printf '{"fake": "tokenizer"}\n' >"$d/hf/tokenizer.json"
  printf '{"bos_token_id": 1}\n' >"$d/hf/generation_config.json"
  "$T" --init-from "$d/hf" --steps 1 --quiet --seq-len 8 --save "$d/hf2" >/dev/null 2>"$d/err" || no "training from the HF layout failed: $(cat "$d/err")"
  cmp -s "$d/hf/tokenizer.json" "$d/hf2/tokenizer.json" || no "tokenizer.json was not copied"
  cmp -s "$d/hf/generation_config.json" "$d/hf2/generation_config.json" || no "generation_config.json was not copied"
  for kv in '"bos_token_id":[[:space:]]*1,' '"eos_token_id":[[:space:]]*2,' '"max_position_embeddings":[[:space:]]*131072,' \
            '"rope_type":[[:space:]]*"llama3"' '"tie_word_embeddings":[[:space:]]*true' '"num_key_value_heads":[[:space:]]*2,'; do
    grep -q "$kv" "$d/hf2/config.json" || no "saved config.json lacks $kv"
  done
  # full DP on the tied HF checkpoint (its lm_head is embed_tokens), direct and flash+bk, saved back tied
  for t in "train_dpsgd" "train_flash"; do
    "$B/$t" --init-from "$d/hf" --steps 2 --seq-len 8 --batch-size 2 --save "$d/dp-$t" >"$d/out" 2>"$d/err" \
      || no "full DP ($t) on the tied HF checkpoint failed: $(cat "$d/err")"
    grep -q "lm_head is tied" "$d/out" || no "$t on the tied checkpoint did not say the matrix is tied"
    grep -q '"tie_word_embeddings":[[:space:]]*true' "$d/dp-$t/config.json" || no "$t: the saved DP model is not tied"
  done
  "$T" --init-from "$d/hf2" --steps 0 --quiet --seq-len 8 --save "$d/hf2" >/dev/null 2>"$d/err" || no "saving over the --init-from directory failed: $(cat "$d/err")"
  cmp -s "$d/hf/tokenizer.json" "$d/hf2/tokenizer.json" || no "saving over the base damaged tokenizer.json"
  # a list-valued eos_token_id (Llama 3.x Instruct's stop tokens) is saved as the list, not cut to its first
  mkdir -p "$d/hf3" && cp "$d/hf/model.safetensors" "$d/hf3/" &&
    sed 's/"eos_token_id":[[:space:]]*2,/"eos_token_id": [6, 7],/' "$d/hf/config.json" >"$d/hf3/config.json"
  grep -q '"eos_token_id": \[6, 7\]' "$d/hf3/config.json" || no "test bug: the eos list was not written into hf3"
  "$T" --init-from "$d/hf3" --steps 0 --quiet --seq-len 8 --save "$d/hf4" >/dev/null 2>"$d/err" || no "saving from hf3 failed: $(cat "$d/err")"
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(c["eos_token_id"] != [6, 7] or c["bos_token_id"] != 1)' \
    "$d/hf4/config.json" || no "eos_token_id [6, 7] was not saved as the list (bos as 1): $(grep _token_id "$d/hf4/config.json")"
fi

expect_error "missing directory" "config.json" -- "$T" --init-from "$d/none" --steps 1
mkdir -p "$d/mistral" && sed 's/LlamaForCausalLM/MistralForCausalLM/' "$d/a/config.json" >"$d/mistral/config.json"
expect_error "non-LLaMA config" "MistralForCausalLM" -- "$T" --init-from "$d/mistral" --steps 1
mkdir -p "$d/trunc" && cp "$d/a/config.json" "$d/trunc/" && head -c 20000 "$d/a/model.safetensors" >"$d/trunc/model.safetensors"
expect_error "truncated weights" "trunc/model.safetensors" -- "$T" --init-from "$d/trunc" --steps 1
expect_error "shape flag against the checkpoint" "hidden_size" -- "$T" --init-from "$d/a" --dim 128 --steps 1
# A NaN weight (the first data element, F32 0x7fc00000) is named at load; --allow-nonfinite loads it anyway.
mkdir -p "$d/nan" && cp "$d/a/config.json" "$d/a/model.safetensors" "$d/nan/"
hlen=$(od -An -t u4 -N4 "$d/nan/model.safetensors" | tr -d ' ')
printf '\000\000\300\177' | dd of="$d/nan/model.safetensors" bs=1 seek=$((8 + hlen)) conv=notrunc 2>/dev/null
expect_error "a NaN weight" "element 0 is NaN (--allow-nonfinite" -- "$T" --init-from "$d/nan" --steps 1
"$T" --init-from "$d/nan" --allow-nonfinite --steps 1 --quiet >/dev/null 2>"$d/err" || no "--allow-nonfinite refused the NaN checkpoint: $(cat "$d/err")"
# A failed --save over the --init-from directory (a file-size limit: as a full disk) leaves its config.json whole.
mkdir -p "$d/full" && cp "$d/a/config.json" "$d/a/model.safetensors" "$d/full/"
(ulimit -f 1; trap '' XFSZ; "$T" --init-from "$d/full" --steps 0 --quiet --save "$d/full" >/dev/null 2>"$d/err") && no "a save over the file-size limit succeeded"
cmp -s "$d/a/config.json" "$d/full/config.json" || no "a failed --save over --init-from changed config.json ($(wc -c <"$d/full/config.json") bytes)"
cmp -s "$d/a/model.safetensors" "$d/full/model.safetensors" || no "a failed --save over --init-from changed model.safetensors"
expect_error "unknown --save-dtype" "--save-dtype" -- "$T" --save "$d/x" --save-dtype fp8 --steps 1
expect_error "--init-from without a value" "--init-from" -- "$T" --steps 1 --init-from
# Planning before downloading: the published Llama-3.2-1B config.json alone plans on the plan backend
# (a note says no weights were read) with the same peak as the llama3.2-1b preset; a real run refuses it.
mkdir -p "$d/l32"
cat >"$d/l32/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
 "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
 "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
 "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
 "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
                  "rope_type": "llama3"},
 "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
 "use_cache": true, "vocab_size": 128256}
JSON
"$T" --init-from "$d/l32" --device plan --steps 1 --seq-len 256 --batch-size 1 >"$d/out" 2>"$d/err" \
  || no "plan from config.json alone failed: $(cat "$d/err")"
grep -q "planned from $d/l32/config.json alone (no weights there, none read)" "$d/out" || no "plan from config.json: no note: $(cat "$d/out")"
grep -q "1235814400 parameters" "$d/out" || no "plan from config.json: not Llama-3.2-1B's 1,235,814,400 parameters"
p1=$(grep "^peak tagged memory" "$d/out")
p2=$("$T" --model llama3.2-1b --device plan --steps 1 --seq-len 256 --batch-size 1 | grep "^peak tagged memory")
[ -n "$p1" ] && [ "$p1" = "$p2" ] || no "plan from config.json ($p1) differs from the llama3.2-1b preset ($p2)"
expect_error "a real run from config.json alone" "neither model.safetensors" -- "$T" --init-from "$d/l32" --steps 1 --seq-len 8
# LoRA: the merged model plus PEFT adapters in <save>/adapter, checked against PEFT's W0 + alpha/r B A.
if [ -x "$B/train_lora" ] && command -v python3 >/dev/null 2>&1; then
  "$B/train_lora" --init-from "$d/a" --lora-rank 2 --steps 3 --lr 0.01 --quiet --save "$d/lora" >/dev/null 2>"$d/err" \
    || no "train_lora --save failed: $(cat "$d/err")"
  python3 tests/test_ckpt_peft.py "$d/a" "$d/lora" || no "the LoRA save does not match PEFT's semantics"
else
  echo "note: no $B/train_lora (or python3): the PEFT save is not checked here"
fi
[ $fail -eq 0 ] && echo "checkpoint flags: save, load, re-save byte-identical, bf16, bad checkpoints OK"
exit $fail
