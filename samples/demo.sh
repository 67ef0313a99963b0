#!/bin/sh
# make demo: the experiment suite (tools/run_experiments) on its embedded default configuration:
# every DP-SGD method side by side, each in its own process, in 5 rounds (each round every method
# once, so a slow spell of a shared machine hits all alike, and vanilla once more at the end so that
# every round's ratios are paired with a vanilla run before and after it; the threads stay on their
# cores: the times are medians over the rounds, with the rounds' min..max, each ratio with the
# quartiles of the rounds' paired ratios, and a time ratio that cannot be trusted is flagged), into
# results/<UTC timestamp>/ with the logs, summary.txt, results.csv, results.json and the PNGs; prints
# the summary table and the folder. EXP_REPEAT=1 for one quick round (no spread across rounds).
# Usage: sh samples/demo.sh [BUILD] [run_experiments options...]; the EXP_* variables configure it
# too (docs/EXPERIMENTS.md). `make` has already built everything when `make demo` calls this.
set -u
BUILD=${1:-build}
[ $# -eq 0 ] || shift
EXP_REPEAT=${EXP_REPEAT:-5}
export EXP_REPEAT
exec sh "$(dirname "$0")/../tools/run_experiments" --build "$BUILD" "$@"
