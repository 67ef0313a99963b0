#!/bin/sh
# bench_overlap.sh — the gradient reduction overlapped with the backward (samples/llama/grad_reduce.c: each
# gradient unit's non-blocking collective started as the backward finishes it, polled at every unit)
# against the serial one (DPMEM_COMM_OVERLAP=0: each collective waited for at once), 2 ranks on this
# machine (make bench): small (T=128, batch 4: 2 a rank), vanilla, --zero 0 (the all-reduce) and --zero 2
# (the reduce-scatter into the slices), one thread a rank. ROUNDS (5; 2 with QUICK=1) interleaved rounds
# (serial, then overlapped, alternating, so drift hits both); per configuration the median over the rounds
# of each run's median step time (its phase table's step row, the warm-up left out) and of its allreduce
# column (the time the host spends starting, polling and waiting for the collectives; overlapped, what
# the backward did not hide), the spread (the rounds' min..max), and the ratio overlapped / serial of
# the step (< 1: the overlap gains). Prints the machine's load before and after: two ranks on two cores
# leave MPI little to progress in the background, and other work on the machine moves these numbers.
B=${DPMEM_BUILD:-build}
ROUNDS=${ROUNDS:-$([ "${DPMEM_BENCH_QUICK:-}" = 1 ] && echo 2 || echo 5)}
STEPS=${STEPS:-6}
command -v mpirun >/dev/null 2>&1 || { echo "bench_overlap: no mpirun (openmpi-bin): skipped"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "gradient reduction overlapped with the backward vs serial: 2 ranks, small T=128 batch 4 (2 a rank), vanilla, 1 thread a rank," \
     "$STEPS steps, $ROUNDS interleaved rounds, medians"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
step() {   # OVERLAP ZERO: one run; prints "step_ms allreduce_ms"
    DPMEM_COMM_OVERLAP=$1 mpirun --oversubscribe -np 2 "$B/train_vanilla" --model small --seq-len 128 --batch-size 4 \
        --steps "$STEPS" --threads 1 --zero "$2" 2>&1 |
        awk '/^time per step \(ms\)/ { on = 1; t = 0; a = 0; next }
             on && $1 == "step" { t = $2 } on && $1 == "allreduce" { a = $2 } on && /^[^ ]/ { on = 0 }
             END { printf "%.3f %.3f\n", t, a }'
}
for r in $(seq 1 "$ROUNDS"); do
    for z in 0 2; do
        for ov in 0 1; do echo "$z $ov $(step $ov $z)" >>"$tmp/t"; done
    done
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-7s %-11s %10s %19s %13s %17s\n' "--zero" reduction "step ms" "spread (min..max)" "allreduce ms" "step vs serial"
for z in 0 2; do
    ts=$(awk -v z=$z '$1==z && $2==0 {print $3}' "$tmp/t" | med)
    for ov in 0 1; do
        t=$(awk -v z=$z -v o=$ov '$1==z && $2==o {print $3}' "$tmp/t" | med)
        lo=$(awk -v z=$z -v o=$ov '$1==z && $2==o {print $3}' "$tmp/t" | sort -g | head -n 1)
        hi=$(awk -v z=$z -v o=$ov '$1==z && $2==o {print $3}' "$tmp/t" | sort -g | tail -n 1)
        a=$(awk -v z=$z -v o=$ov '$1==z && $2==o {print $4}' "$tmp/t" | med)
        awk -v z=$z -v o=$ov -v t="$t" -v lo="$lo" -v hi="$hi" -v a="$a" -v ts="$ts" 'BEGIN {
            printf "%-7s %-11s %10.2f %8.2f..%-10.2f %13.2f %17.3f\n", z, (o ? "overlapped" : "serial"), t, lo, hi, a, (ts > 0 ? t / ts : 0) }'
    done
done
