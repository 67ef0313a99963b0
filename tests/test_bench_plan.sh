#!/bin/sh
# test_bench_plan.sh — `make bench`'s plan says what each program will run where it was never timed
# here (it printed "? (never timed here)" for all of them): every program `make bench` runs has a line
# in bench/plan.txt, and bench/run_benches.sh, on stand-ins named like the real programs (each prints
# a line and exits 0), prints each one's QUICK=1 sizes in the plan, no "?", then the times it keeps.
cd "$(dirname "$0")/.." || exit 1
command -v python3 >/dev/null || { echo "SKIP: no python3 (to run the stand-in of bench/torch_baseline.py)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
progs=$(printf 'print-benches:\n\t@echo $(BENCHES)\n' | env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -f Makefile -f - print-benches 2>/dev/null | tail -n 1)
[ -n "$progs" ] || { echo "FAIL: make lists no bench programs"; exit 1; }
set --
for p in $progs; do
    n=${p##*/}
    awk -F ' [|] ' -v p="$n" '!/^#/ && $1 == p && NF == 3 { f = 1 } END { exit !f }' bench/plan.txt || { echo "FAIL: $n has no line in bench/plan.txt"; fail=1; }
    case $n in
        *.sh) printf 'echo "%s ran"\n' "$n" >"$tmp/$n" ;;
        *.py) printf 'print("%s ran")\n' "$n" >"$tmp/$n" ;;
        *) printf '#!/bin/sh\necho "%s ran"\n' "$n" >"$tmp/$n"; chmod +x "$tmp/$n" ;;
    esac
    set -- "$@" "$tmp/$n"
done
sh bench/run_benches.sh --quick "$tmp/b" "$@" >"$tmp/out" 2>&1 || { echo "FAIL: run_benches.sh failed:"; cat "$tmp/out"; exit 1; }
grep -q '?' "$tmp/out" && { echo "FAIL: the plan still has a '?':"; grep -n '?' "$tmp/out"; fail=1; }
grep -q "  $tmp/bench_kit *never timed here: 50000 a loop\$" "$tmp/out" || { echo "FAIL: the plan does not say bench_kit's QUICK=1 size:"; cat "$tmp/out"; fail=1; }
grep -q "  $tmp/dp_train *never timed here: tiny at T=128, 512, 4 steps\$" "$tmp/out" || { echo "FAIL: the plan does not say dp_train's QUICK=1 sizes"; fail=1; }
[ "$(grep -c 'never timed here: ' "$tmp/out")" -eq $# ] || { echo "FAIL: not every program's line says what it runs"; fail=1; }
# the second run: every program timed, the plan gives the times
sh bench/run_benches.sh --quick "$tmp/b" "$@" >"$tmp/out2" 2>&1
[ "$(grep -c 's last time$' "$tmp/out2")" -eq $# ] && grep -q "expected in all: ~" "$tmp/out2" || { echo "FAIL: the second plan does not give last times:"; cat "$tmp/out2"; fail=1; }
[ $fail -eq 0 ] && echo "bench plan checks passed ($# programs)"
exit $fail
