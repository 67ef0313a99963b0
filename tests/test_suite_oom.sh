#!/bin/sh
# test_suite_oom.sh — a forced out-of-memory inside the suite: with --mem-limit (the CPU backend's
# cap: a tagged allocation above it fails) set between the planned peaks of the methods, exactly the
# experiments whose peak is above the limit fail as OOM (exit 3), each with its post-mortem in
# summary.txt (the failed request, the scope stack, live bytes by category) and a row in results.csv
# and results.json (with the failed request, the limit and the bytes live then, from its log); the
# experiments after a failure still run and succeed, and the suite exits 1.
# Exits 0 on pass, 1 on failure.
B=${DPMEM_BUILD:-build}
S=tools/run_experiments
[ -x "$B/train_vanilla" ] || { echo "FAIL: $B/train_vanilla not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
fail=0
CFG="--model tiny --seq-len 48 --batch-size 4 --physical-batch 2 --steps 1"
ALL6="vanilla dpsgd ghost flash mixed lora"

# The peaks, from the planner (exact: test_suite_plan.sh).
sh "$S" --build "$B" --out "$tmp/plan" --plan --quiet $CFG $ALL6 >"$tmp/plan.stdout" 2>&1 || { echo "FAIL: the plan run failed"; cat "$tmp/plan.stdout"; exit 1; }
peak_of() { sed -n 's/^peak tagged memory: \([0-9]*\) bytes.*/\1/p' "$1/$2.out"; }
# A limit halfway between the two middle distinct peaks: some methods fit, some do not.
limit=$(for e in $ALL6; do peak_of "$tmp/plan" $e; done | sort -n -u | awk '{ p[NR] = $1 } END { m = int(NR / 2); print int((p[m] + p[m + 1]) / 2) }')
echo "peaks (planned): $(for e in $ALL6; do printf '%s=%s ' $e "$(peak_of "$tmp/plan" $e)"; done)"
echo "limit: $limit bytes"

d=$tmp/run
sh "$S" --build "$B" --out "$d" --mem-limit "$limit" $CFG $ALL6 >"$tmp/run.stdout" 2>&1
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: the suite exited $rc, want 1 (some experiments failed)"; fail=1; }
nfail=0; nok=0; last_fail=0; k=0
for e in $ALL6; do
    k=$((k + 1))
    p=$(peak_of "$tmp/plan" $e)
    st=$(awk -F, -v e="$e" 'NR == 1 { for (c = 1; c <= NF; c++) ix[$c] = c; next } $ix["experiment"] == e { print $ix["status"] "," $ix["exit"] }' "$d/results.csv")
    js=$(grep "\"experiment\": \"$e\"" "$d/results.json" | sed -n 's/.*"status": "\([a-z]*\)", "exit": \([0-9]*\).*/\1,\2/p')
    if [ "$p" -gt "$limit" ]; then
        nfail=$((nfail + 1))
        if [ "$st" != "oom,3" ] || [ "$js" != "oom,3" ]; then echo "FAIL $e (peak $p > limit): csv '$st', json '$js', want oom,3"; fail=1; continue; fi
        # the post-mortem in summary.txt: the failed request, its scope stack, the live bytes
        pm=$(awk -v e="$e" '$0 == e ": oom (exit 3)" { on = 1; next } on && /^$/ { exit } on' "$d/summary.txt")
        for want in "error: out of memory" "post-mortem:" "OOM: " "in scope: step" "live: " "largest: "; do
            printf '%s\n' "$pm" | grep -q "$want" || { echo "FAIL $e: the post-mortem in summary.txt lacks '$want':"; printf '%s\n' "$pm"; fail=1; }
        done
        grep -q "^\[$k/6\] $e *OOM *(exit 3" "$tmp/run.stdout" || { echo "FAIL $e: no OOM progress line"; fail=1; }
        # the row carries the failure's figures: the request, the limit, what was live (request + live > limit)
        oc=$(awk -F, -v e="$e" 'NR == 1 { for (c = 1; c <= NF; c++) ix[$c] = c; next } $ix["experiment"] == e { print $ix["oom.requested_bytes"], $ix["oom.limit_bytes"], $ix["oom.live_bytes"], $ix["oom.tag"] }' "$d/results.csv")
        oj=$(grep "\"experiment\": \"$e\"" "$d/results.json" | sed -n 's/.*"oom.requested_bytes": \([0-9]*\),.*"oom.live_bytes": \([0-9]*\),.*"oom.limit_bytes": \([0-9]*\).*/\1 \3 \2/p')
        set -- $oc
        if [ $# -ne 4 ] || [ "$2" != "$limit" ] || [ $(($1 + $3)) -le "$limit" ] || [ "$3" -gt "$limit" ] || [ "$oj" != "$1 $2 $3" ]; then
            echo "FAIL $e: OOM columns (request limit live tag) csv '$oc', json '$oj', limit $limit"; fail=1
        else echo "ok   $e: results row: $1 bytes asked for $4 with $3 live, limit $2"; fi
        echo "ok   $e (peak $p > $limit): OOM, post-mortem: $(printf '%s\n' "$pm" | grep 'OOM:' | sed 's/^ *//')"
    else
        nok=$((nok + 1))
        got=$(peak_of "$d" $e)
        if [ "$st" != "ok,0" ] || [ "$js" != "ok,0" ] || [ "$got" != "$p" ]; then echo "FAIL $e (peak $p <= limit): csv '$st', json '$js', peak '$got'"; fail=1; continue; fi
        echo "ok   $e (peak $p <= $limit): ran, same peak as planned"
    fi
done
[ $nfail -gt 0 ] && [ $nok -gt 0 ] || { echo "FAIL: the limit did not split the methods ($nfail failed, $nok ran)"; fail=1; }
# the suite went on after a failure: some experiment after the first failure succeeded
first_fail=$(awk '$4 != "ok" { print NR; exit }' "$d/.runs")
after_ok=$(awk -v f="$first_fail" 'NR > f && $4 == "ok"' "$d/.runs" | wc -l)
[ -n "$first_fail" ] && [ "$after_ok" -gt 0 ] || { echo "FAIL: nothing ran after the first failure (run ${first_fail:-none})"; fail=1; }
grep -q "did not complete" "$tmp/run.stdout" || { echo "FAIL: no closing line about the failed experiments"; fail=1; }
[ -f "$d/breakdown.png" ] || { echo "FAIL: no breakdown.png for the runs that completed"; fail=1; }

[ $fail -eq 0 ] && echo "forced-OOM checks passed ($nfail OOM, $nok ran)"
exit $fail
