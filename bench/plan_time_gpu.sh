#!/bin/sh
# plan_time_gpu.sh — the plan's predicted GPU step times against the steps measured on H100 and H200
# (docs/CUDA_RESULTS_2026-11-26.md and _27.md), without a GPU: each recorded row planned for cuda on
# the device's profile (kernels/plan/profile.c) and the ratio printed, flagged outside [0.8, 1.25].
# "fit" rows are those GPU_EFF in profile.c was fitted on; "check" rows were not used to fit.
# The 11-26 DP rows are left out: their DP kernels were rewritten before the 11-27 run. All rows ran the
# noise and AdamW in two passes (the fused update came after them): planned so, DPMEM_FUSED_UPDATE=0.
B=${DPMEM_BUILD:-build}
for p in train_vanilla train_flash; do
    [ -x "$B/$p" ] || { echo "plan_time_gpu: $B/$p is not built (make $B/$p): skipped"; exit 0; }
done
a4="--model 1b --seq-len 4096 --precision bf16 --steps 2"
a1="--model 1b --seq-len 1024 --precision bf16 --steps 2"
a16="--model 1b --seq-len 16384 --precision bf16 --checkpoint-activations --steps 2"
# role | profile | measured ms | source | program and flags
rows() {
cat <<EOF
fit|h100|168.64|27 T4096 vanilla|train_vanilla $a4 --batch-size 1 --grad-accum 2
fit|h100|196.75|27 T4096 direct+bk|train_flash $a4 --batch-size 2 --max-physical-batch-size 1 --norm direct --clip bk
check|h100|194.79|27 T4096 mixed+bk|train_flash $a4 --batch-size 2 --max-physical-batch-size 1 --norm mixed --clip bk
check|h100|208.71|27 T4096 flash+bk|train_flash $a4 --batch-size 2 --max-physical-batch-size 1 --norm flash --clip bk
check|h100|406.32|27 T4096 ghost+twopass|train_flash $a4 --batch-size 2 --max-physical-batch-size 1 --norm ghost --clip twopass
check|h100|276.32|27 T1024 B8 vanilla|train_vanilla $a1 --batch-size 8 --grad-accum 2
check|h100|356.00|27 T1024 B8 direct+bk|train_flash $a1 --batch-size 16 --max-physical-batch-size 8 --norm direct --clip bk
check|h100|394.45|27 T1024 B8 mixed+bk|train_flash $a1 --batch-size 16 --max-physical-batch-size 8 --norm mixed --clip bk
check|h100|392.61|27 T1024 B8 flash+bk|train_flash $a1 --batch-size 16 --max-physical-batch-size 8 --norm flash --clip bk
check|h100|585.51|27 T1024 B8 ghost+twopass|train_flash $a1 --batch-size 16 --max-physical-batch-size 8 --norm ghost --clip twopass
check|h100|90.9|26 T4096 B1 vanilla bf16|train_vanilla $a4 --batch-size 1
check|h200|85.0|26 T4096 B1 vanilla bf16 (H200)|train_vanilla $a4 --batch-size 1
check|h100|883.3|26 T4096 B1 vanilla fp32 (TF32)|train_vanilla --model 1b --seq-len 4096 --steps 2 --batch-size 1
check|h200|876.8|26 T4096 B1 vanilla fp32 (H200)|train_vanilla --model 1b --seq-len 4096 --steps 2 --batch-size 1
check|h200|970.2|26 T16384 ckpt vanilla (H200)|train_vanilla $a16 --batch-size 1 --grad-accum 2
check|h200|1245.1|26 T16384 ckpt flash+bk (H200)|train_flash $a16 --batch-size 2 --max-physical-batch-size 1 --norm flash --clip bk
EOF
}
printf '%-6s %-36s %8s %12s %12s %7s\n' role row profile "predicted ms" "measured ms" ratio
rows | while IFS='|' read -r role prof meas what cmd; do
    # shellcheck disable=SC2086
    pred=$(DPMEM_FUSED_UPDATE=0 "$B"/$cmd --device plan --plan-for cuda --plan-profile "$prof" 2>&1 | sed -n 's/^predicted step: \([0-9.]*\) ms.*/\1/p')
    awk -v r="$role" -v w="$what" -v p="$prof" -v x="${pred:-0}" -v m="$meas" 'BEGIN {
        q = m > 0 ? x / m : 0
        printf "%-6s %-36s %8s %12.1f %12.1f %7.3f%s\n", r, w, p, x, m, q, (q >= 0.8 && q <= 1.25 ? "" : "  outside [0.8, 1.25]") }'
done
