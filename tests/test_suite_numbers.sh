#!/bin/sh
# test_suite_numbers.sh — the suite's numbers a researcher cites:
#   - --repeat N: N processes per experiment, in rounds (every experiment once per round, vanilla once
#     more at the end); the step time is the median of the processes' medians (with min..max) and the
#     ratio the median of the rounds' paired ratios (each over the geometric mean of the vanilla runs
#     before and after it), its spread their quartiles (not the extremes of unpaired steps, which
#     flagged every ratio of a quiet machine: issue 49), recomputed here from runs.csv;
#   - --methods NORM+CLIP,...: any norm x clip, run as asked (the command line and config.method);
#   - a plan has no time: empty time cells in results.csv / results.json, '-' in summary.txt;
#   - a sweep's header says the swept setting is swept, not its unswept default;
#   - --plan --fit SIZE: each experiment's largest physical batch is the one whose plan fits SIZE
#     while the next does not (checked against the trainers' own plans), the same as a plan at every
#     batch gives (ghost, 1..10), found in O(log P) plans (1G: counted), and the savings are the
#     plans' differences; fit.txt's command is the plans' (--plan-for cuda for a device, no --device,
#     no batch flags) and a --physical-batch given is said to be unused; with --ranks 2 --zero 3 the
#     batch is a rank's (the logical batch P x 2), checked against rank 0's plans;
#   - results.csv and results.json carry the DP settings, logical and physical batch.
# Exits 0 on pass, 1 on failure.
B=${DPMEM_BUILD:-build}
S=tools/run_experiments
[ -x "$B/train_vanilla" ] && [ -x "$B/dpmem-report" ] || { echo "FAIL: $B/train_vanilla or dpmem-report not built"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3 to read results.json"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
CFG="--model tiny --seq-len 16 --batch-size 4 --physical-batch 2 --steps 3"

# ---- --repeat and --methods ----------------------------------------------------------------------
d=$tmp/rep
sh "$S" --build "$B" --out "$d" $CFG --repeat 3 --methods vanilla,ghost+bk,flash+twopass >"$tmp/rep.stdout" 2>&1 \
    || { bad "the suite with --repeat 3 failed"; tail -n 20 "$tmp/rep.stdout"; }
order=$(sed -n 's/^\[[0-9]*\/10\] \([^ ]*\) .*/\1/p' "$tmp/rep.stdout" | tr '\n' ' ')
[ "$order" = "vanilla.r1 ghost+bk.r1 flash+twopass.r1 vanilla.r2 ghost+bk.r2 flash+twopass.r2 vanilla.r3 ghost+bk.r3 flash+twopass.r3 vanilla.r4 " ] \
    || bad "--repeat 3: the runs are not in rounds closed by a vanilla run: $order"
grep -q -- "--norm ghost --clip bk" "$d/ghost+bk.r2.cmd" && grep -q -- "--norm flash --clip twopass" "$d/flash+twopass.r3.cmd" \
    || bad "--methods: the combinations are not on the command lines"
python3 - "$d" <<'PY' || bad "--repeat: results.csv / results.json (above)"
import csv, json, statistics, sys
d = sys.argv[1]
runs = {r['file'].rsplit('/', 1)[1]: r for r in csv.DictReader(open(d + '/runs.csv'))}
res = {r['experiment']: r for r in csv.DictReader(open(d + '/results.csv'))}
js = {o['experiment']: o for o in json.load(open(d + '/results.json'))}
bad = 0
assert len(runs) == 10, sorted(runs)
for e in ('vanilla', 'ghost+bk', 'flash+twopass'):
    med = [float(runs['%s.r%d.log' % (e, r)]['step_median_ms']) for r in (1, 2, 3)]
    van = [float(runs['vanilla.r%d.log' % r]['step_median_ms']) for r in (1, 2, 3, 4)]
    # paired: each round's median over the geometric mean of the vanilla runs before and after it
    # (round 3's: the closing vanilla.r4); vanilla's own ratio is 1
    rat = [m / (van[k] if e == 'vanilla' else (van[k] * van[k + 1]) ** 0.5) for k, m in enumerate(med)]
    q1, _, q3 = statistics.quantiles(rat, n=4, method='inclusive')
    r, o = res[e], js[e]
    want = {'repeats': 3, 'step_median_ms': statistics.median(med), 'step_median_ms_repeat_min': min(med),
            'step_median_ms_repeat_max': max(med), 'step_vs_baseline': statistics.median(rat),
            'step_vs_baseline_lo': q1, 'step_vs_baseline_hi': q3, 'step_vs_baseline_pairs': 3}
    for k, w in want.items():
        if abs(float(r[k]) - w) > 1e-5 * max(1, abs(w)) or abs(o[k] - w) > 1e-5 * max(1, abs(w)):
            print('  %s %s: csv %s, json %s, want %s' % (e, k, r[k], o[k], w)); bad = 1
    if [round(x, 6) for x in o['step_median_ms_per_repeat']] != [round(x, 6) for x in med]:
        print('  %s: per-repeat medians %s, runs.csv %s' % (e, o['step_median_ms_per_repeat'], med)); bad = 1
    if e != 'vanilla' and (o['config.method'] != e or o['dp.norm'] != e.split('+')[0] or o['dp.clip'] != e.split('+')[1]):
        print('  %s: config.method %s, dp.norm %s, dp.clip %s' % (e, o['config.method'], o['dp.norm'], o['dp.clip'])); bad = 1
    if (o['batch_logical'], o['batch_physical'], o['warmup_steps'], o['timed_steps']) != (4, 2, 1, 2):
        print('  %s: batches %s/%s, warm-up %s, timed %s' % (e, o['batch_logical'], o['batch_physical'], o['warmup_steps'], o['timed_steps'])); bad = 1
    if e != 'vanilla' and not (o['dp.max_grad_norm'] == 1 and o['dp.noise_multiplier'] == 1 and o['dp.delta'] == 1e-05 and o['dp.poisson'] == 0):
        print('  %s: DP settings missing: %s' % (e, {k: v for k, v in o.items() if k.startswith('dp.')})); bad = 1
print('ok   --repeat 3: medians of medians, the rounds\' paired ratios and their quartiles as recomputed from runs.csv')
sys.exit(bad)
PY
grep -q "^step ms: the median of the 3 processes' medians" "$d/summary.txt" || bad "summary.txt does not say how the times were made"

# ---- a plan has no time --------------------------------------------------------------------------
d=$tmp/plan
sh "$S" --build "$B" --out "$d" $CFG --plan vanilla ghost >"$tmp/plan.stdout" 2>&1 || bad "the plan suite failed"
python3 - "$d" <<'PY' || bad "a plan's results carry a time (above)"
import csv, json, sys
d = sys.argv[1]
for r in csv.DictReader(open(d + '/results.csv')):
    for k in ('step_median_ms', 'step_mean_ms', 'step_vs_baseline', 'span_ms', 'peak_ms', 'scope.forward.total_ms'):
        if r[k] != '': print('  csv', r['experiment'], k, r[k]); sys.exit(1)
for o in json.load(open(d + '/results.json')):
    if o['no_time'] != 1 or o['step_median_ms'] is not None or o['step_ms'] is not None: print('  json', o['experiment']); sys.exit(1)
print('ok   a plan has no time in results.csv / results.json')
PY
grep -q "^experiment .*step ms" "$d/summary.txt" && bad "summary.txt has time columns for a plan: $(grep '^experiment' "$d/summary.txt")"
awk '$1 == "ghost" { exit !(NF == 8) }' "$d/summary.txt" || bad "summary.txt's plan row: $(grep '^ghost' "$d/summary.txt")"
grep -q "(a plan has no time: nothing ran)" "$d/summary.txt" || bad "summary.txt does not say a plan has no time"

# ---- a sweep's header ----------------------------------------------------------------------------
d=$tmp/sweep
sh "$S" --build "$B" --out "$d" $CFG --steps 1 --plan --sweep seq-len=8,16 vanilla >"$tmp/sweep.stdout" 2>&1 || bad "the sweep failed"
grep -q "^  model tiny, seq swept, batch 4 (physical 2)" "$tmp/sweep.stdout" && ! grep -q "seq 16," "$tmp/sweep.stdout" \
    || bad "the sweep's header: $(sed -n 2p "$tmp/sweep.stdout")"

# ---- --plan --fit --------------------------------------------------------------------------------
d=$tmp/fit
sh "$S" --build "$B" --out "$d" --model tiny --seq-len 256 --plan --fit 16M vanilla ghost flash+twopass >"$tmp/fit.stdout" 2>&1 \
    || { bad "--fit failed"; tail -n 5 "$tmp/fit.stdout"; }
limit=$((16 * 1048576))
planpeak() {   # planpeak PROGRAM DP P ARGS...: the trainer's own plan at physical batch P (DP: logical = physical)
    prog=$1; dp=$2; p=$3; shift 3
    "$B/$prog" --device plan --plan-for cpu --model tiny --seq-len 256 --steps 1 --batch-size "$p" \
        $([ "$dp" = 1 ] && echo "--max-physical-batch-size $p") "$@" --quiet | sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p'
}
for row in "vanilla train_vanilla 0" "ghost train_ghost 1" "flash+twopass train_flash 1 --norm flash --clip twopass"; do
    set -- $row; e=$1; prog=$2; dp=$3; shift 3; flags="$*"
    line=$(awk -v e="$e" '$1 == e' "$d/fit.txt")
    [ -n "$line" ] || { bad "--fit: no row for $e"; continue; }
    set -- $line
    m0=$2; m3=$5; pk2=$6; b16=$7
    a=$(planpeak "$prog" "$dp" "$m0" $flags); b=$(planpeak "$prog" "$dp" $((m0 + 1)) $flags)
    if [ "$m0" -ge 1 ] && [ "$a" -le "$limit" ] && [ "$b" -gt "$limit" ]; then echo "ok   --fit $e: fp32 batch $m0 fits ($a bytes), $((m0 + 1)) does not ($b)"
    else bad "--fit $e: max batch $m0, plan there $a, at +1 $b, limit $limit"; fi
    a=$(planpeak "$prog" "$dp" "$m3" $flags --precision bf16 --checkpoint-activations)
    b=$(planpeak "$prog" "$dp" $((m3 + 1)) $flags --precision bf16 --checkpoint-activations)
    [ "$a" -le "$limit" ] && [ "$b" -gt "$limit" ] || bad "--fit $e with both levers: max batch $m3, plan there $a, at +1 $b"
    a=$(planpeak "$prog" "$dp" 2 $flags); c=$(planpeak "$prog" "$dp" 2 $flags --precision bf16)
    want=$(awk -v a="$a" -v c="$c" 'BEGIN { printf "%.2f %.2f", a / 2^20, (a - c) / 2^20 }')
    [ "${pk2%\*} $b16" = "$want" ] && [ "$b16" != 0.00 ] || bad "--fit $e at batch 2: peak and bf16 saving '${pk2%\*} $b16' MiB, the plans say '$want'"
done
grep -q "largest physical batch" "$d/fit.txt" && grep -q "at a physical batch of 2 (MiB)" "$d/fit.txt" || bad "fit.txt's heading"

# ---- --fit --ranks N --zero S: a rank's physical batch P (the logical batch P x N), rank 0's plan ------
# (it once asked for a logical batch of 1 on 2 ranks: every plan skipped, "none" fitting)
dr=$tmp/fit-ranks
sh "$S" --build "$B" --out "$dr" --model tiny --seq-len 256 --plan --fit 16M --ranks 2 --zero 3 vanilla ghost >"$tmp/fit-ranks.stdout" 2>&1 \
    || { bad "--fit --ranks 2 --zero 3 failed"; tail -n 5 "$tmp/fit-ranks.stdout"; }
for row in "vanilla train_vanilla 0" "ghost train_ghost 1"; do
    set -- $row; e=$1; prog=$2; dp=$3
    set -- $(awk -v e="$e" '$1 == e' "$dr/fit.txt")
    m0=${2:-0}
    rp() { "$B/$prog" --device plan --plan-for cpu --model tiny --seq-len 256 --steps 1 --batch-size $((2 * $1)) \
               $([ "$dp" = 1 ] && echo "--max-physical-batch-size $1") --ranks 2 --zero 3 --quiet | sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p'; }
    case $m0 in '' | *[!0-9]*) m0=0 ;; esac
    a=$( [ "$m0" -ge 1 ] && rp "$m0"); b=$(rp $((m0 + 1)))
    if [ "$m0" -ge 1 ] && [ -n "$a" ] && [ "$a" -le "$limit" ] && [ "$b" -gt "$limit" ]; then
        echo "ok   --fit --ranks 2 --zero 3 $e: a rank's batch $m0 fits ($a bytes, rank 0's plan), $((m0 + 1)) does not ($b)"
    else bad "--fit --ranks 2 --zero 3 $e: a rank's batch '$m0', plan there '$a', at +1 '$b', limit $limit"; fi
done
grep -q "a rank's, of 2, ZeRO-3" "$dr/fit.txt" || bad "--fit --ranks 2 --zero 3: fit.txt does not say the batch is a rank's"

# ---- --fit: a batch that memory does not limit is marked and its limit said (issue 49) -----------------
# flash on a token file of 10 rows: the trainer refuses a batch of 11 (more than its dataset) while 6.5
# MiB would hold more; fit.txt marks 10 with '!' under every lever and says the trainer's reason, not
# a memory limit (it showed 10 as the memory-largest batch)
python3 -c "import struct; open('$tmp/tok10.bin', 'wb').write(struct.pack('<256i', *([20240520, 1, 81] + [0] * 253)) + struct.pack('<81H', *[i % 97 for i in range(81)]))"
dd=$tmp/fit-data
sh "$S" --build "$B" --out "$dd" --model tiny --seq-len 8 --plan --fit 6656K flash -- --data "$tmp/tok10.bin" >"$tmp/fit-data.stdout" 2>&1 \
    || { bad "--fit with --data failed"; tail -n 5 "$tmp/fit-data.stdout"; }
if [ "$(awk '$1 == "flash" { print $2, $3, $4, $5 }' "$dd/fit.txt")" = '10! 10! 10! 10!' ] &&
   grep -q "^!: the trainer refuses the next batch (not a memory limit):" "$dd/fit.txt" &&
   grep -q "^  flash: the plan at 11 fails: the dataset has 10 rows (sequences of 9 tokens, one every 8), fewer than the batch 11; at the batch shown its plans peak at [0-9.]* MiB (fp32), [0-9.]* MiB (bf16), [0-9.]* MiB (ckpt), [0-9.]* MiB (both) of 6.50 MiB$" "$dd/fit.txt"
then echo "ok   --fit 6656K flash on 10 rows: 10! under every lever, the trainer's limit said"
else bad "--fit 6656K flash on 10 rows: the limit not marked or not said:"; sed -n '/^experiment/,/^largest/p' "$dd/fit.txt"; fi

# ---- --fit's search: the largest batch a plan at every batch gives, in O(log P) plans ---------------
# Brute force on ghost in 16M (above): a plan at every physical batch 1..10, in fp32 and with both
# levers: the peak never falls as the batch grows (the search's premise) and the largest batch that
# fits is fit.txt's.
set -- $(awk '$1 == "ghost"' "$d/fit.txt")
for lv in "$2 fp32" "$5 both"; do
    set -- $lv; want=$1; prev=0; best=0; mono=ok
    for p in 1 2 3 4 5 6 7 8 9 10; do
        pk=$(planpeak train_ghost 1 $p $([ "$2" = both ] && echo --precision bf16 --checkpoint-activations))
        [ -n "$pk" ] && [ "$pk" -ge "$prev" ] || mono="falls at $p ($prev -> $pk)"
        prev=${pk:-0}
        [ -z "$pk" ] || [ "$pk" -gt "$limit" ] || best=$p
    done
    if [ "$mono" = ok ] && [ "$best" = "$want" ]; then echo "ok   --fit 16M ghost ($2): batch $want, as a plan at every batch 1..10 says"
    else bad "--fit 16M ghost ($2): batch $want, a plan at every batch 1..10 says $best; the peak $mono"; fi
done
# 1G: batches of 48 to several hundred. Each answer fits and the next does not, by the trainer's own
# plan, and the plans run are about 2 log2(P) + 4 per lever set: at most 4 + 2 ceil(log2(P + 1)) each
# (the walk up by one from the affine estimate ran 1,626 plans for 80GB vanilla)
d=$tmp/fit-1G
sh "$S" --build "$B" --out "$d" --model tiny --seq-len 256 --plan --fit 1G ghost >"$tmp/fit-1G.stdout" 2>&1 \
    || { bad "--fit 1G failed"; tail -n 5 "$tmp/fit-1G.stdout"; }
limit=$((1 << 30))
set -- $(awk '$1 == "ghost"' "$d/fit.txt")
budget=0; answers="$2 $3 $4 $5"; i=0
for lv in "" "--precision bf16" "--checkpoint-activations" "--precision bf16 --checkpoint-activations"; do
    i=$((i + 1)); m=$(echo $answers | cut -d' ' -f$i)
    a=$(planpeak train_ghost 1 "$m" $lv); b=$(planpeak train_ghost 1 $((m + 1)) $lv)
    [ -n "$a" ] && [ -n "$b" ] && [ "$m" -ge 2 ] && [ "$a" -le "$limit" ] && [ "$b" -gt "$limit" ] || bad "--fit 1G ghost [$lv]: batch $m plans $a, $((m + 1)) plans $b"
    budget=$(awk -v b="$budget" -v m="$m" 'BEGIN { l = 0; while (2^l < m + 1) l++; print b + 4 + 2 * l }')
done
ran=$(sed -n 's/^\([0-9]*\) plans in all: .*/\1/p' "$d/fit.txt")
if [ -n "$ran" ] && [ "$ran" -le "$budget" ] && [ "$ran" = "$(ls "$d"/fit.*.out | wc -l)" ]; then
    echo "ok   --fit 1G ghost: batches $answers, each checked by plans; $ran plans (at most $budget)"
else bad "--fit 1G ghost: batches $answers in '$ran' plans (fit.txt), $(ls "$d"/fit.*.out | wc -l) .out files, at most $budget wanted"; fi

# ---- --fit's units as written, and the device presets (the capacity the driver reports less a margin)
# S MB is S x 10^6 bytes and S MiB S x 2^20, with S chosen so that batch 3's plan fits S MiB and not
# S MB: each size's largest batch fits its own limit and the next does not, and the MiB one is larger.
# h100-80gb is 81559 MiB less the 1 GiB margin (or --fit-margin), planned for cuda.
S3=$(awk -v b="$(planpeak train_vanilla 0 3)" 'BEGIN { printf "%.2f", int(b / 2^20 * 100 + 1) / 100 }')
for u in "${S3}MB $(awk -v s="$S3" 'BEGIN { printf "%.0f", s * 1e6 }')" "${S3}MiB $(awk -v s="$S3" 'BEGIN { printf "%.0f", s * 2^20 }')"; do
    set -- $u; size=$1; limit=$2
    sh "$S" --build "$B" --out "$tmp/fit-$size" --model tiny --seq-len 256 --plan --fit "$size" vanilla >"$tmp/fit-$size.stdout" 2>&1 \
        || { bad "--fit $size failed"; tail -n 5 "$tmp/fit-$size.stdout"; continue; }
    m0=$(awk '$1 == "vanilla" { print $2 }' "$tmp/fit-$size/fit.txt")
    a=$(planpeak train_vanilla 0 "$m0"); b=$(planpeak train_vanilla 0 $((m0 + 1)))
    if [ "$a" -le "$limit" ] && [ "$b" -gt "$limit" ] && grep -q ": $limit bytes" "$tmp/fit-$size/fit.txt"; then echo "ok   --fit $size: $limit bytes, batch $m0 fits ($a), $((m0 + 1)) does not ($b)"
    else bad "--fit $size: limit $limit, batch $m0 plans $a, $((m0 + 1)) plans $b; $(sed -n 2p "$tmp/fit-$size/fit.txt")"; fi
done
m_mb=$(awk '$1 == "vanilla" { print $2 }' "$tmp/fit-${S3}MB/fit.txt"); m_mib=$(awk '$1 == "vanilla" { print $2 }' "$tmp/fit-${S3}MiB/fit.txt")
[ -n "$m_mb" ] && [ "$m_mb" -lt "$m_mib" ] || bad "--fit ${S3}MB gives batch $m_mb, ${S3}MiB $m_mib: the decimal size must fit less"
for pr in "h100-80gb - 84447068160 1024" "h200 - 149681078272 1024" "a100-40gb 512MiB 42412802048 512" "h100-80gb 0 85520809984 0"; do
    set -- $pr; dev=$1; mg=$2; want=$3; mmib=$4
    # (--physical-batch 1 given: --fit searches the batch itself, and says so)
    sh "$S" --build "$B" --out "$tmp/fit-$dev-$mg" --model tiny --seq-len 16 --physical-batch 1 --plan --fit "$dev" $([ "$mg" = - ] || echo "--fit-margin $mg") vanilla \
        >"$tmp/fit-$dev.stdout" 2>&1 || { bad "--fit $dev failed"; tail -n 5 "$tmp/fit-$dev.stdout"; continue; }
    f=$tmp/fit-$dev-$mg/fit.txt
    # fit.txt's command is the plans' own: for cuda, no --device (nothing runs there), no batch it did not use
    cmd=$(sed -n 's/^command: //p' "$f")
    case " $cmd " in *" --plan-for cuda "*) case " $cmd " in *" --device "* | *" --physical-batch "* | *" --batch-size "*) bad "--fit $dev: fit.txt's command has a device or batch it did not use: $cmd" ;; esac ;;
        *) bad "--fit $dev: fit.txt's command does not say the plans are for cuda: $cmd" ;; esac
    grep -q "^note: --fit searches the physical batch itself .*--physical-batch 1 not used" "$f" || bad "--fit $dev: fit.txt does not say --physical-batch 1 is not used"
    if grep -q ": $want bytes" "$f" && grep -q "plan backend for cuda" "$f" && { [ "$mmib" = 0 ] && grep -q "no margin taken" "$f" || grep -q "less a margin of $mmib MiB" "$f"; }
    then echo "ok   --fit $dev (margin ${mg}): $want bytes for tensors, planned for cuda"
    else bad "--fit $dev (margin $mg): want $want bytes, margin $mmib MiB, cuda: $(sed -n 1,2p "$f")"; fi
done

[ $fail -eq 0 ] && echo "suite numbers: all checks passed"
exit $fail
