#!/bin/sh
# Runs each test given (an executable or a .sh script), prints one line per test and the closing
# line "N passed, N failed, N skipped". A test exits 0 (pass), 77 (skip: it printed why) or else (fail).
# Where there is a GPU, a test that may use it (cuda, gpu or torch in its name) runs under the GPU
# test lock (tests/gpu_lock.sh), so that it never runs beside another GPU test of ours.
. "$(dirname "$0")/gpu_lock.sh"
have_gpu=$(nvidia-smi -L 2>/dev/null | head -n 1)
pass=0; fail=0; skip=0; failed=""
for t in "$@"; do
  case "$t" in *.sh) cmd="sh $t";; *) cmd="$t";; esac
  start=$(date +%s)
  case "$t" in
    *cuda*|*gpu*|*torch*) if [ -n "$have_gpu" ]; then out=$( (gpu_lock "${t##*/}"; $cmd) 2>&1 ); rc=$?; else out=$($cmd 2>&1); rc=$?; fi ;;
    *) out=$($cmd 2>&1); rc=$? ;;
  esac
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS $t (${secs}s)"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP $t: $(printf '%s\n' "$out" | grep -m1 SKIP)"
  else fail=$((fail+1)); failed="$failed $t"; echo "FAIL $t (exit $rc)"; printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /'
  fi
done
echo "$pass passed, $fail failed, $skip skipped"
# DPMEM_TALLY=FILE: that line in FILE too (make test closes with both passes' tallies)
[ -z "${DPMEM_TALLY:-}" ] || echo "$pass passed, $fail failed, $skip skipped" >"$DPMEM_TALLY"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
