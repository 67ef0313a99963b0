#!/bin/sh
# test_demo.sh — `make demo` (sh samples/demo.sh BUILD, which is what the demo rule runs) on a small
# configuration (a few seconds of training, in 2 rounds: the demo's own default is 5) and its outputs:
# every file exists; each PNG decodes, is large, has ink and colours, and breakdown.png shows a bar of
# every category that holds >= 2% of some run's peak; summary.txt, results.csv and results.json carry
# the same peak, ratio and epsilon for every experiment, and those equal what the trainer itself
# printed; every DP run has epsilon at delta (and vanilla none); the JSON parses. The times: the
# median of the rounds' medians with their min..max, each ratio the median of the rounds' paired
# ratios (over the geometric mean of the vanilla runs before and after the round, the last one closing
# the rounds) with their quartiles as its spread (recomputed here from runs.csv), and its verdict
# (time ratio) recomputed from them: DP<vanilla for a DP method (not lora) below 1, spread>B% when q3
# over q1 exceeds 1 + B/100;
# tradeoff.png rings exactly the flagged points, its labels cover no spread bar,
# and its subtitle says the rounds. summary.txt's command is the run's, with every setting.
# EXP_TRUST_SPREAD=0 flags every spread. Exits 0 on pass, 1 on failure.
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
grep -q '^EXP_REPEAT=${EXP_REPEAT:-5}$' samples/demo.sh || bad "samples/demo.sh does not run 5 rounds by default"
DPMEM_LAYOUT=$tmp/layout.txt EXP_REPEAT=2 EXP_OUT=$d EXP_MODEL=tiny EXP_SEQ_LEN=64 EXP_BATCH_SIZE=4 EXP_PHYSICAL_BATCH=2 EXP_STEPS=2 \
    sh samples/demo.sh "$B" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ $rc -eq 0 ] || { bad "the demo exited $rc"; tail -n 20 "$tmp/stdout" "$tmp/stderr"; exit 1; }
grep -q "^results: $d/" "$tmp/stdout" || bad "the demo does not print where the results are"
grep -q "^experiment .*peak bytes" "$tmp/stdout" || bad "the demo does not print the summary table"
[ ! -s "$tmp/stderr" ] || { bad "the demo wrote to stderr:"; cat "$tmp/stderr"; }

# ---- summary.txt says the command that ran, with every setting (here given as EXP_* variables) ----
cmdl=$(sed -n 's/^command: //p' "$d/summary.txt" | sed 's/ --device cuda / --device cpu /')   # cuda where the suite runs there
case $cmdl in
    "sh tools/run_experiments --build $B --out $d --model tiny --device cpu --seq-len 64 --batch-size 4 --physical-batch 2 --steps 2 --warmup 0 --timing-warmup 1 --repeat 2 --trust-spread 25 --lora-rank 8 $EXPS") ;;
    *) bad "summary.txt's command is not the run's, settings included: '$cmdl'" ;;
esac
grep -q "^invoked as: samples/../tools/run_experiments --build $B\$" "$d/summary.txt" || bad "summary.txt does not say how the suite was invoked"

# ---- the files ----
for f in summary.txt results.csv results.json breakdown.png timeline.png tradeoff.png; do
    [ -s "$d/$f" ] || bad "$f missing or empty"
done
for e in $EXPS; do
    for x in log out cmd; do for r in 1 2; do [ -s "$d/$e.r$r.$x" ] || bad "$e.r$r.$x missing or empty"; done; done
done

# ---- the pictures ----
col() {   # col FILE EXPERIMENT COLUMN: a column of results.csv (quoted fields hold commas: python's csv reads it)
    python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["experiment"] == sys.argv[2]: print(r.get(sys.argv[3], ""))' "$1" "$2" "$3"
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
    set -- $row   # experiment status bytes MiB x +MiB ms (min..max) x (spread) epsilon delta time-ratio
    s_status=$2; s_peak=$3; s_ratio=$5; s_ms=$7; s_msq=$8; s_x=$9; s_xs=${10}; s_eps=${11}; s_delta=${12}; s_trust=${13}
    # the times, from runs.csv (one row per process): the median of the 2 rounds' medians, their
    # min..max, the median of the rounds' paired ratios to vanilla's, their quartiles, the verdict
    want=$(python3 -c 'import csv, re, sys
e, B = sys.argv[2], 25
m, st = {}, {}
for r in csv.DictReader(open(sys.argv[1])):
    x, k = re.match(r"(.*)\.r([0-9]+)\.log$", r["file"].split("/")[-1]).groups()
    m[x, k] = float(r["step_median_ms"])
    st[x, k] = [float(v) for v in r["step_ms"].split()][int(r["warmup_steps"]):]
a, b = m[e, "1"], m[e, "2"]
v1, v2, v3 = m["vanilla", "1"], m["vanilla", "2"], m["vanilla", "3"]   # (3: the closing run)
ra, rb = (1, 1) if e == "vanilla" else (a / (v1 * v2) ** 0.5, b / (v2 * v3) ** 0.5)
lo, hi = min(ra, rb) + 0.25 * abs(ra - rb), min(ra, rb) + 0.75 * abs(ra - rb)   # the quartiles of the two
t = "-"
if e != "vanilla":
    t = ",".join(([] if e.startswith("lora") or (ra + rb) / 2 >= 1 else ["DP<vanilla"]) + (["spread>%d%%" % B] if hi / lo > 1 + B / 100 else [])) or "ok"
print("%.1f %.1f..%.1f %.2f %.2f..%.2f %s" % ((a + b) / 2, min(a, b), max(a, b), (ra + rb) / 2, lo, hi, t))' "$d/runs.csv" "$e")
    [ "$s_ms $s_msq $s_x $s_xs $s_trust" = "$want" ] && [ "$(col "$d/results.csv" $e repeats)" = 2 ] \
        || bad "$e: summary times '$s_ms $s_msq $s_x $s_xs $s_trust', from runs.csv '$want' (repeats $(col "$d/results.csv" $e repeats))"
    c_t=$(col "$d/results.csv" $e step_vs_baseline_trust)
    [ "$(echo "$c_t" | sed 's/below_vanilla/DP<vanilla/; s/spread_wide/spread>25%/; s/;/,/')" = "$(echo "$s_trust" | sed 's/^-$//')" ] \
        || bad "$e: results.csv's verdict '$c_t', summary.txt's '$s_trust'"
    c_peak=$(col "$d/results.csv" $e peak_bytes); c_eps=$(col "$d/results.csv" $e epsilon); c_delta=$(col "$d/results.csv" $e delta)
    jline=$(grep "\"experiment\": \"$e\"" "$d/results.json")
    j_peak=$(printf '%s' "$jline" | sed -n 's/.*"peak_bytes": \([0-9]*\).*/\1/p')
    j_eps=$(printf '%s' "$jline" | sed -n 's/.*"epsilon": \([^,]*\),.*/\1/p')
    o_peak=$(sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$d/$e.r1.out")
    o_eps=$(sed -n 's/^DP-SGD: epsilon = \([^ ]*\) at delta = .*/\1/p' "$d/$e.r1.out")
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

# ---- the tradeoff chart: rings on exactly the flagged points, no label over a spread bar ----
flagged=$(for e in $EXPS; do case $(col "$d/results.csv" $e step_vs_baseline_trust) in '' | ok) ;; *) echo $e ;; esac; done | sort | tr '\n' ' ')
ringed=$(awk -v png="$d/tradeoff.png" '$1 == "figure" { on = $2 == png } on && $1 == "mark" && $6 == "hollow" && $7 == "untrusted" { print $8 }' "$tmp/layout.txt" | sort | tr '\n' ' ')
[ "$flagged" = "$ringed" ] || bad "tradeoff.png rings '$ringed', results.csv flags '$flagged'"
over=$(awk -v png="$d/tradeoff.png" '$1 == "figure" { on = $2 == png; next } !on { next }
    $1 == "mark" && $6 == "spread" { n++; x0[n] = $2; y0[n] = $3; x1[n] = $4; y1[n] = $5; w[n] = $7; next }
    $1 == "text" { t++; tx0[t] = $2; ty0[t] = $3; tx1[t] = $4; ty1[t] = $5; tw[t] = $6 }
    END { for (i = 1; i <= t; i++) for (j = 1; j <= n; j++) if (tx0[i] < x1[j] && x0[j] < tx1[i] && ty0[i] < y1[j] && y0[j] < ty1[i]) print tw[i] " over " w[j] " spread" }' "$tmp/layout.txt")
[ -z "$over" ] || bad "tradeoff.png: labels over spread bars: $over"
grep -q "text .*step time: the median of 2 rounds' medians; bars: min..max over the rounds" "$tmp/layout.txt" || bad "tradeoff.png's subtitle does not say the 2 rounds"
[ -z "$flagged" ] || grep -q "^WARNING: [0-9]* time ratio(s) above cannot be trusted" "$tmp/stdout" || bad "flagged ratios but no warning on stdout"
echo "ok   time ratios: the rounds' medians and verdicts as recomputed from runs.csv; flagged: ${flagged:-none}; tradeoff.png rings those"

# EXP_TRUST_SPREAD=0: every DP ratio whose step ratios differ is flagged (the bound is the suite's, said in the table)
d0=$tmp/results0
EXP_TRUST_SPREAD=0 EXP_REPEAT=2 EXP_OUT=$d0 EXP_MODEL=tiny EXP_SEQ_LEN=64 EXP_BATCH_SIZE=4 EXP_PHYSICAL_BATCH=2 EXP_STEPS=2 \
    sh samples/demo.sh "$B" vanilla ghost lora >"$tmp/stdout0" 2>&1 || bad "the demo with EXP_TRUST_SPREAD=0 failed"
for e in ghost lora; do
    lohi=$(col "$d0/results.csv" $e step_vs_baseline_lo),$(col "$d0/results.csv" $e step_vs_baseline_hi)
    case $(col "$d0/results.csv" $e step_vs_baseline_trust) in *spread_wide*) ok=1 ;; *) ok=0 ;; esac
    [ "${lohi%,*}" = "${lohi#*,}" ] || [ $ok = 1 ] || bad "EXP_TRUST_SPREAD=0: $e's step ratios $lohi differ but it is not flagged"
done
grep -q "spread>0%" "$d0/summary.txt" && grep -q "wider than a factor 1.00" "$d0/summary.txt" || bad "EXP_TRUST_SPREAD=0: the bound is not said in summary.txt"

[ $fail -eq 0 ] && echo "demo checks passed"
exit $fail
