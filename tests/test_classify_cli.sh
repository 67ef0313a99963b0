#!/bin/sh
# test_classify_cli.sh — --task classify from the command line: its one-line errors; a labelled token
# file from tools/make_tokens.py --labels (ids, and text through a Hugging Face tokenizer built here,
# nothing downloaded: single texts and premise/hypothesis pairs from CSV and JSON lines) that the
# trainer reads; META config.task; the planner: for every method (and LoRA, and bf16 with activation
# checkpointing) `run_experiments --plan --check` gives a predicted peak EXACTLY the measured one of a
# CPU run; the plan for the CUDA target runs; `--matrix opacus-small` plans its four sweeps. Exits 0 on
# pass, 1 on failure.
B=${DPMEM_BUILD:-build}
T=$B/train_vanilla
[ -x "$T" ] || { echo "FAIL: $T not built"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3 for tools/make_tokens.py"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
no() { echo "FAIL: $*"; fail=1; }
TINY="--model tiny --vocab 29 --dim 32 --layers 2 --heads 4 --kv-heads 2 --ffn 48"

# expect_fail PATTERN ARGS...: exit 1 and one line on stderr matching PATTERN
expect_fail() {
    pat=$1; shift
    "$T" --quiet $TINY "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 1 ] || [ "$(grep -c . "$tmp/err")" -ne 1 ] || ! grep -q -- "$pat" "$tmp/err"; then
        no "[$*]: exit $rc, stderr: $(cat "$tmp/err")"; return
    fi
    echo "ok   [$*] -> $(cat "$tmp/err")"
}

# labelled rows of ids: label first; rows of 2..6 tokens, right-padded with 0 to 6
printf '2 5 6 7\n0 8 9 10 11 12 13\n1 1 2 3 4 5\n0 9 9 9\n2 3 4 5 6 7 8\n1 4 4 4 4 4\n' >"$tmp/rows.txt"
python3 tools/make_tokens.py --labels --ids "$tmp/rows.txt" --vocab 29 --num-labels 3 --pad-id 0 --out "$tmp/rows.bin" >/dev/null \
    || no "make_tokens --labels --ids failed"
python3 tools/make_tokens.py --info "$tmp/rows.bin" | grep -q "labelled, version 1, 6 rows of 6 tokens, 3 labels (counts \[2, 2, 2\]), pad id 0" \
    || no "--info of the labelled file: $(python3 tools/make_tokens.py --info "$tmp/rows.bin")"
printf '3 5 6\n' >"$tmp/bad.txt"
python3 tools/make_tokens.py --labels --ids "$tmp/bad.txt" --vocab 29 --num-labels 3 --pad-id 0 --out "$tmp/bad.bin" 2>"$tmp/err" \
    && no "label 3 of 3 accepted by make_tokens"
grep -q "row 0 has label 3, outside 0..2" "$tmp/err" || no "make_tokens' label error: $(cat "$tmp/err")"
# refused where written, nothing written (both were written, exit 0, and the trainer refused the file later):
# --pad-id -1 (rows padded with -1) and a row of a label and no tokens
python3 tools/make_tokens.py --labels --ids "$tmp/rows.txt" --vocab 29 --num-labels 3 --pad-id -1 --out "$tmp/bad.bin" 2>"$tmp/err" \
    && no "make_tokens --labels --pad-id -1 accepted"
grep -q "the pad id -1 is outside the vocabulary \[0, 29)" "$tmp/err" && [ ! -e "$tmp/bad.bin" ] || no "make_tokens --pad-id -1: $(cat "$tmp/err")"
printf '2 5 6\n1\n' >"$tmp/empty.txt"
python3 tools/make_tokens.py --labels --ids "$tmp/empty.txt" --vocab 29 --num-labels 3 --pad-id 0 --out "$tmp/bad.bin" 2>"$tmp/err" \
    && no "make_tokens --labels wrote a row with no tokens"
grep -q "row 1 has no tokens" "$tmp/err" && [ ! -e "$tmp/bad.bin" ] || no "make_tokens' empty row: $(cat "$tmp/err")"

expect_fail "--task classify needs --num-labels K (K >= 2), or a labelled --data file" --task classify
expect_fail "--num-labels 3 is for --task classify" --num-labels 3
expect_fail "--num-labels needs an integer in \[2," --task classify --num-labels 1
expect_fail "--pad-id 29 is not a token of the vocabulary (size 29)" --task classify --num-labels 3 --pad-id 29
expect_fail "--task must be one of" --task regress
# K and the pad id are the file's (its header): the flags may be left out; one that disagrees is refused
expect_fail "--num-labels 4, but $tmp/rows.bin holds 3 labels (its header)" --task classify --num-labels 4 --pad-id 0 --data "$tmp/rows.bin" --seq-len 8
expect_fail "--pad-id 5, but $tmp/rows.bin pads with token 0 (its header)" --task classify --pad-id 5 --data "$tmp/rows.bin" --seq-len 8
expect_fail "--eval-every 2 needs --eval-data FILE" --eval-every 2
"$T" $TINY --task classify --data "$tmp/rows.bin" --seq-len 8 --steps 1 --log "$tmp/hdr.log" >"$tmp/out" 2>"$tmp/err" \
    || no "K and the pad id from the file's header: exit $?: $(cat "$tmp/err")"
grep -aq "config.num_labels" "$tmp/hdr.log" && [ ! -s "$tmp/err" ] || no "the run with K and pad from the header: $(cat "$tmp/err")"
# --seq-len below the rows' length: said once, with how many rows it cuts (rows of 3..6 tokens; 4 cut at 4)
"$T" --quiet $TINY --task classify --data "$tmp/rows.bin" --seq-len 4 --steps 1 >"$tmp/out" 2>"$tmp/err" || no "--seq-len 4: exit $?"
[ "$(grep -c "cuts 4 of the 6 rows of '$tmp/rows.bin'" "$tmp/err")" = 1 ] || no "--seq-len 4 did not say once how many rows it cuts: $(cat "$tmp/err")"
# --eval-data: held-out loss and accuracy after every N steps and the last. With --lr 0 and the batch the
# whole file, the evaluation after step 1 is that step's own loss (the mean over the same 6 rows, same weights)
"$T" $TINY --task classify --data "$tmp/rows.bin" --seq-len 8 --batch-size 6 --steps 2 --lr 0 --eval-data "$tmp/rows.bin" \
    --eval-every 1 --log "$tmp/eval.log" >"$tmp/out" 2>&1 || no "--eval-data: exit $?: $(tail -n 3 "$tmp/out")"
l1=$(sed -n 's/^loss: \([0-9.]*\) (step 1).*/\1/p' "$tmp/out")
e1=$(sed -n 's/^eval after step 1: loss \([0-9.]*\), accuracy [0-9.]* % ([0-6] of 6 rows of .*)$/\1/p' "$tmp/out")
awk -v a="$l1" -v b="$e1" 'BEGIN { exit !(a > 0 && b > 0 && (a - b < 2e-6 * a) && (b - a < 2e-6 * a)) }' \
    || no "--eval-data after step 1 (lr 0, the file as the batch): eval loss '$e1', the step's loss '$l1': $(grep -i "eval\|loss" "$tmp/out")"
[ "$(grep -c "^eval after step" "$tmp/out")" = 2 ] || no "--eval-every 1 --steps 2: not two evaluations"
for s in eval.loss eval.accuracy eval.rows; do grep -aq "$s" "$tmp/eval.log" || no "the log lacks '$s'"; done
if [ -x "$B/dpmem-report" ]; then
    "$B/dpmem-report" "$tmp/eval.log" 2>&1 | grep -q "^evaluation (META eval.\*) on $tmp/rows.bin: after step 1: loss .*, accuracy .*; after step 2: loss" \
        || no "dpmem-report does not show the evaluations: $("$B/dpmem-report" "$tmp/eval.log" 2>&1 | grep -i eval)"
fi
# under DP: said once that the evaluation is outside ε; META eval.outside_epsilon
if [ -x "$B/train_ghost" ]; then
    "$B/train_ghost" $TINY --task classify --data "$tmp/rows.bin" --seq-len 8 --batch-size 6 --max-physical-batch-size 3 --steps 1 \
        --eval-data "$tmp/rows.bin" --log "$tmp/eval-dp.log" >"$tmp/out" 2>&1 || no "--eval-data under DP: exit $?"
    [ "$(grep -c "is outside DP-SGD's guarantee" "$tmp/out")" = 1 ] && grep -q "^eval after step 1: loss" "$tmp/out" \
        && grep -aq "eval.outside_epsilon" "$tmp/eval-dp.log" || no "--eval-data under DP: $(grep -i eval "$tmp/out")"
fi
# a causal LM: loss and perplexity = exp(loss)
python3 tools/make_tokens.py --ids "$tmp/rows.txt" --vocab 29 --out "$tmp/lm-eval.bin" >/dev/null
"$T" --quiet $TINY --data "$tmp/lm-eval.bin" --seq-len 4 --steps 1 --eval-data "$tmp/lm-eval.bin" >"$tmp/out" 2>&1 || no "LM --eval-data: exit $?"
sed -n 's/^eval after step 1: loss \([0-9.]*\), perplexity \([0-9.]*\) (8 rows of .*)$/\1 \2/p' "$tmp/out" \
    | awk '{ d = exp($1) - $2; if (d < 0) d = -d; exit !(NF == 2 && d < 1e-3 * $2) }' || no "LM --eval-data: $(grep eval "$tmp/out")"
expect_fail "is a labelled one (magic 20260335): give --task classify" --data "$tmp/rows.bin" --seq-len 4
python3 tools/make_tokens.py --ids "$tmp/rows.txt" --vocab 29 --out "$tmp/lm.bin" >/dev/null
expect_fail "reads a labelled token file" --task classify --num-labels 3 --data "$tmp/lm.bin" --seq-len 4

# training on the file: META says the task; the loss is the classification loss (ln 3 at the start)
"$T" $TINY --task classify --num-labels 3 --pad-id 0 --data "$tmp/rows.bin" --seq-len 8 --batch-size 3 --steps 2 \
    --device cpu --log "$tmp/run.log" >"$tmp/out" 2>&1 || no "a classify run on the labelled file: $(tail -n 3 "$tmp/out")"
for s in config.task classify config.num_labels config.pad_id; do
    grep -aq "$s" "$tmp/run.log" || no "the log lacks '$s'"
done
first=$(sed -n 's/^loss: \([0-9.]*\) (step 1).*/\1/p' "$tmp/out")
awk -v l="$first" 'BEGIN { exit !(l > 0.9 && l < 1.3) }' || no "the first loss '$first' is not near ln 3 = 1.0986: $(grep -i loss "$tmp/out")"

# the planner: predicted = measured, every method, fp32, then bf16 with checkpointing
# check_plan LABEL "EXPERIMENTS" "SUITE FLAGS" TRAINER FLAGS...
check_plan() {
    label=$1; exps=$2; flags=$3; shift 3
    d=$tmp/$label
    sh tools/run_experiments --build "$B" --out "$d" --plan --check --tolerance 0 --device cpu --quiet $flags $exps -- "$@" \
        >"$tmp/$label.stdout" 2>&1 || { no "[$label] the suite exited $?: $(tail -n 5 "$tmp/$label.stdout")"; return; }
    for e in $exps; do
        line=$(awk -v e="$e" '$1 == e' "$d/check.txt")
        set -- $line
        if [ "$5" != exact ] || [ "$2" != "$3" ]; then no "[$label] $e: predicted $2, measured $3 ($5)"
        elif ! grep -q -- '--task classify' "$d/$e.cmd" || ! grep -q -- '--task classify' "$d/$e.measured.cmd"; then no "[$label] $e: not a classify run"
        else echo "ok   [$label] $e: predicted = measured = $2 bytes"; fi
    done
}
check_plan classify-T8 "vanilla dpsgd ghost ghost+bk flash flash+twopass mixed mixed+twopass lora" \
    "$TINY --seq-len 8 --batch-size 6 --physical-batch 3 --steps 1 --lora-rank 3" --task classify --num-labels 3 --pad-id 0 --data "$tmp/rows.bin"
check_plan classify-T32-bf16-ckpt "vanilla ghost lora" "--model tiny --seq-len 32 --batch-size 4 --physical-batch 2 --steps 1 \
    --lora-rank 3 --precision bf16 --checkpoint-activations --tie-embeddings" --task classify --num-labels 2

# the plan for the CUDA target computes a peak too (kernels/cuda/scratch_cuda.c's sizes)
for t in train_vanilla train_ghost train_lora; do
    "$B/$t" --device plan --plan-for cuda --model llama3.2-1b --seq-len 128 --batch-size 2 --steps 1 --task classify --num-labels 3 \
        --pad-id 128004 >"$tmp/cuda.out" 2>&1 && grep -q "^peak tagged memory: [0-9]* bytes" "$tmp/cuda.out" \
        || no "$t: the CUDA plan of llama3.2-1b classify: $(tail -n 2 "$tmp/cuda.out")"
done
echo "ok   the CUDA plans of llama3.2-1b classify ran"

# the profiling matrix's preset at its small size, planned: every sweep's table, classify on every command
d=$tmp/matrix
sh tools/run_experiments --matrix opacus-small --plan --device cpu --quiet --out "$d" lora >"$tmp/matrix.stdout" 2>&1 \
    || no "--matrix opacus-small exited $?: $(tail -n 5 "$tmp/matrix.stdout")"
for k in seq-len batch-size physical-batch lora-rank; do
    grep -q "^peak tagged memory (MiB) vs $k" "$d/matrix.txt" || no "matrix.txt lacks the $k sweep"
    grep -q -- '--task classify --num-labels 3' "$d/$k/lora-$k"*.cmd 2>/dev/null || no "the $k sweep's runs are not classify runs"
done
[ "$(awk '$1 == "8" && NF == 2' "$d/seq-len/sweep.txt" | wc -l)" = 1 ] || no "the seq-len sweep has no row for 8: $(cat "$d/seq-len/sweep.txt")"
echo "ok   --matrix opacus-small --plan: four sweeps in matrix.txt"

# text through a tokenizer built here: pairs from JSON lines and CSV, single texts; each row is the
# tokenizer's own (pair) encoding, right-padded with its pad token
PY=$(pwd)/.venv/bin/python
if [ -x "$PY" ] && "$PY" -c "import transformers, tokenizers" 2>/dev/null; then
    "$PY" - "$tmp" <<'PYEOF' || fail=1
import json, os, struct, subprocess, sys
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import AutoTokenizer, PreTrainedTokenizerFast
d = sys.argv[1]
words = ["<pad>", "<s>", "</s>", "<unk>", "a", "cat", "dog", "sits", "runs", "the", "is", "not", "animal"]
tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
tk.pre_tokenizer = pre_tokenizers.Whitespace()
tk.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A </s> $B",
                                                  special_tokens=[("<s>", 1), ("</s>", 2)])
PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                        unk_token="<unk>").save_pretrained(os.path.join(d, "tok"))
recs = [("a cat sits", "the animal sits", "entailment"), ("the dog runs", "a cat is not a dog", "contradiction"),
        ("a dog", "the animal runs", "neutral")]
with open(os.path.join(d, "nli.jsonl"), "w") as f:
    for p, h, y in recs:
        f.write(json.dumps({"premise": p, "hypothesis": h, "label": y}) + "\n")
with open(os.path.join(d, "nli.csv"), "w") as f:
    f.write("premise,hypothesis,label\n" + "".join("%s,%s,%s\n" % r for r in recs))
tok = AutoTokenizer.from_pretrained(os.path.join(d, "tok"))
names = ["entailment", "neutral", "contradiction"]
fails = 0
for src in ("nli.jsonl", "nli.csv"):
    out = os.path.join(d, src + ".bin")
    subprocess.run([sys.executable, "tools/make_tokens.py", "--labels", "--tokenizer", os.path.join(d, "tok"), "--text", "premise",
                    "--pair", "hypothesis", "--label-names", ",".join(names), "--out", out, os.path.join(d, src)],
                   check=True, stdout=subprocess.DEVNULL)
    raw = open(out, "rb").read()
    h = struct.unpack("<6i", raw[:24])
    want = [tok(p, q)["input_ids"] for p, q, _ in recs]
    R = max(len(w) for w in want)
    if h != (20260335, 1, 3, R, 3, 0):
        print("FAIL: %s header %s" % (src, h)); fails += 1
    body = struct.unpack("<%di" % (3 * (R + 1)), raw[1024:])
    for i, (w, r) in enumerate(zip(want, recs)):
        row = body[i * (R + 1):(i + 1) * (R + 1)]
        if row[0] != names.index(r[2]) or list(row[1:]) != w + [0] * (R - len(w)):
            print("FAIL: %s row %d: %s, want label %d and %s padded" % (src, i, row, names.index(r[2]), w)); fails += 1
    print("ok   make_tokens --labels from %s: 3 pairs as the tokenizer encodes them, padded to %d" % (src, R))
out = os.path.join(d, "single.bin")
subprocess.run([sys.executable, "tools/make_tokens.py", "--labels", "--tokenizer", os.path.join(d, "tok"), "--text", "premise",
                "--max-len", "3", "--out", out, os.path.join(d, "nli.csv")], check=True, stdout=subprocess.DEVNULL)
raw = open(out, "rb").read()
body = struct.unpack("<12i", raw[1024:1024 + 48])
if list(body[1:4]) != tok("a cat sits")["input_ids"][:3] or body[0] != 1:   # sorted names: contradiction, entailment, neutral
    print("FAIL: single texts truncated to 3: %s" % (body,)); fails += 1
else:
    print("ok   make_tokens --labels single texts, --max-len 3, labels numbered in sorted order")
sys.exit(1 if fails else 0)
PYEOF
else
    echo "note: no .venv with transformers: the tokenizer part is skipped (make pyenv)"
fi
exit $fail
