#!/bin/sh
# bench_ranks.sh — weak scaling of data parallelism on this machine (make bench): each rank keeps the
# same share of the batch, so 2 ranks do twice the work of 1 in what should be the same step time.
# For tiny (T=256) and small (T=128), vanilla and flash+bk: 1 process with batch 2 against
# `mpirun -np 2` with batch 4 (2 a rank), one thread a rank, ROUNDS (5; 2 with QUICK=1) interleaved rounds (1 rank, then
# 2, alternating, so drift hits both), the medians over the rounds of each run's median step time (its
# phase table's step row, the warm-up left out), the all-reduce's, its share of the 2-rank step, and the weak-scaling
# efficiency t(1 rank) / t(2 ranks) (1.00: perfect). Prints the machine's load before and after:
# on a shared 2-core machine other work changes these numbers.
B=${DPMEM_BUILD:-build}
ROUNDS=${ROUNDS:-$([ "${DPMEM_BENCH_QUICK:-}" = 1 ] && echo 2 || echo 5)}   # make bench QUICK=1: 2
STEPS=${STEPS:-6}
command -v mpirun >/dev/null 2>&1 || { echo "bench_ranks: no mpirun (openmpi-bin): skipped"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "weak scaling over MPI: 1 rank (batch 2) vs 2 ranks (batch 4, 2 a rank), 1 thread a rank, $STEPS steps, $ROUNDS interleaved rounds, medians"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# step NP PROG ARGS: one run; prints "step_ms allreduce_ms", the medians of its per-phase table (over
# its timed steps, the warm-up left out)
step() {
    np=$1; shift
    if [ "$np" -gt 1 ]; then mpirun --oversubscribe -np "$np" "$@" 2>&1; else "$@" 2>&1; fi |
        awk '/^time per step \(ms\)/ { on = 1; t = 0; a = 0; next }
             on && $1 == "step" { t = $2 } on && $1 == "allreduce" { a = $2 } on && /^[^ ]/ { on = 0 }
             END { printf "%.3f %.3f\n", t, a }'
}
for r in $(seq 1 "$ROUNDS"); do
    for cfg in "tiny 256" "small 128"; do
        set -- $cfg; model=$1; T=$2
        for m in vanilla flash; do
            prog=$B/train_flash; [ $m = vanilla ] && prog=$B/train_vanilla
            echo "$model $m 1 $(step 1 "$prog" --model "$model" --seq-len "$T" --batch-size 2 --steps "$STEPS" --threads 1)" >>"$tmp/t"
            echo "$model $m 2 $(step 2 "$prog" --model "$model" --seq-len "$T" --batch-size 4 --steps "$STEPS" --threads 1)" >>"$tmp/t"
        done
    done
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-8s %12s %12s %14s %10s %11s\n' model method "1 rank ms" "2 ranks ms" "allreduce ms" "its share" efficiency
for cfg in tiny small; do for m in vanilla flash; do
    t1=$(awk -v c=$cfg -v m=$m '$1==c && $2==m && $3==1 {print $4}' "$tmp/t" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    t2=$(awk -v c=$cfg -v m=$m '$1==c && $2==m && $3==2 {print $4}' "$tmp/t" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    a2=$(awk -v c=$cfg -v m=$m '$1==c && $2==m && $3==2 {print $5}' "$tmp/t" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    awk -v c=$cfg -v m=$m -v t1="$t1" -v t2="$t2" -v a2="$a2" 'BEGIN {
        printf "%-6s %-8s %12.2f %12.2f %14.2f %9.0f%% %11.2f\n", c, m, t1, t2, a2, (t2 > 0 ? 100 * a2 / t2 : 0), (t2 > 0 ? t1 / t2 : 0) }'
done; done
