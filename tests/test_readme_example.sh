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

# The dpmem_cuda.h snippet: compiles and links warning-free (it needs a GPU to run, so it is not run).
awk '/^```c$/{n++; if(n==2){on=1; next}} /^```$/{if(on){exit}} on' README.md > "$B/cuda_example.c"
[ -s "$B/cuda_example.c" ] || { echo "FAIL: no dpmem_cuda.h example (second C block) in README.md"; exit 1; }
printf '\nint main(void) { float *w; return setup(&w, 1024) == 0 ? 0 : 1; }\n' >> "$B/cuda_example.c"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -f "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -I$CUDA_HOME/include "$B/cuda_example.c" -o "$B/cuda_example" \
    -L$CUDA_HOME/lib64 -lcudart -ldl -lpthread
  echo "README dpmem_cuda.h example: compiles and links"
else
  echo "README dpmem_cuda.h example: not compiled (no CUDA toolkit under $CUDA_HOME)"
fi
