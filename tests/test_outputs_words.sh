#!/bin/sh
# test_outputs_words.sh — what the programs and scripts print speaks of the project, not of its
# tracker: no printed string says "issue N" (bench/torch_baseline.py printed "goals (issue 20)" and
# dp_bench_train "goal (issue 5)"; a reader has no such issue). Comments may cite issues; a line
# that prints (printf, puts, print(, echo, die, warn) may not.
cd "$(dirname "$0")/.." || exit 1
hits=$(find . \( -path ./build -o -path ./.venv -o -path ./.deps -o -path ./.git -o -path ./results \) -prune -o -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' -o -name '*.py' -o -name '*.sh' -o -name '*.mk' \
           -o -name Makefile -o -name run_experiments -o -name plan_levers \) -print |
    xargs grep -n -i -E '(printf|puts|print\(|echo|die |warn)[^#]*["'"'"'][^"'"'"']*issue #?[0-9]' 2>/dev/null |
    grep -v '^\./tests/test_outputs_words\.sh:')
if [ -n "$hits" ]; then
    echo "FAIL: printed text names the tracker's issues:"; printf '%s\n' "$hits"; exit 1
fi
echo "no printed \"issue N\""
