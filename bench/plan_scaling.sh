#!/bin/sh
# plan_scaling.sh — docs/SCALING.md's per-rank table: the planned peak of one GPU rank for every DP method
# x ZeRO stage x sequence length, at the llama3.2-3b, llama3.1-8b and llama3.1-70b presets, marking what
# an H100 80GB does not hold. Plans only (the plan backend, --plan-for cuda: exact, seconds a cell, no GPU):
# `tools/run_experiments --plan --sweep seq-len=...` once per model and stage, its sweep.csv read back.
#
#   sh bench/plan_scaling.sh [--ranks N] [--seq-lens T1,T2,...] [--models M1,M2,...] [--zero S1,S2,...] [--fit DEVICE]
#
# Defaults: 8 ranks, T = 1024,4096,16384, models 3b,8b,70b, stages 0,1,2,3, h100-80gb. Each cell is
# bf16 with activation checkpointing, a logical batch of 16 (2 a rank, one physical batch of 2), AdamW;
# the methods are run_experiments' vanilla, flash (flash+bk), ghost (ghost+twopass) and lora (r = 8).
# Prints the markdown table (GiB = bytes / 2^30, ✗ past the device's capacity less 1 GiB, as
# run_experiments --fit); the runs' folders go to a temporary directory, removed after.
set -eu
RANKS=8; SEQS=1024,4096,16384; MODELS=3b,8b,70b; ZEROS=0,1,2,3; FIT=h100-80gb
die() { echo "plan_scaling: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "$1 needs a value"
    case $1 in
        --ranks) RANKS=$2 ;; --seq-lens) SEQS=$2 ;; --models) MODELS=$2 ;; --zero) ZEROS=$2 ;; --fit) FIT=$2 ;;
        *) die "unknown option '$1' (see the header of $0)" ;;
    esac
    shift 2
done
here=$(cd "$(dirname "$0")/.." && pwd)
case $FIT in   # the capacities as the driver reports them (tools/run_experiments' fit_size), less 1 GiB
    h100-80gb) MIB=81559 ;; h100-94gb) MIB=95830 ;; h200) MIB=143771 ;; a100-40gb) MIB=40960 ;; a100-80gb) MIB=81920 ;;
    *) die "--fit takes h100-80gb, h100-94gb, h200, a100-40gb or a100-80gb, got '$FIT'" ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| model | method | T |$(echo "$ZEROS" | tr ',' '\n' | awk '{ printf " --zero %s |", $1 }')"
echo "|---|---|---|$(echo "$ZEROS" | tr ',' '\n' | awk '{ printf "---|" }')"
for model in $(echo "$MODELS" | tr ',' ' '); do
    case $model in
        3b) shape="--model llama3.2-3b"; name=llama3.2-3b ;;
        8b) shape="--model llama3.1-8b"; name=llama3.1-8b ;;
        70b) shape="--model llama3.1-70b"; name=llama3.1-70b ;;
        *) die "--models takes 3b, 8b, 70b, got '$model'" ;;
    esac
    for z in $(echo "$ZEROS" | tr ',' ' '); do
        # shellcheck disable=SC2086
        sh "$here/tools/run_experiments" $shape --plan --plan-for cuda --ranks "$RANKS" --zero "$z" --precision bf16 \
            --checkpoint-activations --batch-size $((2 * RANKS)) --physical-batch 2 --steps 1 --lora-rank 8 \
            --sweep "seq-len=$SEQS" --quiet --out "$tmp/$model-$z" vanilla flash ghost lora >"$tmp/out" 2>&1 ||
            { grep -h "error" "$tmp/out" "$tmp/$model-$z"/*.err 2>/dev/null | sort -u | head -5 >&2
              die "the plans of $name at --zero $z failed (above)"; }
        tail -n +2 "$tmp/$model-$z/sweep.csv" | sed "s/^/$z,/" >>"$tmp/$model.csv"
    done
    # rows: zero,T,vanilla,flash,ghost,lora -> one line per method and T, a column per stage
    awk -F, -v name="$name" -v zeros="$ZEROS" -v seqs="$SEQS" -v cap="$MIB" '
        { for (k = 3; k <= 6; k++) b[$1, $2, k] = $k }
        END {
            nz = split(zeros, Z, ","); ns = split(seqs, S, ",")
            split("vanilla,flash+bk,ghost+twopass,lora r=8", M, ",")
            for (k = 3; k <= 6; k++) for (i = 1; i <= ns; i++) {
                line = "| " name " | " M[k - 2] " | " S[i] " |"
                for (j = 1; j <= nz; j++) {
                    v = b[Z[j], S[i], k]
                    line = line sprintf(" %.1f%s |", v / 2^30, v > cap * 2^20 - 2^30 ? " ✗" : "")
                }
                print line
            }
        }' "$tmp/$model.csv"
done
