#!/bin/sh
# plan_time_scaling.sh — docs/SCALING.md's predicted step table: 8 ranks on the h100 profile
# (kernels/plan/profile.c), llama3.2-3b and Llama-3.1-8B's shape at T=4096, bf16 with activation
# checkpointing, logical batch 16 (2 a rank), every --zero stage; vanilla, flash+bk, ghost+twopass
# and LoRA r=8 (q, v). Each cell the plan's predicted step, tokens/s and MFU (samples/llama/mfu.h's
# count): predictions, made on this machine without a GPU.
B=${DPMEM_BUILD:-build}
PROFILE=${PROFILE:-h100}
E8="--vocab 128256 --dim 4096 --layers 32 --heads 32 --kv-heads 8 --ffn 14336"
echo "| model | method | --zero 0 | --zero 1 | --zero 2 | --zero 3 |"
echo "|---|---|---|---|---|---|"
for mdl in "llama3.2-3b|--model llama3.2-3b" "8B|$E8"; do
    name=${mdl%%|*}; shape=${mdl#*|}
    for meth in "vanilla|train_vanilla|" "flash+bk|train_flash|--max-physical-batch-size 2" \
                "ghost+twopass|train_ghost|--max-physical-batch-size 2 --clip twopass" "LoRA r8|train_lora|--max-physical-batch-size 2 --lora-rank 8"; do
        mn=${meth%%|*}; r=${meth#*|}; prog=${r%%|*}; fl=${r#*|}
        row="| $name | $mn |"
        for z in 0 1 2 3; do
            # shellcheck disable=SC2086
            o=$("$B/$prog" $shape --seq-len 4096 --batch-size 16 $fl --steps 1 --device plan --plan-for cuda --plan-profile "$PROFILE" \
                --ranks 8 --zero $z --precision bf16 --checkpoint-activations 2>&1)
            cell=$(echo "$o" | awk '/^predicted step:/ { ms = $3; tk = $5 } /^  MFU / { mfu = $2 }
                END { if (ms == "") print "failed"; else printf "%.0f ms, %.0fk tok/s, %s %%", ms, tk / 1000, mfu }')
            row="$row $cell |"
        done
        echo "$row"
    done
done
