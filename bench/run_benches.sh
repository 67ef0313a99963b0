#!/bin/sh
# run_benches.sh — `make bench`: runs each benchmark program in turn with a plan and progress lines.
#
# Before the first one it prints the plan: every program with the time it took the last time it ran
# on this machine (kept in BUILD/bench-times.txt, or bench-times-quick.txt for QUICK=1), and the
# total; for a program that never ran here, what it will run (bench/plan.txt: its sizes, full or
# QUICK=1). Each program then starts with a line
# "[k/N] name (last time ~Xs; Ys elapsed)" (or "never timed here") and ends with "[k/N] name: done in Zs", its own table
# in between (line-buffered through stdbuf, so a long table shows its rows as they come).
# With --quick (`make bench QUICK=1`) every program gets DPMEM_BENCH_QUICK=1 in its environment and
# runs its short variant (fewer sizes and rounds: the same tables, less precise): about 9 minutes in
# all on this project's 2-core VM (8 min 39 s, 2026-11-26).
# A program that fails stops the run (exit 1), naming it. Entries ending in .sh run with sh, .py with
# python3. Usage: sh bench/run_benches.sh [--quick] BUILD PROGRAM...
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
build=${1:?usage: run_benches.sh [--quick] BUILD PROGRAM...}
shift
times=$build/bench-times$([ $quick -eq 1 ] && echo -quick).txt
[ $quick -eq 1 ] && export DPMEM_BENCH_QUICK=1
export DPMEM_BUILD="$build"   # for the scripts among them (bench/torch_baseline.py runs build/bench/profile_step)
n=$#
line_buf=""
command -v stdbuf >/dev/null 2>&1 && line_buf="stdbuf -oL"

last() { [ -f "$times" ] && awk -v p="$1" '$1 == p { t = $2 } END { if (t != "") print t }' "$times"; }
# what() PROGRAM: what it runs, from bench/plan.txt (the QUICK=1 column with --quick)
what() {
    awk -F ' [|] ' -v p="${1##*/}" -v q=$quick '!/^#/ && $1 == p { print (q ? $3 : $2); found = 1 } END { if (!found) print "not in bench/plan.txt" }' \
        "$(dirname "$0")/plan.txt" 2>/dev/null || echo "not in bench/plan.txt"
}

echo "make bench$([ $quick -eq 1 ] && echo " QUICK=1 (short variants)"): $n programs; load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
total=0; known=0
for b in "$@"; do
    t=$(last "$b")
    if [ -n "$t" ]; then total=$((total + t)); known=$((known + 1)); printf '  %-44s ~%ss last time\n' "$b" "$t"
    else printf '  %-44s never timed here: %s\n' "$b" "$(what "$b")"; fi
done
if [ $known -eq $n ]; then echo "  expected in all: ~${total}s (from the last run here)"
else
    ref="QUICK=1 took 8 min 39 s in all on this project's shared 2-core VM$([ $quick -eq 0 ] && echo "; the full run takes much longer")"
    if [ $known -eq 0 ]; then echo "  expected: never timed here ($ref)"
    else echo "  expected: ~${total}s for the $known timed, more for the $((n - known)) never timed ($ref)"; fi
fi

mkdir -p "$build"
start=$(date +%s); k=0
for b in "$@"; do
    k=$((k + 1))
    t=$(last "$b")
    echo
    echo "== [$k/$n] $b (${t:+last time ~${t}s}${t:-never timed here}; $(( $(date +%s) - start ))s elapsed)"
    t0=$(date +%s)
    case $b in
        *.sh) $line_buf sh "$b" ;;
        *.py) $line_buf python3 "$b" ;;
        *) $line_buf "$b" ;;
    esac
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    echo "$b $secs" >>"$times"   # at once: an interrupted run still tells the next plan
    if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then echo "== [$k/$n] $b FAILED (exit $rc) after ${secs}s"; exit 1; fi
    echo "== [$k/$n] $b: done in ${secs}s"
done
# keep one line per program (the latest)
awk '{ t[$1] = $2 } END { for (p in t) print p, t[p] }' "$times" >"$times.tmp" && mv "$times.tmp" "$times"
echo
echo "make bench: $n programs in $(( $(date +%s) - start ))s (times kept in $times for the next plan)"
