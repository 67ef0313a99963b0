#!/bin/sh
# make demo: runs the samples into results/<timestamp>/ and turns their logs into pictures and tables.
set -eu
BUILD=${1:-build}
out=results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "== quickstart (the kit on a pretend training loop, 3 loader threads)"
"$BUILD/quickstart" "$out/quickstart.log"
if [ -x "$BUILD/dpmem-render" ]; then
  "$BUILD/dpmem-render" "$out/quickstart.log" -o "$out/quickstart.png"
fi
if [ -x "$BUILD/dpmem-report" ]; then
  "$BUILD/dpmem-report" "$out/quickstart.log" > "$out/summary.txt" && cat "$out/summary.txt"
fi
echo "results in $out/"
