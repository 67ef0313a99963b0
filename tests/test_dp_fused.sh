#!/bin/sh
# test_dp_fused.sh — the DP step's noise inside AdamW's pass (samples/dp/dp_fused.c) saves, byte for byte, the
# model of the two passes (DPMEM_FUSED_UPDATE=0: before_update's noise, then the loop's AdamW): flash and
# ghost under bk and twopass, the one-sample shortcut, bf16 (fp32 masters), Poisson sampling, LoRA (fp32 and
# bf16: the adapters' update), --zero 1, 2 and 3 over two ranks (each rank's slices at their flat offsets;
# SKIP line where mpirun is missing). Each run's log says which path ran (META dp.update: fused, separate);
# SGD and --secure-noise on the CPU (no fused twin there) keep the two passes; a DPMEM_FUSED_UPDATE other
# than 0 or 1 ends with exit 1 and one line naming it. A plan takes the path its target would (its
# predicted phases say so) at the same peak.
B=${DPMEM_BUILD:-build}
for t in train_flash train_ghost train_dpsgd train_lora dpmem-trace; do
  [ -x "$B/$t" ] || { echo "FAIL: $B/$t not built"; exit 1; }
done
d=$(mktemp -d /tmp/test_dp_fused.XXXXXX) || exit 1
trap 'rm -rf "$d"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }
COMMON="--steps 3 --batch-size 4 --max-physical-batch-size 2 --noise-seed 7 --noise-multiplier 1 --quiet"

# update_of LOG: META dp.update of a run's log
update_of() { "$B/dpmem-trace" "$1" -o - | grep -o '"dp.update":"[a-z]*"' | cut -d'"' -f4; }

# same NAME WANT LAUNCHER TRAINER ARGS...: the run with DPMEM_FUSED_UPDATE=1 (its log saying WANT) and with 0
# (saying separate) save the same files
same() {
  name=$1; want=$2; launch=$3; prog=$4; shift 4
  for f in 1 0; do
    DPMEM_FUSED_UPDATE=$f $launch "$B/$prog" $COMMON "$@" --save "$d/$name.$f" --log "$d/$name.$f.log" >"$d/out" 2>&1 \
      || { no "$name (DPMEM_FUSED_UPDATE=$f) failed: $(tail -3 "$d/out")"; return; }
  done
  log1=$d/$name.1.log; log0=$d/$name.0.log
  [ -f "$log1" ] || { log1=$d/$name.1.rank0.log; log0=$d/$name.0.rank0.log; }   # (several ranks: NAME.rankR.log each)
  [ "$(update_of "$log1")" = "$want" ] || no "$name: DPMEM_FUSED_UPDATE=1 ran '$(update_of "$log1")', want $want"
  [ "$(update_of "$log0")" = separate ] || no "$name: DPMEM_FUSED_UPDATE=0 ran '$(update_of "$log0")', want separate"
  n=0
  for f in $(cd "$d/$name.0" && find . -type f); do   # (LoRA: the adapter's folder too)
    n=$((n + 1))
    cmp -s "$d/$name.0/$f" "$d/$name.1/$f" || no "$name: the fused update saved another $f than the two passes"
  done
  [ $n -gt 0 ] || no "$name: nothing saved"
}

same flash-bk        fused "" train_flash --clip bk
same flash-twopass   fused "" train_flash --clip twopass
same ghost-bk        fused "" train_ghost --clip bk
same ghost-twopass   fused "" train_ghost --clip twopass
same shortcut        fused "" train_dpsgd --batch-size 1 --max-physical-batch-size 1
same flash-bk-bf16   fused "" train_flash --clip bk --precision bf16
same ghost-tp-bf16   fused "" train_ghost --clip twopass --precision bf16
same poisson         fused "" train_flash --poisson --dataset-size 64
same lora            fused "" train_lora --lora-rank 2
same lora-bf16       fused "" train_lora --lora-rank 2 --precision bf16
same sgd             separate "" train_flash --optimizer sgd
same secure-cpu      separate "" train_flash --secure-noise

if command -v mpirun >/dev/null 2>&1; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
  for z in 1 2 3; do
    same "zero$z" fused "timeout 300 mpirun --oversubscribe -np 2" train_flash --clip bk --zero $z
  done
  same zero2-bf16 fused "timeout 300 mpirun --oversubscribe -np 2" train_ghost --clip twopass --precision bf16 --zero 2
else
  echo "SKIP (part) test_dp_fused: no mpirun: --zero 1, 2, 3 over two ranks not checked"
fi

# a plan takes the path its target would, for its predicted time: the fused pass is optimizer_step's (no noise
# phase), the two passes have a noise phase; the same peak either way (the two allocate alike); --secure-noise
# fuses where the target has the twin (CUDA), not on the CPU
plan() {   # plan NAME FUSED ARGS...: phase line and peak of a plan
  pn=$1; pf=$2; shift 2
  DPMEM_FUSED_UPDATE=$pf "$B/train_flash" --steps 2 --batch-size 4 --max-physical-batch-size 2 --device plan --plan-profile h100 \
    "$@" --log "$d/$pn.log" >"$d/$pn.out" 2>&1 || no "plan $pn failed: $(tail -2 "$d/$pn.out")"
}
plan p1 1 --plan-for cpu; plan p0 0 --plan-for cpu; plan ps 1 --plan-for cpu --secure-noise; plan pg 1 --plan-for cuda --secure-noise
grep -q '^  phase:.* noise' "$d/p1.out" && no "fused plan: a noise phase: $(grep phase: "$d/p1.out")"
grep -q '^  phase:.* noise [0-9]' "$d/p0.out" || no "two-pass plan (DPMEM_FUSED_UPDATE=0): no noise phase: $(grep phase: "$d/p0.out")"
grep -q '^  phase:.* noise [0-9]' "$d/ps.out" || no "--secure-noise plan for the CPU: no noise phase (no fused twin there)"
grep -q '^  phase:.* noise' "$d/pg.out" && no "--secure-noise plan for CUDA: a noise phase (the GPU fuses it)"
[ "$(update_of "$d/p1.log")" = fused ] && [ "$(update_of "$d/p0.log")" = separate ] || no "plans' META dp.update: $(update_of "$d/p1.log") / $(update_of "$d/p0.log")"
[ "$(grep '^peak tagged' "$d/p1.out")" = "$(grep '^peak tagged' "$d/p0.out")" ] && grep -q '^peak tagged' "$d/p1.out" \
  || no "fused and two-pass plans' peaks differ: $(grep '^peak tagged' "$d/p1.out" "$d/p0.out")"

DPMEM_FUSED_UPDATE=yes "$B/train_flash" $COMMON >"$d/out" 2>"$d/err"; rc=$?
[ $rc -eq 1 ] || no "DPMEM_FUSED_UPDATE=yes: exit $rc, want 1"
[ "$(wc -l <"$d/err")" -eq 1 ] && grep -q "DPMEM_FUSED_UPDATE='yes'" "$d/err" || no "DPMEM_FUSED_UPDATE=yes: stderr is not one line naming it: $(cat "$d/err")"

[ $fail -eq 0 ] && echo "PASS test_dp_fused"
exit $fail
