#!/bin/sh
# test_cuda_ops_train.sh — the tiny model trained on a token file (the README's bytes) for a few hundred
# steps with --device cuda and with --device cpu, same seed and data: the loss curves must agree.
# TF32 is turned off (DPMEM_CUDA_TF32=0) so that both runs are fp32 and differ only by summation
# order and libm ulps (~1e-6 relative per op): the first loss (same weights, same batch, no update yet)
# within 1e-3, the loss after 100 and 300 steps within 0.02 (chaotic growth of those differences
# through AdamW stays far below that on tiny; a wrong gradient in any op moves it by > 0.1).
# Also: a plan for cuda predicts the CUDA run's peak tagged memory exactly; the closing table is GPU
# time (host time, said so, under DPMEM_CUDA_TIMING=0) with an MFU line.
# SKIP (exit 77) without a GPU or without the CUDA backend in the trainer.
B=${DPMEM_BUILD:-build}
T=$B/train_vanilla
[ -x "$T" ] || { echo "FAIL: $T not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export DPMEM_CUDA_TF32=0
if ! "$T" --model tiny --steps 1 --device cuda --quiet >"$tmp/probe" 2>&1; then
    echo "SKIP: --device cuda does not run here ($(head -n1 "$tmp/probe")): CUDA vs CPU loss curves not compared"
    exit 77
fi
data=$(dirname "$0")/../README.md
fail=0
loss() {   # loss DEVICE STEPS -> "first last" from the loss line ("loss: A (step 1) -> B (step N): ...")
    "$T" --model tiny --data "$data" --seed 7 --steps "$2" --device "$1" >"$tmp/out.$1.$2" 2>&1 || { echo "FAIL: --device $1 --steps $2:"; cat "$tmp/out.$1.$2"; exit 1; }
    sed -n 's/^loss: \([0-9.]*\) (step 1) -> \([0-9.]*\) (step [0-9]*).*/\1 \2/p' "$tmp/out.$1.$2"
}
# The sanitizer pass (build/san) runs the CPU side ~5x slower: the 100-step comparison only.
case "$B" in */san) step_counts="100";; *) step_counts="100 300";; esac
for steps in $step_counts; do
    c=$(loss cpu $steps); g=$(loss cuda $steps)
    [ -n "$c" ] && [ -n "$g" ] || { echo "FAIL: no loss line (cpu '$c', cuda '$g')"; exit 1; }
    if awk -v c="$c" -v g="$g" 'BEGIN { split(c, a, " "); split(g, b, " ");
            d0 = a[1] - b[1]; d1 = a[2] - b[2]; if (d0 < 0) d0 = -d0; if (d1 < 0) d1 = -d1;
            exit !(d0 <= 1e-3 && d1 <= 0.02) }'; then
        echo "ok   $steps steps: cpu loss $c, cuda loss $g"
    else
        echo "FAIL $steps steps: cpu loss $c, cuda loss $g (first within 1e-3, last within 0.02 wanted)"; fail=1
    fi
done
# The plan for cuda == the CUDA run (peak tagged bytes, same flags).
"$T" --model tiny --data "$data" --seed 7 --steps 3 --device cuda >"$tmp/run" 2>&1
"$T" --model tiny --data "$data" --seed 7 --steps 3 --device plan --plan-for cuda >"$tmp/plan" 2>&1
pr=$(sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$tmp/run"); pp=$(sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$tmp/plan")
if [ -n "$pr" ] && [ "$pr" = "$pp" ]; then echo "ok   plan for cuda peak == cuda run peak ($pr bytes)"
else echo "FAIL: cuda run peak '$pr' != plan for cuda '$pp'"; fail=1; fi
# The closing table of a --device cuda run is GPU time (the kit's events: train.h TrainGpuTime), its phases
# within the step ("other" = step - phases, not below rounding), with an MFU line (the table's peak, or a
# line saying there is none); DPMEM_CUDA_TIMING=0 gives the host's table, titled so; --peak-tflops is used.
grep -q "^GPU time per step (ms; CUDA events around each scope" "$tmp/run" && grep -q "ms of GPU time (steps 2..3" "$tmp/run" &&
    grep -q "^MFU: " "$tmp/run" && awk '$1 == "other" { o = $2 } END { exit !(o != "" && o >= -0.01) }' "$tmp/run" &&
    echo "ok   the cuda run's table is GPU time: $(grep '^  step ' "$tmp/run"); $(grep '^MFU' "$tmp/run")" ||
    { echo "FAIL: the cuda run's table is not GPU time:"; cat "$tmp/run"; fail=1; }
DPMEM_CUDA_TIMING=0 "$T" --model tiny --data "$data" --seed 7 --steps 3 --device cuda --peak-tflops 100 >"$tmp/host" 2>&1
grep -q "^host time per step (ms; the GPU's is off, DPMEM_CUDA_TIMING=0" "$tmp/host" && ! grep -q "of GPU time" "$tmp/host" &&
    grep -q "^MFU: .* / 100 TFLOP/s (.*; peak: --peak-tflops)" "$tmp/host" && echo "ok   DPMEM_CUDA_TIMING=0: the host's table, said so; --peak-tflops" ||
    { echo "FAIL: DPMEM_CUDA_TIMING=0 or --peak-tflops:"; cat "$tmp/host"; fail=1; }
exit $fail
