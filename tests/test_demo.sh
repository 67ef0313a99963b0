#!/bin/sh
# test_demo.sh — `make demo` (sh samples/demo.sh BUILD, which is what the demo rule runs) on a small
# configuration (a few seconds of training) and its outputs: every file exists; each PNG decodes, is
# large, has ink and colours, and breakdown.png shows a bar of every category that holds >= 2% of
# some run's peak; summary.txt, results.csv and results.json carry the same peak, ratio and epsilon
# for every experiment, and those equal what the trainer itself printed; every DP run has epsilon
# at delta (and vanilla none); the JSON parses. Exits 0 on pass, 1 on failure.
B=${DPMEM_BUILD:-build}
PNGSTAT=$B/tests/test_suite_pngstat
[ -x "$B/train_vanilla" ] && [ -x "$PNGSTAT" ] || { echo "FAIL: $B/train_vanilla or $PNGSTAT not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
EXPS="vanilla dpsgd ghost ghost+bk flash flash+twopass mixed lora"

d=$tmp/results
EXP_OUT=$d EXP_MODEL=tiny EXP_SEQ_LEN=64 EXP_BATCH_SIZE=4 EXP_PHYSICAL_BATCH=2 EXP_STEPS=2 \
    sh samples/demo.sh "$B" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ $rc -eq 0 ] || { bad "the demo exited $rc"; tail -n 20 "$tmp/stdout" "$tmp/stderr"; exit 1; }
grep -q "^results: $d/" "$tmp/stdout" || bad "the demo does not print where the results are"
grep -q "^experiment .*peak bytes" "$tmp/stdout" || bad "the demo does not print the summary table"
[ ! -s "$tmp/stderr" ] || { bad "the demo wrote to stderr:"; cat "$tmp/stderr"; }

# ---- the files ----
for f in summary.txt results.csv results.json breakdown.png timeline.png tradeoff.png; do
    [ -s "$d/$f" ] || bad "$f missing or empty"
done
for e in $EXPS; do
    for x in log out cmd; do [ -s "$d/$e.$x" ] || bad "$e.$x missing or empty"; done
done

# ---- the pictures ----
col() {   # col FILE EXPERIMENT COLUMN: a column of results.csv
    awk -F, -v e="$2" -v c="$3" 'NR == 1 { for (i = 1; i <= NF; i++) ix[$i] = i; next } $ix["experiment"] == e { print (c in ix) ? $ix[c] : "" }' "$1"
}
for png in breakdown timeline tradeoff; do
    "$PNGSTAT" "$d/$png.png" >"$tmp/$png.stat" || { bad "$png.png does not decode"; continue; }
    set -- $(sed -n 's/^size //p' "$tmp/$png.stat"); w=$1; h=$2
    ink=$(sed -n 's/^ink //p' "$tmp/$png.stat"); colours=$(sed -n 's/^colours //p' "$tmp/$png.stat")
    if [ "$w" -lt 600 ] || [ "$h" -lt 300 ] || [ "$colours" -lt 8 ] || ! awk -v i="$ink" 'BEGIN { exit !(i >= 1 && i <= 90) }'; then
        bad "$png.png looks trivial: ${w}x$h, $colours colours, $ink% ink"
    else echo "ok   $png.png: ${w}x$h, $colours colours, $ink% ink"; fi
done
# every category holding >= 2% of some run's peak has a bar (pixels beyond its legend swatch)
cats=$(head -n 1 "$d/results.csv" | tr ',' '\n' | sed -n 's/^at_peak\.//p')
big=""
for c in $cats; do
    for e in $EXPS; do
        v=$(col "$d/results.csv" $e "at_peak.$c"); p=$(col "$d/results.csv" $e peak_bytes)
        if [ -n "$v" ] && awk -v v="$v" -v p="$p" 'BEGIN { exit !(v >= 0.02 * p) }'; then big="$big $c"; break; fi
    done
done
"$PNGSTAT" "$d/breakdown.png" $big >"$tmp/cats.stat"
for c in $big; do
    n=$(awk -v c="$c" '$1 == "category" && $2 == c { print $3 }' "$tmp/cats.stat")
    if [ "${n:-0}" -lt 400 ]; then bad "breakdown.png: category $c (>= 2% of a peak) has ${n:-0} pixels of its colour"
    else echo "ok   breakdown.png: $c has a bar ($n pixels)"; fi
done
case " $big " in *" per_sample_grads "* | *" bk "* | *" ghost "*) ;; *) bad "no DP category among the large ones ($big)";; esac

# ---- summary.txt = results.csv = results.json = what each trainer printed ----
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert isinstance(d, list) and len(d) == 8' "$d/results.json" 2>/dev/null \
    || { command -v python3 >/dev/null && bad "results.json does not parse as a list of 8 objects"; }
vpeak=$(col "$d/results.csv" vanilla peak_bytes)
for e in $EXPS; do
    row=$(awk -v e="$e" '$1 == e' "$d/summary.txt" | head -n 1)
    [ -n "$row" ] || { bad "$e: no row in summary.txt"; continue; }
    set -- $row   # experiment status bytes MiB x +MiB ms (q1..q3) x (spread) epsilon delta
    s_status=$2; s_peak=$3; s_ratio=$5; s_ms=$7; s_msq=$8; s_x=$9; s_xs=${10}; s_eps=${11}; s_delta=${12}
    # the times: the median over the timed steps (1 warm-up step left out) and its spread, as in results.csv
    c_ms=$(col "$d/results.csv" $e step_median_ms); c_q=$(col "$d/results.csv" $e step_q1_ms)..$(col "$d/results.csv" $e step_q3_ms)
    c_x=$(col "$d/results.csv" $e step_vs_baseline); c_xs=$(col "$d/results.csv" $e step_vs_baseline_lo)..$(col "$d/results.csv" $e step_vs_baseline_hi)
    want=$(awk -v m="$c_ms" -v q="$c_q" -v x="$c_x" -v xs="$c_xs" 'BEGIN { split(q, a, /\.\./); split(xs, b, /\.\./);
        printf "%.1f %.1f..%.1f %.2f %.2f..%.2f", m, a[1], a[2], x, b[1], b[2] }')
    [ "$s_ms $s_msq $s_x $s_xs" = "$want" ] && [ "$(col "$d/results.csv" $e warmup_steps)" = 1 ] && [ "$(col "$d/results.csv" $e timed_steps)" = 1 ] \
        || bad "$e: summary times '$s_ms $s_msq $s_x $s_xs', results.csv '$want' (warm-up $(col "$d/results.csv" $e warmup_steps), timed $(col "$d/results.csv" $e timed_steps))"
    c_peak=$(col "$d/results.csv" $e peak_bytes); c_eps=$(col "$d/results.csv" $e epsilon); c_delta=$(col "$d/results.csv" $e delta)
    jline=$(grep "\"experiment\": \"$e\"" "$d/results.json")
    j_peak=$(printf '%s' "$jline" | sed -n 's/.*"peak_bytes": \([0-9]*\).*/\1/p')
    j_eps=$(printf '%s' "$jline" | sed -n 's/.*"epsilon": \([^,]*\),.*/\1/p')
    o_peak=$(sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$d/$e.out")
    o_eps=$(sed -n 's/^DP-SGD: epsilon = \([^ ]*\) at delta = .*/\1/p' "$d/$e.out")
    want_ratio=$(awk -v p="$o_peak" -v b="$vpeak" 'BEGIN { printf "%.3f", p / b }')
    [ "$s_status" = ok ] || bad "$e: status $s_status"
    [ "$s_peak" = "$o_peak" ] && [ "$c_peak" = "$o_peak" ] && [ "$j_peak" = "$o_peak" ] \
        || bad "$e: peak bytes differ: summary $s_peak, csv $c_peak, json $j_peak, trainer $o_peak"
    [ "$s_ratio" = "$want_ratio" ] || bad "$e: x vanilla $s_ratio, want $want_ratio"
    if [ "$e" = vanilla ]; then
        [ "$s_eps" = - ] && [ -z "$c_eps" ] && [ "$j_eps" = null ] || bad "vanilla has an epsilon: $s_eps/$c_eps/$j_eps"
    elif [ -z "$o_eps" ] || [ "$s_eps" != "$o_eps" ] || [ "$c_eps" != "$o_eps" ] || [ "$j_eps" != "$o_eps" ] || [ "$s_delta" != "$c_delta" ] \
         || ! awk -v x="$o_eps" 'BEGIN { exit !(x > 0) }'; then
        bad "$e: epsilon differs or is missing: summary $s_eps, csv $c_eps, json $j_eps, trainer $o_eps"
    else echo "ok   $e: peak $o_peak bytes (x$s_ratio) and epsilon $o_eps at delta $s_delta in summary, csv, json and the trainer's output"; fi
done

[ $fail -eq 0 ] && echo "demo checks passed"
exit $fail
