#!/bin/sh
# test_suite_sweep.sh — run_experiments --sweep: every experiment at every value, each run with the
# swept flag on its command line; sweep.csv holds exactly the peaks the trainers printed, in value
# order; the peaks move the way the method's memory must (a longer sequence costs more; a larger LoRA
# rank costs more; a smaller physical batch costs less; activation checkpointing costs less); the
# precision sweep (fp32, bf16) and the checkpointing sweep (0, 1) pass their flags; sweep.png (all
# experiments) decodes and is not blank; settings a method lacks are left out of the sweep.
# Exits 0 on pass, 1 on failure.
B=${DPMEM_BUILD:-build}
S=tools/run_experiments
PNGSTAT=$B/tests/test_suite_pngstat
[ -x "$B/train_vanilla" ] && [ -x "$PNGSTAT" ] || { echo "FAIL: $B/train_vanilla or $PNGSTAT not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
peak_of() { sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$1"; }

# sweep LABEL KEY VALUES FLAG ORDER EXPERIMENTS... : runs the sweep, checks the table and the commands.
# ORDER: "up" (peak strictly increasing with the value) or "nondown".
sweep() {
    label=$1; key=$2; vals=$3; flag=$4; order=$5; shift 5
    d=$tmp/$label
    sh "$S" --build "$B" --out "$d" --model tiny --seq-len 32 --batch-size 4 --physical-batch 2 --steps 1 --quiet \
        --sweep "$key=$vals" "$@" >"$tmp/$label.stdout" 2>&1 || { bad "[$label] the suite failed"; tail -n 20 "$tmp/$label.stdout"; return; }
    exps=$(head -n 1 "$d/sweep.csv" | cut -d, -f2- | tr ',' ' ')
    echo "$label: experiments in the sweep: $exps"
    j=1
    for e in $exps; do
        j=$((j + 1)); prev=0
        for v in $(echo "$vals" | tr ',' ' '); do
            run=$d/$e-$key$v
            got=$(awk -F, -v v="$v" -v j=$j '$1 == v { print $j }' "$d/sweep.csv")
            want=$(peak_of "$run.out")
            grep -q -- "$flag $v\\( \\|$\\)" "$run.cmd" || bad "[$label] $e at $v: '$flag $v' not on its command line: $(cat "$run.cmd")"
            [ -n "$want" ] && [ "$got" = "$want" ] || { bad "[$label] $e at $key=$v: sweep.csv has '$got', the trainer printed '$want'"; continue; }
            case $order in
                up) [ "$got" -gt "$prev" ] || bad "[$label] $e: peak $got at $key=$v is not above $prev at the value before" ;;
                nondown) [ "$got" -ge "$prev" ] || bad "[$label] $e: peak $got at $key=$v is below $prev at the value before" ;;
                any) ;;
            esac
            prev=$got
        done
        echo "ok   [$label] $e: $(awk -F, -v j=$j 'NR > 1 { printf "%s:%s ", $1, $j }' "$d/sweep.csv")"
    done
    pngs=$d/sweep.png
    for p in $pngs; do
        if ! "$PNGSTAT" "$p" >"$tmp/stat" 2>&1; then bad "[$label] $(basename "$p") missing or does not decode"; continue; fi
        ink=$(sed -n 's/^ink //p' "$tmp/stat")
        awk -v i="$ink" 'BEGIN { exit !(i > 1) }' || bad "[$label] $(basename "$p") is blank ($ink% ink)"
    done
    echo "ok   [$label] pictures:$(for p in $pngs; do printf ' %s' "$(basename "$p")"; done)"
}

sweep seq seq-len 16,32,64 --seq-len up vanilla ghost
sweep rank lora-rank 2,8,32 --lora-rank up                  # all six asked: only lora has a rank
[ "$(head -n 1 "$tmp/rank/sweep.csv")" = "lora-rank,lora" ] || bad "[rank] the sweep is not of lora alone: $(head -n 1 "$tmp/rank/sweep.csv")"
sweep phys physical-batch 1,2,4 --max-physical-batch-size nondown vanilla dpsgd ghost
grep -q "vanilla has no physical batch" "$tmp/phys.stdout" || bad "[phys] vanilla left out without a word"
[ ! -e "$tmp/phys/vanilla-physical-batch1.log" ] || bad "[phys] vanilla ran in a physical-batch sweep"
sweep batch batch-size 2,4 --batch-size up vanilla flash
sweep prec precision fp32,bf16 --precision any vanilla ghost flash lora

# the checkpointing sweep: the flag on the checkpointed runs only, and it never costs memory here
d=$tmp/ckpt
if sh "$S" --build "$B" --out "$d" --model tiny --seq-len 64 --batch-size 4 --physical-batch 2 --steps 1 --quiet \
       --sweep checkpoint=0,1 vanilla dpsgd ghost flash mixed lora >"$tmp/ckpt.stdout" 2>&1; then
    for e in vanilla dpsgd ghost flash mixed lora; do
        p0=$(peak_of "$d/$e-checkpoint0.out"); p1=$(peak_of "$d/$e-checkpoint1.out")
        ! grep -q -- --checkpoint-activations "$d/$e-checkpoint0.cmd" && grep -q -- --checkpoint-activations "$d/$e-checkpoint1.cmd" ||
            bad "[ckpt] $e: --checkpoint-activations must be on the checkpoint1 run only"
        [ -n "$p0" ] && [ -n "$p1" ] && [ "$p1" -lt "$p0" ] || bad "[ckpt] $e: checkpointed peak '$p1' not below '$p0'"
        row=$(awk -F, -v e="$e" 'NR == 1 { for (c = 1; c <= NF; c++) if ($c == e) j = c; next } { printf "%s ", $j }' "$d/sweep.csv")
        [ "$row" = "$p0 $p1 " ] || bad "[ckpt] $e: sweep.csv has '$row', the trainers printed '$p0 $p1'"
    done
    "$PNGSTAT" "$d/sweep.png" >/dev/null 2>&1 || bad "[ckpt] sweep.png missing or does not decode"
    echo "ok   [ckpt] every method's checkpointed peak below its plain one; sweep.csv = the trainers' peaks"
else bad "[ckpt] the suite failed"; tail -n 20 "$tmp/ckpt.stdout"; fi

# A sweep of many runs (make demo-picture plans 8 methods at 5 lengths: 40 bars) gets every chart at the
# default size: the breakdown grows to what its runs need (it refused at 1800x700 for 40 runs, and
# make demo-picture failed); an asked --size still refuses, naming the least that fits.
if sh "$S" --build "$B" --out "$tmp/many" --model tiny --seq-len 16 --batch-size 4 --physical-batch 4 --steps 1 --quiet \
       --plan --sweep seq-len=16,32,64,128,256 vanilla dpsgd ghost ghost+bk flash flash+twopass mixed lora >"$tmp/many.stdout" 2>&1 \
   && [ -s "$tmp/many/breakdown.png" ]; then
    hw=$("$PNGSTAT" "$tmp/many/breakdown.png" 2>/dev/null | head -n 1)
    echo "ok   [many] 40 runs: breakdown.png written at the default size ($hw)"
else bad "[many] 40 runs: no breakdown at the default size"; tail -n 5 "$tmp/many.stdout"; fi
"$B/dpmem-charts" "$tmp/many" -o "$tmp/many" --only breakdown --size 1800x700 >"$tmp/many.ask" 2>&1 \
    && bad "[many] 40 runs at an asked 1800x700: drawn, not refused" \
    || { grep -q "at least 1800x[0-9]* px" "$tmp/many.ask" && echo "ok   [many] an asked size too small is refused, naming the least" \
         || { bad "[many] the refusal does not name the least size:"; cat "$tmp/many.ask"; }; }

[ $fail -eq 0 ] && echo "sweep checks passed"
exit $fail
