#!/bin/sh
# test_llama_cli.sh — build/train_vanilla's command line: bad flags, impossible configs and bad data
# files give one clear line on stderr naming the problem and a non-zero exit (3 for out of memory);
# --print-params, --log, the plan backend and raw-text data work. Exits 0 on pass, 1 on failure.
B=${DPMEM_BUILD:-build}
T=$B/train_vanilla
[ -x "$T" ] || { echo "FAIL: $T not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive   # (passive: no re-exec, see train_prefer_passive_omp)

# expect_fail CODE PATTERN ARGS...: exit code CODE (or any non-zero for "x"), stderr one line matching PATTERN
expect_fail() {
    code=$1; pat=$2; shift 2
    "$T" --quiet "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    lines=$(grep -c . "$tmp/err")
    if [ $rc -eq 0 ] || { [ "$code" != x ] && [ $rc -ne "$code" ]; }; then
        echo "FAIL [$*]: exit $rc, want ${code}"; fail=1; return
    fi
    if ! grep -q -- "$pat" "$tmp/err"; then echo "FAIL [$*]: stderr lacks '$pat':"; cat "$tmp/err"; fail=1; return; fi
    if [ "$code" != 3 ] && [ "$lines" -ne 1 ]; then echo "FAIL [$*]: $lines lines on stderr, want 1"; cat "$tmp/err"; fail=1; return; fi
    echo "ok   [$*] -> exit $rc: $(grep -m1 error "$tmp/err")"
}

expect_fail 1 "does not divide --dim" --heads 5
expect_fail 1 "does not divide --heads" --kv-heads 3
expect_fail 1 "head size 3" --dim 12 --heads 4
expect_fail 1 "seq-len" --seq-len 0
expect_fail 1 "batch-size" --batch-size -2
expect_fail 1 "unknown --model 'huge'" --model huge
expect_fail 1 "unknown flag '--bogus'" --bogus 3
expect_fail 1 "--lr needs a non-negative number, got 'abc'" --lr abc
expect_fail 1 "--steps needs a value" --steps
expect_fail 1 "--device must be one of" --device tpu
expect_fail 1 "--mem-limit needs a size" --mem-limit 12Q
for v in 0 -5 abc 1e7 inf nan 12x ""; do
    expect_fail 1 "--peak-tflops needs a positive number of TFLOP/s (at most 1e6), got '$v'" --peak-tflops "$v"
done
expect_fail 1 "--peak-tflops needs a value" --peak-tflops
expect_fail 1 "cannot open data file '$tmp/missing.bin'" --data "$tmp/missing.bin"
expect_fail 3 "out of memory" --mem-limit 1M
expect_fail 3 "out of memory" --device plan --model 3b --seq-len 16384 --mem-limit 80G

# data files: truncated llm.c file, token out of range, too short, raw bytes with a small vocabulary
python3 - "$tmp" <<'PY' || { echo "FAIL: python3 could not write the data files"; exit 1; }
import struct, sys
d = sys.argv[1]
hdr = lambda magic, n: struct.pack('<256i', *([magic, 1, n] + [0] * 253))
open(d + '/trunc.bin', 'wb').write(hdr(20240520, 1000) + struct.pack('<100H', *range(100)))
open(d + '/range.bin', 'wb').write(hdr(20240520, 200) + struct.pack('<200H', *([5] * 150 + [5000] * 50)))
open(d + '/short.bin', 'wb').write(hdr(20240801, 10) + struct.pack('<10I', *range(10)))
open(d + '/u32.bin', 'wb').write(hdr(20240801, 500) + struct.pack('<500I', *[i % 37 for i in range(500)]))
open(d + '/text.txt', 'w').write('hello world, hello dpmem. ' * 40)
PY
expect_fail 1 "is truncated" --data "$tmp/trunc.bin"
expect_fail 1 "token 5000 at index 150 is >= the vocabulary size 1000" --data "$tmp/range.bin"
expect_fail 1 "fewer than seq-len + 1" --data "$tmp/short.bin"
expect_fail 1 "needs --vocab >= 256" --data "$tmp/text.txt" --vocab 100

# things that work
ok_run() {
    if "$T" "$@" >"$tmp/out" 2>"$tmp/err"; then echo "ok   [$*]"; else echo "FAIL [$*]: exit $?"; cat "$tmp/err"; fail=1; fi
}
ok_run --steps 2 --seq-len 16 --data "$tmp/u32.bin"
grep -q "llm.c uint32, 500 tokens" "$tmp/out" || { echo "FAIL: the uint32 file was not read as such"; fail=1; }
ok_run --steps 2 --seq-len 16 --data "$tmp/text.txt" --log "$tmp/run.log"
grep -q "raw bytes, 1040 tokens" "$tmp/out" || { echo "FAIL: the text file was not read as raw bytes"; fail=1; }
[ "$(head -c 8 "$tmp/run.log")" = DPMEMLOG ] || { echo "FAIL: --log did not write a dpmem log"; fail=1; }
for s in config.seq_len config.model train_vanilla params/layers.1.mlp.down_proj optimizer/embed_tokens.exp_avg_sq \
         activations/layers.0.self_attn.lse workspace/attn_backward model_creation optimizer_step zero_grad backward; do
    grep -aq "$s" "$tmp/run.log" || { echo "FAIL: the log lacks '$s'"; fail=1; }
done
# MFU (samples/llama/mfu.h): on the CPU only with --peak-tflops; tiny at T = 16, B = 4: N = 195072 weights in
# GEMMs, 6 N + 6 L NH HS T = 1170432 + 6 x 2 x 4 x 16 x 16 = 1182720 FLOP per token, x 64 tokens
ok_run --steps 2 --seq-len 16 --batch-size 4
grep -q "^MFU" "$tmp/out" && { echo "FAIL: an MFU line on the CPU without --peak-tflops"; fail=1; }
ok_run --steps 2 --seq-len 16 --batch-size 4 --peak-tflops 0.5 --log "$tmp/mfu.log"
grep -q "^MFU: .* 7.569e+07 FLOP / .* / 0.5 TFLOP/s (cpu; peak: --peak-tflops)" "$tmp/out" &&
    grep -q "(6 x 195072 + 6 x 2 x 4 x 16 x 16) x 64;" "$tmp/out" || { echo "FAIL: the MFU lines"; cat "$tmp/out"; fail=1; }
for s in mfu.flops_per_token mfu.peak_tflops timing.source; do
    grep -aq "$s" "$tmp/mfu.log" || { echo "FAIL: the log lacks '$s'"; fail=1; }
done
ok_run --steps 1 --seq-len 16 --run-name ghost-T16 --log "$tmp/named.log"
grep -aq "ghost-T16" "$tmp/named.log" || { echo "FAIL: --run-name did not reach the log"; fail=1; }
grep -aq "train_vanilla" "$tmp/named.log" && { echo "FAIL: the default run name is still in the log after --run-name"; fail=1; }
expect_fail 1 "--run-name needs a name" --run-name
ok_run --print-params --kv-heads 2
grep -q "^model.layers.1.self_attn.k_proj.weight  *(32, 64) *fp32 *8192 *yes" "$tmp/out" || { echo "FAIL: --print-params row"; cat "$tmp/out"; fail=1; }
grep -q "^total  *251200  *1004800" "$tmp/out" || { echo "FAIL: --print-params total (251200 with 2 kv heads)"; fail=1; }
ok_run --device plan --model 3b --seq-len 16384 --steps 1
grep -q "^  params  *13769792000 " "$tmp/out" || { echo "FAIL: plan 3b params bytes"; cat "$tmp/out"; fail=1; }
if grep -q TRAIN_HAVE_CUDA_PLAN mk/trainer.mk 2>/dev/null && [ -f kernels/cuda/scratch_cuda.c ]; then
    ok_run --device plan --plan-for cuda --model 3b --seq-len 16384 --steps 1
    grep -q "^  params  *13769792000 " "$tmp/out" && grep -q "plan backend for cuda" "$tmp/out" || { echo "FAIL: plan for cuda"; cat "$tmp/out"; fail=1; }
fi
# the shapes docs/SCALING.md plans have names (--model 8b was refused; six shape flags each): the published
# Llama-3/3.1 parameter counts, and 8b/70b the 3.1 presets
for m in "llama3-8b 8030261248" "llama3.1-8b 8030261248" "8b 8030261248" "llama3-70b 70553706496" "70b 70553706496"; do
    set -- $m
    ok_run --print-params --model "$1"
    grep -q "^total  *$2 " "$tmp/out" || { echo "FAIL: --model $1: $(grep '^total' "$tmp/out"), want $2 parameters"; fail=1; }
done
expect_fail 1 "unknown --model 'llama3-9b' (.*llama3.1-8b (8b)" --model llama3-9b
# a shape the flags change is "custom" (it said tiny in the header, META, the tools' titles), with the preset it came from
ok_run --device plan --model tiny --dim 128 --ffn 384 --steps 1 --log "$tmp/custom.log"
grep -q "custom model (V=1000 C=128 L=2 NH=4 NKV=4 F=384)" "$tmp/out" || { echo "FAIL: the custom shape's header: $(grep model "$tmp/out")"; fail=1; }
grep -aq "custom" "$tmp/custom.log" && grep -aq "config.model_from" "$tmp/custom.log" || { echo "FAIL: META config.model custom, model_from tiny"; fail=1; }
ok_run --device plan --model llama3.2-1b --layers 16 --steps 1 --seq-len 8
grep -q "^[^ ]*: llama3.2-1b model" "$tmp/out" || { echo "FAIL: a preset's own shape given in flags is still the preset: $(grep model "$tmp/out")"; fail=1; }
[ $fail -eq 0 ] && echo "all CLI checks passed"
exit $fail
