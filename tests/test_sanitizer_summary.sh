#!/bin/sh
# test_sanitizer_summary.sh — tests/sanitizer_summary.sh on canned compute-sanitizer outputs (the
# first H100 run's clean racecheck, which the old "ERROR SUMMARY: 0 errors" check called a failure;
# its refused NVTX calls; planted races, leaks and errors, singular and plural, cut runs), and
# tests/gpu_lock.sh (a second script waits for the first and names it; a child of the holder does not
# wait; an unusable lock file is said and not fatal; a planted link is not written through, a FIFO
# is refused). No GPU needed.
here=$(dirname "$0")
. "$here/sanitizer_summary.sh"
. "$here/gpu_lock.sh"
fail=0
expect() {   # expect WANT(0|1) TOOL RC WANT-LINE TEXT
  got=$(printf '%s\n' "$5" | sanitizer_verdict "$2" "$3"); grc=$?
  if [ "$grc" != "$1" ] || [ "$got" != "$4" ]; then
    echo "FAIL: $2 (exit $3) on:"; printf '%s\n' "$5" | sed 's/^/    /'
    echo "  gave [$grc] \"$got\", want [$1] \"$4\""; fail=1
  fi
}
H='========= COMPUTE-SANITIZER'

expect 0 racecheck 0 "ok   RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" \
"$H
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
# the old check's verdict on that same clean output: a failure (what issue 30 found)
printf '%s\n' "$H" "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" | grep -q "ERROR SUMMARY: 0 errors" &&
  { echo "FAIL: the canned racecheck output matches the old check (this test would not show the bug)"; fail=1; }
expect 1 racecheck 9 "racecheck: RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" \
"$H
========= Error: Race reported between Write access at race(int *)+0x70 in plant.cu:12
=========     and Read access at race(int *)+0x90 in plant.cu:13 [248 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
expect 1 racecheck 0 "racecheck: RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)" \
"$H
========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)"
expect 1 racecheck 0 "racecheck: RACECHECK SUMMARY: 1,024 hazards displayed (1,000 errors, 24 warnings)" \
"========= RACECHECK SUMMARY: 1,024 hazards displayed (1,000 errors, 24 warnings)"
expect 1 racecheck 0 "no RACECHECK SUMMARY line: the run did not finish (exit 0)" \
"$H
========= Error: Race reported between Write access at race(int *)+0x70"
expect 1 racecheck 139 "no RACECHECK SUMMARY line: the run did not finish (exit 139)" "$H"
expect 0 memcheck 0 "ok   ERROR SUMMARY: 0 errors" \
"$H
test_cuda_kernels: 168/168 passed
========= ERROR SUMMARY: 0 errors"
# the first run's memcheck --nvtx yes of test_cuda_gpu: refused NVTX calls
expect 1 memcheck 9 "the tool refused an NVTX call: Warning: Call to nvtxMemRegionsRegister failed: One or more of the parameters is invalid" \
"$H
========= Warning: Call to nvtxMemRegionsRegister failed: One or more of the parameters is invalid
========= Warning: Call to nvtxMemRegionsUnregister failed: One or more of the parameters is invalid
========= ERROR SUMMARY: 26 errors"
expect 1 memcheck 9 "memcheck: ERROR SUMMARY: 1 error" \
"$H
========= Invalid __global__ write of size 4 bytes
=========     at oob(int *)+0x50 in plant.cu:20
=========     Address 0x7f0047000400 is out of bounds
=========
========= ERROR SUMMARY: 1 error"
expect 1 memcheck 0 "memcheck: LEAK SUMMARY: 1048576 bytes leaked" \
"$H
========= Leaked 1,048,576 bytes at 0x7f26c3000000 called params/leaked_on_purpose
=========
========= LEAK SUMMARY: 1,048,576 bytes leaked in 1 allocations
========= ERROR SUMMARY: 0 errors"
expect 1 memcheck 1 "memcheck: ERROR SUMMARY: 0 errors, but the run exited 1" \
"$H
FAIL tests/test_cuda_gpu.cu:99: something
========= ERROR SUMMARY: 0 errors"
expect 1 memcheck 0 "no ERROR SUMMARY line: the run did not finish (exit 0)" "$H"
expect 0 synccheck 0 "ok   ERROR SUMMARY: 0 errors" "========= ERROR SUMMARY: 0 errors"
expect 1 synccheck 9 "synccheck: ERROR SUMMARY: 2 errors" "========= ERROR SUMMARY: 2 errors"
expect 1 nosuchtool 0 "sanitizer_verdict: unknown tool 'nosuchtool'" "========= ERROR SUMMARY: 0 errors"

# the lock: a holder keeps it 1 s; a second script waits for it and names it
dir=$(mktemp -d /tmp/dpmem_gpu_lock_XXXXXX) || exit 1
DPMEM_GPU_LOCK=$dir/gpu.lock; export DPMEM_GPU_LOCK
unset DPMEM_GPU_LOCK_HELD
( gpu_lock holder; echo taken > "$dir/holding"; sleep 1 ) &
holder=$!
i=0; while [ ! -f "$dir/holding" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
start=$(date +%s%N)
msg=$( (gpu_lock waiter; echo "got it as $DPMEM_GPU_LOCK_HELD") 2>&1 )
waited=$(( ($(date +%s%N) - start) / 1000000 ))
wait $holder
case "$msg" in
  "waiter: waiting for the GPU lock $dir/gpu.lock (held by pid "*" holder)
got it as "*) ;;
  *) echo "FAIL: waiting line: \"$msg\""; fail=1 ;;
esac
[ $waited -ge 500 ] || { echo "FAIL: the second script waited only $waited ms for a 1 s holder"; fail=1; }
# a child of the holder runs under its lock (no wait, no line)
( gpu_lock parent; t0=$(date +%s%N); out=$( (gpu_lock child) 2>&1 ); t1=$(date +%s%N)
  [ -z "$out" ] && [ $(( (t1 - t0) / 1000000 )) -lt 500 ] ) || { echo "FAIL: a child of the holder waited or spoke"; fail=1; }
# an unusable lock file: said, not fatal
out=$( (DPMEM_GPU_LOCK=/nonexistent-dir/gpu.lock; unset DPMEM_GPU_LOCK_HELD; gpu_lock nolock; echo "went on") 2>&1 )
[ "$out" = "nolock: cannot open the GPU lock /nonexistent-dir/gpu.lock: running without it
went on" ] || { echo "FAIL: unusable lock file: \"$out\""; fail=1; }
# the name is in the lock file: "<pid> <name>"
( gpu_lock named; [ "$(cat "$dir/gpu.lock")" = "$$ named" ] ) || { echo "FAIL: the lock file does not name its holder: \"$(cat "$dir/gpu.lock")\""; fail=1; }
# a link planted at the path (to a file of ours standing in for any file on the machine): not
# followed, the target keeps its bytes, said on stderr; a FIFO there is refused at once
printf 'precious contents\n' > "$dir/victim"; ln -s "$dir/victim" "$dir/linked.lock"; mkfifo "$dir/fifo.lock"
out=$( (DPMEM_GPU_LOCK=$dir/linked.lock; unset DPMEM_GPU_LOCK_HELD; gpu_lock linked; echo "went on") 2>&1 )
[ "$(cat "$dir/victim")" = "precious contents" ] || { echo "FAIL: the lock wrote through a link: the target holds \"$(cat "$dir/victim")\""; fail=1; }
[ "$out" = "linked: the GPU lock $dir/linked.lock is not a regular file (a link is not followed): running without it
went on" ] || { echo "FAIL: a link at the lock's path: \"$out\""; fail=1; }
out=$( (DPMEM_GPU_LOCK=$dir/fifo.lock; unset DPMEM_GPU_LOCK_HELD; timeout 5 sh -c '. "$0"; gpu_lock fifo; echo "went on"' "$here/gpu_lock.sh") 2>&1 )
[ "$out" = "fifo: the GPU lock $dir/fifo.lock is not a regular file (a link is not followed): running without it
went on" ] || { echo "FAIL: a FIFO at the lock's path: \"$out\""; fail=1; }
rm -rf "$dir"
[ $fail -eq 0 ] && echo "test_sanitizer_summary: all checks passed"
exit $fail
