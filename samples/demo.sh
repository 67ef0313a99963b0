#!/bin/sh
# make demo: the experiment suite (tools/run_experiments) on its embedded default configuration:
# every DP-SGD method side by side, each in its own process, into results/<UTC timestamp>/ with the
# logs, summary.txt, results.csv, results.json and the PNGs; prints the summary table and the folder.
# Usage: sh samples/demo.sh [BUILD] [run_experiments options...]; the EXP_* variables configure it
# too (docs/EXPERIMENTS.md). `make` has already built everything when `make demo` calls this.
set -u
BUILD=${1:-build}
[ $# -eq 0 ] || shift
exec sh "$(dirname "$0")/../tools/run_experiments" --build "$BUILD" "$@"
