#!/bin/sh
# The README's "Instrument your trainer" example must compile warning-free and do what it says:
# extract it, add a main(), build, run, and check the log and the printed peak.
set -eu
B=${DPMEM_BUILD:-build}/tmp/readme_example
mkdir -p "$B"
awk '/^```c$/{on=1; next} /^```$/{if(on){exit}} on' README.md > "$B/example.c"
[ -s "$B/example.c" ] || { echo "FAIL: no C example found in README.md"; exit 1; }
printf '\nint main(void) { train(3); return 0; }\n' >> "$B/example.c"
${CC:-cc} -std=c11 -Wall -Wextra -Werror -I. -I${CUDA_HOME:-/usr/local/cuda}/include "$B/example.c" -o "$B/example" -ldl -lpthread
out=$(cd "$B" && ./example)
# params 4 MiB + activations 16 MiB live together at the peak; no grads in this example
[ "$out" = "peak 20971520 B; grads at that moment 0 B" ] || { echo "FAIL: printed '$out'"; exit 1; }
[ -s "$B/run.log" ] || { echo "FAIL: no run.log written"; exit 1; }
head -c 8 "$B/run.log" | grep -q DPMEMLOG || { echo "FAIL: run.log has no DPMEMLOG header"; exit 1; }
echo "README example: ok ($out)"
