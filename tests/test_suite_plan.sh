#!/bin/sh
# test_suite_plan.sh — the planner through the suite: `run_experiments --plan --check` on the CPU
# gives, for every method, a predicted peak (plan backend) EXACTLY equal to the measured tagged peak
# of a real CPU run, on tiny (several shapes; fp32 and bf16, with and without activation
# checkpointing; untied and tied) and on the small preset (one layer, 8000 tokens) (skipped in the sanitizer pass:
# 46M parameters under ASan are too slow). The numbers in check.txt are those the trainers printed.
# Then --plan alone at 3b, T=16384: seconds, and the parameters at the peak are exactly 4 bytes per
# parameter the trainer counted. summary.txt's command, run again, plans the same peaks. Exits 0 on
# pass, 1 on failure.
B=${DPMEM_BUILD:-build}
S=tools/run_experiments
[ -x "$B/train_vanilla" ] || { echo "FAIL: $B/train_vanilla not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
fail=0
ALL6="vanilla dpsgd ghost flash mixed lora"
CHECKED=$ALL6   # the experiments each run_check runs and checks (the first: the suite's default eight)

# check_exact DIR: every experiment in check.txt is "exact" and its two numbers are those the two
# runs printed ("peak tagged memory: N bytes").
check_exact() {
    d=$1; label=$2
    for e in $CHECKED; do
        line=$(awk -v e="$e" '$1 == e' "$d/check.txt")
        [ -n "$line" ] || { echo "FAIL [$label] $e: no line in check.txt"; fail=1; continue; }
        set -- $line
        pred=$(sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$d/$e.out")
        meas=$(sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$d/$e.measured.out")
        if [ "$5" != exact ] || [ "$2" != "$3" ]; then echo "FAIL [$label] $e: predicted $2, measured $3 ($5)"; fail=1
        elif [ "$2" != "$pred" ] || [ "$3" != "$meas" ]; then echo "FAIL [$label] $e: check.txt says $2/$3, the runs printed $pred/$meas"; fail=1
        elif ! grep -q -- '--device plan' "$d/$e.cmd" || ! grep -q -- '--device cpu' "$d/$e.measured.cmd"; then echo "FAIL [$label] $e: the two runs are not plan and cpu"; fail=1
        else echo "ok   [$label] $e: predicted = measured = $2 bytes"; fi
    done
}

# run_check LABEL ARGS...: the suite with --plan --check --tolerance 0; it must exit 0.
run_check() {
    label=$1; shift
    d=$tmp/$label
    sh "$S" --build "$B" --out "$d" --plan --check --tolerance 0 --device cpu --quiet "$@" $RUN_EXPS >"$tmp/$label.stdout" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { echo "FAIL [$label]: the suite exited $rc"; tail -n 20 "$tmp/$label.stdout"; fail=1; }
    check_exact "$d" "$label"
}

RUN_EXPS=""; CHECKED="vanilla dpsgd ghost ghost+bk flash flash+twopass mixed lora"   # the default: every combination it has
run_check tiny-T32 --model tiny --seq-len 32 --batch-size 4 --physical-batch 2 --steps 1
RUN_EXPS=$ALL6; CHECKED=$ALL6
run_check tiny-T100-GQA --model tiny --seq-len 100 --kv-heads 2 --batch-size 6 --physical-batch 3 --steps 1 --lora-rank 3
# the levers: every precision x checkpointing, every method
run_check tiny-T32-bf16 --model tiny --seq-len 32 --batch-size 4 --physical-batch 2 --steps 1 --precision bf16
run_check tiny-T32-ckpt --model tiny --seq-len 32 --batch-size 4 --physical-batch 2 --steps 1 --checkpoint-activations
run_check tiny-T100-GQA-bf16-ckpt --model tiny --seq-len 100 --kv-heads 2 --batch-size 6 --physical-batch 3 --steps 1 --lora-rank 3 \
    --precision bf16 --checkpoint-activations
# tied embeddings (full DP on lm_head = embed_tokens: the cross term's u and gather buffers), plain and with both levers
run_check tiny-T32-tied --model tiny --seq-len 32 --batch-size 4 --physical-batch 2 --steps 1 --tie-embeddings
run_check tiny-T48-GQA-tied-bf16-ckpt --model tiny --seq-len 48 --kv-heads 2 --batch-size 4 --physical-batch 2 --steps 1 \
    --tie-embeddings --precision bf16 --checkpoint-activations
for l in tiny-T32-tied tiny-T48-GQA-tied-bf16-ckpt; do
    for e in $ALL6; do
        grep -q -- '--tie-embeddings' "$tmp/$l/$e.cmd" && grep -q -- '--tie-embeddings' "$tmp/$l/$e.measured.cmd" ||
            { echo "FAIL [$l] $e: --tie-embeddings not on both command lines"; fail=1; }
    done
done
for l in tiny-T32-bf16 tiny-T32-ckpt tiny-T100-GQA-bf16-ckpt; do   # the flags reached both runs of every method
    for e in $ALL6; do
        case $l in *bf16*) grep -q -- '--precision bf16' "$tmp/$l/$e.cmd" && grep -q -- '--precision bf16' "$tmp/$l/$e.measured.cmd" ||
            { echo "FAIL [$l] $e: --precision bf16 not on both command lines"; fail=1; } ;; esac
        case $l in *ckpt*) grep -q -- '--checkpoint-activations' "$tmp/$l/$e.cmd" && grep -q -- '--checkpoint-activations' "$tmp/$l/$e.measured.cmd" ||
            { echo "FAIL [$l] $e: --checkpoint-activations not on both command lines"; fail=1; } ;; esac
    done
done
case $B in
    */san | */san/*) echo "note: small skipped in the sanitizer build (too slow under ASan); tiny covered every method" ;;
    *) run_check small --model small --layers 1 --vocab 8000 --seq-len 8 --batch-size 2 --physical-batch 2 --steps 1 ;;
esac

# A mismatch must be caught: the plan for the CUDA backend (other workspace sizes) against a CPU run
# is OFF at tolerance 0, and the suite exits 1.
d=$tmp/mismatch
sh "$S" --build "$B" --out "$d" --plan --check --plan-for cuda --device cpu --tolerance 0 --quiet \
    --model tiny --seq-len 32 --steps 1 vanilla >"$tmp/mismatch.stdout" 2>&1
rc=$?
if [ $rc -eq 1 ] && awk '$1 == "vanilla" && $5 == "OFF" { ok = 1 } END { exit !ok }' "$d/check.txt"; then
    echo "ok   [mismatch] plan for cuda vs cpu run: $(awk '$1 == "vanilla"' "$d/check.txt"), exit 1"
else echo "FAIL [mismatch]: exit $rc, check.txt:"; cat "$d/check.txt"; fail=1; fi

# --plan alone at a size no CPU here could run.
d=$tmp/plan3b
start=$(date +%s)
sh "$S" --build "$B" --out "$d" --plan --model 3b --seq-len 16384 --batch-size 4 --physical-batch 4 --steps 1 --quiet >"$tmp/3b.stdout" 2>&1
rc=$?; secs=$(( $(date +%s) - start ))
if [ $rc -ne 0 ]; then echo "FAIL [3b plan]: exit $rc"; tail -n 20 "$tmp/3b.stdout"; fail=1
else
    for e in $ALL6; do
        nparams=$(sed -n 's/.* \([0-9][0-9]*\) parameters,.*/\1/p' "$d/vanilla.out")
        params=$(awk -F, -v e="$e" 'NR == 1 { for (c = 1; c <= NF; c++) ix[$c] = c; next } $ix["experiment"] == e { print $ix["at_peak.params"] }' "$d/results.csv")
        peak=$(awk -F, -v e="$e" 'NR == 1 { for (c = 1; c <= NF; c++) ix[$c] = c; next } $ix["experiment"] == e { print $ix["peak_bytes"] }' "$d/results.csv")
        want=$((nparams * 4))
        if [ -z "$params" ] || [ "$params" != "$want" ] || [ "$peak" -lt $((100 * 1024 * 1024 * 1024)) ]; then
            echo "FAIL [3b plan] $e: params at peak '$params' (want $want = 4 x $nparams), peak '$peak'"; fail=1
        else echo "ok   [3b plan] $e: peak $peak bytes, params at the peak $params"; fi
    done
    echo "     (3b at T=16384, the default experiments planned in ${secs}s)"
fi

# summary.txt's command is the run's, every setting spelled out: a run configured by EXP_* variables
# and the embedded defaults, started through another folder's path, gives a command that, run again
# without those variables (another --out), plans the same peaks.
r1=$tmp/cmd1; r2=$tmp/cmd2
EXP_SEQ_LEN=32 EXP_BATCH_SIZE=2 EXP_STEPS=1 sh samples/../$S --build "$B" vanilla lora --plan --out "$r1" --quiet -- --seed 3 >/dev/null 2>&1 \
    || { echo "FAIL: the plan for the command check failed"; fail=1; }
cmd1=$(sed -n 's/^command: //p' "$r1/summary.txt")
case $cmd1 in
    "sh $S --build $B --out $r1 --model tiny --dim 128 --ffn 384 --vocab 2000 --plan --device "*" --seq-len 32 --batch-size 2 --physical-batch 2 --steps 1 --warmup 0 --lora-rank 8 --quiet vanilla lora -- --seed 3") ;;
    *) echo "FAIL: summary.txt's command lacks the run's settings: '$cmd1'"; fail=1 ;;
esac
grep -q "^invoked as: samples/../$S --build $B vanilla lora --plan --out $r1 --quiet -- --seed 3\$" "$r1/summary.txt" \
    || { echo "FAIL: summary.txt does not say how the suite was invoked"; fail=1; }
cmd2=$(printf '%s\n' "$cmd1" | sed "s| --out $r1 | --out $r2 |")
env -u EXP_SEQ_LEN -u EXP_BATCH_SIZE -u EXP_STEPS sh -c "$cmd2" >/dev/null 2>&1 || { echo "FAIL: the recorded command does not run: $cmd2"; fail=1; }
peaks() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "peak_bytes") c = i; next } { print $1, $c }' "$1/results.csv"; }
[ -n "$(peaks "$r1")" ] && [ "$(peaks "$r1")" = "$(peaks "$r2")" ] \
    || { echo "FAIL: the recorded command plans other peaks: $(peaks "$r1" | tr '\n' ' ') vs $(peaks "$r2" | tr '\n' ' ')"; fail=1; }
[ "$(sed -n 's/^command: //p' "$r2/summary.txt")" = "$cmd2" ] || { echo "FAIL: the rerun records another command"; fail=1; }
[ $fail -eq 0 ] && echo "ok   summary.txt's command reproduces the run (settings from EXP_* and defaults spelled out)"

[ $fail -eq 0 ] && echo "planner checks passed"
exit $fail
