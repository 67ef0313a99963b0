#!/bin/sh
# plan_time.sh — the plan's predicted step time against the measured one (make bench; issue 47): each
# configuration planned (--device plan, this machine's CPU profile: kernels/plan/profile.c, measured
# afresh at the start of each round, under the load of that moment) and run (--device cpu), ROUNDS rounds (every
# configuration once a round, so that drift on the machine hits all alike), the measured figure the
# median over the rounds of each run's median step (the warm-up left out), the ratio the median over the rounds of
# predicted / measured in the same round, and predicted over the fastest round. Prints, per configuration,
# predicted, measured (with min..max over the rounds), their ratio, flagged outside [0.8, 1.25]; then
# every pair whose measured steps differ by more than 25 %, and whether the prediction orders it the
# same way. Configurations: the demo's shapes (tiny, 128 wide, T=512, logical batch 8 in physical
# batches of 4) for vanilla, every norm x clip, LoRA and a classifier; then T=64 in one batch of 16,
# T=1024 in batches of 1, bf16 and activation checkpointing at T=256, and 2 MPI ranks (one thread
# each) for vanilla, every norm x clip, LoRA and a classifier. The load of the machine (printed before
# and after) moves the measured times: on a shared machine read the spread, not one figure.
B=${DPMEM_BUILD:-build}
ROUNDS=${ROUNDS:-$([ "${DPMEM_BENCH_QUICK:-}" = 1 ] && echo 2 || echo 3)}
STEPS=${STEPS:-4}
ONLY=${PLAN_TIME_ONLY:-}   # a grep pattern on the configurations' names (e.g. 'demo'): run only those
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
D="--model tiny --dim 128 --ffn 384 --vocab 2000"
DEMO="$D --seq-len 512 --batch-size 8 --max-physical-batch-size 4"
R2="$D --seq-len 256 --batch-size 4 --max-physical-batch-size 2 --threads 1"   # each of 2 ranks: 2 samples a step, one thread
# name | ranks | program | flags (a DP program's logical batch in physical batches; vanilla the same samples by --grad-accum)
cat >"$tmp/configs" <<EOF
demo.vanilla|1|train_vanilla|$D --seq-len 512 --batch-size 4 --grad-accum 2
demo.direct+bk|1|train_dpsgd|$DEMO --norm direct --clip bk
demo.direct+twopass|1|train_dpsgd|$DEMO --norm direct --clip twopass
demo.ghost+bk|1|train_dpsgd|$DEMO --norm ghost --clip bk
demo.ghost+twopass|1|train_dpsgd|$DEMO --norm ghost --clip twopass
demo.flash+bk|1|train_dpsgd|$DEMO --norm flash --clip bk
demo.flash+twopass|1|train_dpsgd|$DEMO --norm flash --clip twopass
demo.mixed+bk|1|train_dpsgd|$DEMO --norm mixed --clip bk
demo.mixed+twopass|1|train_dpsgd|$DEMO --norm mixed --clip twopass
demo.lora|1|train_lora|$DEMO --lora-rank 8
demo.classify|1|train_dpsgd|$DEMO --task classify --num-labels 3 --norm flash --clip bk
T64.B16.flash+bk|1|train_dpsgd|$D --seq-len 64 --batch-size 16 --max-physical-batch-size 16 --norm flash --clip bk
T1024.B2.direct+bk|1|train_dpsgd|$D --seq-len 1024 --batch-size 2 --max-physical-batch-size 1 --norm direct --clip bk
T256.bf16.mixed+bk|1|train_dpsgd|$D --seq-len 256 --batch-size 8 --max-physical-batch-size 8 --precision bf16 --norm mixed --clip bk
T256.ckpt.ghost+twopass|1|train_dpsgd|$D --seq-len 256 --batch-size 8 --max-physical-batch-size 8 --checkpoint-activations --norm ghost --clip twopass
T256.vanilla|1|train_vanilla|$D --seq-len 256 --batch-size 8
ranks2.vanilla|2|train_vanilla|$D --seq-len 256 --batch-size 4 --threads 1
ranks2.direct+bk|2|train_dpsgd|$R2 --norm direct --clip bk
ranks2.direct+twopass|2|train_dpsgd|$R2 --norm direct --clip twopass
ranks2.ghost+bk|2|train_dpsgd|$R2 --norm ghost --clip bk
ranks2.ghost+twopass|2|train_dpsgd|$R2 --norm ghost --clip twopass
ranks2.flash+bk|2|train_dpsgd|$R2 --norm flash --clip bk
ranks2.flash+twopass|2|train_dpsgd|$R2 --norm flash --clip twopass
ranks2.mixed+bk|2|train_dpsgd|$R2 --norm mixed --clip bk
ranks2.mixed+twopass|2|train_dpsgd|$R2 --norm mixed --clip twopass
ranks2.lora|2|train_lora|$R2 --lora-rank 8
ranks2.classify|2|train_dpsgd|$R2 --task classify --num-labels 3 --norm flash --clip bk
EOF
[ -z "$ONLY" ] || { grep -E "^[^|]*($ONLY)" "$tmp/configs" >"$tmp/c2"; mv "$tmp/c2" "$tmp/configs"; }
for p in train_vanilla train_dpsgd train_lora; do
    [ -x "$B/$p" ] || { echo "plan_time: $B/$p is not built (make $B/$p): skipped"; exit 0; }
done
have_mpi=1; command -v mpirun >/dev/null 2>&1 || have_mpi=0
echo "predicted (plan, this machine's CPU profile, measured afresh each round) vs measured step, $STEPS steps a run, $ROUNDS interleaved rounds, medians"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# each round: a fresh profile (measured at its first plan, under the load of that moment), then each
# configuration planned and run in turn
for r in $(seq 1 "$ROUNDS"); do
    mkdir -p "$tmp/prof$r"
    while IFS='|' read -r name np prog flags; do
        [ "$np" -le 1 ] || [ $have_mpi = 1 ] || continue
        rk=""; [ "$np" -le 1 ] || rk="--ranks $np"
        # shellcheck disable=SC2086
        DPMEM_PLAN_PROFILE_DIR="$tmp/prof$r" "$B/$prog" $flags $rk --steps 2 --device plan --plan-for cpu </dev/null >"$tmp/plan.out" 2>&1
        pred=$(sed -n 's/^predicted step: \([0-9.]*\) ms.*/\1/p' "$tmp/plan.out")
        if [ "$np" -gt 1 ]; then set -- mpirun --oversubscribe -np "$np" "$B/$prog"; else set -- "$B/$prog"; fi
        # shellcheck disable=SC2086
        "$@" $flags --steps "$STEPS" --device cpu </dev/null >"$tmp/run.out" 2>&1
        ms=$(sed -n 's/^done: .* median step \([0-9.]*\) ms.*/\1/p' "$tmp/run.out" | head -n 1)
        echo "$name ${pred:-0} ${ms:-0}" >>"$tmp/rows"
    done <"$tmp/configs"
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
[ $have_mpi = 1 ] || echo "(no mpirun: the 2-rank configurations skipped)"
cut -d'|' -f1 "$tmp/configs" >"$tmp/order"
awk 'FNR == NR { order[++n] = $1; next }
     { p[$1] = p[$1] " " $2; m[$1] = m[$1] " " $3; q[$1] = q[$1] " " ($3 > 0 ? $2 / $3 : 0) }
     function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j] < a[j-1]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
                                        lo = a[1]; hi = a[k]; return k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2 }
     END {
        printf "%-26s %12s %12s %19s %8s %15s %12s\n", "configuration", "predicted ms", "measured ms", "min..max", "ratio", "rounds min..max", "vs fastest"
        for (i = 1; i <= n; i++) {
            c = order[i]; if (!(c in m)) continue
            x = med(m[c]); mlo = lo; mhi = hi; meas[c] = x; pred[c] = med(p[c])
            ratio = med(q[c])
            flag = ratio >= 0.8 && ratio <= 1.25 ? "" : "  outside [0.8, 1.25]"
            bad += flag != ""; shown++
            fast = mlo > 0 ? pred[c] / mlo : 0; badf += !(fast >= 0.8 && fast <= 1.25)
            printf "%-26s %12.2f %12.2f %9.1f..%-9.1f %8.3f %7.2f..%-7.2f %12.3f%s\n", c, pred[c], x, mlo, mhi, ratio, lo, hi, fast, flag
        }
        pairs = 0; wrong = 0
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) {
            a = order[i]; b = order[j]
            if (!(a in meas) || !(b in meas) || meas[a] <= 0 || meas[b] <= 0) continue
            hi2 = meas[a] > meas[b] ? meas[a] : meas[b]; lo2 = meas[a] > meas[b] ? meas[b] : meas[a]
            if (hi2 / lo2 <= 1.25) continue
            pairs++
            if ((meas[a] > meas[b]) != (pred[a] > pred[b])) { wrong++; printf "  order wrong: %s (%.1f ms measured, %.1f predicted) vs %s (%.1f, %.1f)\n", a, meas[a], pred[a], b, meas[b], pred[b] }
        }
        printf "ratio: the median over the rounds of predicted / measured in the same round; vs fastest: predicted / the fastest\nround (the profile is what the machine gives uncontended: the fastest of its calls); outside [0.8, 1.25]: %d of %d\n", badf, shown
        printf "ratios outside [0.8, 1.25]: %d of %d; pairs measured > 25 %% apart: %d, ordered wrong by the prediction: %d\n", bad, shown, pairs, wrong
     }' "$tmp/order" "$tmp/rows"
