#!/bin/sh
# The kit in a program of two translation units, built as C99 and C11 (gcc, clang), C++17 (g++,
# clang++) and CUDA (nvcc) with warnings as errors; then with DPMEM_DISABLE (no dpmem or NVTX symbol
# may remain, checked with nm; tests/compile/disabled.c with every compiler), with DPMEM_NO_NVTX (no
# NVTX symbol, no CUDA headers needed), and the implementation included after <stdio.h>.
# nvcc gets -Wall -Wextra (not -Wpedantic: its own generated line markers trip that in every file).
set -u
B=${DPMEM_BUILD:-build}/tmp/compile
mkdir -p "$B"
SRC=tests/compile
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
INC="-I. -I$CUDA_HOME/include"
W="-Wall -Wextra -Wpedantic -Werror"
fail=0
run() { # name, expected line
  out=$("$B/$1" 2>"$B/$1.stderr") || { echo "FAIL $1: exit $?: $out"; cat "$B/$1.stderr"; fail=1; return; }
  [ "$out" = "$2" ] || { echo "FAIL $1: printed '$out', expected '$2'"; fail=1; return; }
  echo "ok   $1"
}
build() { # name, command...
  n=$1; shift
  if ! "$@" > "$B/$n.err" 2>&1; then echo "FAIL $n: compile"; cat "$B/$n.err" | head -20; fail=1; return 1; fi
}
cp $SRC/main.c "$B/main.cpp"; cp $SRC/work.c "$B/work.cpp"; cp $SRC/main.c "$B/main.cu"; cp $SRC/work.c "$B/work.cu"
FULL="sum=18 peak=1000 live=0"
for cc in gcc clang; do
  command -v $cc >/dev/null || { echo "SKIP $cc: not installed"; continue; }
  for std in c99 c11; do
    build "${cc}_$std" $cc -std=$std $W $INC $SRC/main.c $SRC/work.c -o "$B/${cc}_$std" -ldl -lpthread && run "${cc}_$std" "$FULL"
  done
done
for cxx in g++ clang++; do
  command -v $cxx >/dev/null || { echo "SKIP $cxx: not installed"; continue; }
  build "${cxx}_17" $cxx -std=c++17 $W $INC -I$SRC "$B/main.cpp" "$B/work.cpp" -o "$B/${cxx}_17" -ldl -lpthread && run "${cxx}_17" "$FULL"
done
# C implementation, C++ user, and the reverse.
build mixed_c_cpp sh -c "gcc -std=c11 $W $INC -c $SRC/main.c -o $B/m.o && g++ -std=c++17 $W $INC -c $B/work.cpp -o $B/w.o && g++ $B/m.o $B/w.o -o $B/mixed_c_cpp -ldl -lpthread" && run mixed_c_cpp "$FULL"
NVCC=$CUDA_HOME/bin/nvcc
NW="-std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -I."
if [ -x "$NVCC" ]; then
  build nvcc_both $NVCC $NW "$B/main.cu" "$B/work.cu" -o "$B/nvcc_both" -ldl && run nvcc_both "$FULL"
  build nvcc_mixed sh -c "gcc -std=c11 $W $INC -c $SRC/main.c -o $B/m2.o && $NVCC $NW -c $B/work.cu -o $B/w2.o && $NVCC $B/m2.o $B/w2.o -o $B/nvcc_mixed -ldl" && run nvcc_mixed "$FULL"
else
  echo "SKIP nvcc: none under $CUDA_HOME (the CUDA toolkit is needed for this check)"
fi
# Compiled out: nothing of the kit or of NVTX may remain.
build disabled gcc -std=c11 $W -DDPMEM_DISABLE -I. $SRC/main.c $SRC/work.c -o "$B/disabled" && run disabled "sum=18 peak=0 live=0"
if nm "$B/disabled" | grep -i -E 'dpmem|nvtx'; then echo "FAIL disabled: symbols above remain"; fail=1; else echo "ok   disabled: no dpmem/nvtx symbol (nm)"; fi
build disabled_cpp g++ -std=c++17 $W -DDPMEM_DISABLE -I. -I$SRC "$B/main.cpp" "$B/work.cpp" -o "$B/disabled_cpp" && run disabled_cpp "sum=18 peak=0 live=0"
if nm -C "$B/disabled_cpp" | grep -i -E 'dpmem|nvtx'; then echo "FAIL disabled_cpp: symbols remain"; fail=1; fi
# Compiled out, a program clean with the kit is clean without it: variables used only as the kit's
# arguments, value calls as statements, no argument evaluated; every compiler, dpmem_cuda.h too.
DIS="evaluated=0 cuda=0"; DISC="evaluated=0 cuda=1"
CUDA_LIB="-L$CUDA_HOME/lib64 -lcudart -Wl,-rpath,$CUDA_HOME/lib64"
have_cuda_rt=0; [ -f "$CUDA_HOME/include/cuda_runtime_api.h" ] && [ -e "$CUDA_HOME/lib64/libcudart.so" ] && have_cuda_rt=1
cp $SRC/disabled.c "$B/disabled_args.cpp"; cp $SRC/disabled.c "$B/disabled_args.cu"
nosyms() { if nm -C "$B/$1" | grep -i -E 'dpmem|nvtx'; then echo "FAIL $1: symbols above remain"; fail=1; fi; }
for cc in gcc clang; do
  command -v $cc >/dev/null || continue
  for std in c99 c11; do
    n=off_${cc}_$std
    build $n $cc -std=$std $W -I. $SRC/disabled.c -o "$B/$n" && run $n "$DIS" && nosyms $n
  done
  [ $have_cuda_rt = 1 ] && build off_${cc}_cuda $cc -std=c11 $W $INC -DWITH_CUDA $SRC/disabled.c -o "$B/off_${cc}_cuda" $CUDA_LIB \
    && run off_${cc}_cuda "$DISC" && nosyms off_${cc}_cuda
done
for cxx in g++ clang++; do
  command -v $cxx >/dev/null || continue
  build off_$cxx $cxx -std=c++17 $W -I. "$B/disabled_args.cpp" -o "$B/off_$cxx" && run off_$cxx "$DIS" && nosyms off_$cxx
  [ $have_cuda_rt = 1 ] && build off_${cxx}_cuda $cxx -std=c++17 $W $INC -DWITH_CUDA "$B/disabled_args.cpp" -o "$B/off_${cxx}_cuda" $CUDA_LIB \
    && run off_${cxx}_cuda "$DISC" && nosyms off_${cxx}_cuda
done
if [ -x "$NVCC" ]; then
  build off_nvcc $NVCC $NW "$B/disabled_args.cu" -o "$B/off_nvcc" && run off_nvcc "$DIS" && nosyms off_nvcc
  build off_nvcc_cuda $NVCC $NW -DWITH_CUDA "$B/disabled_args.cu" -o "$B/off_nvcc_cuda" && run off_nvcc_cuda "$DISC" && nosyms off_nvcc_cuda
fi
# The implementation after other headers: -std=c11/c99 stop with one #error naming the fix; with
# -D_GNU_SOURCE or -std=gnu11 it builds.
for std in c99 c11; do
  if gcc -std=$std $W $INC $SRC/late_include.c -o "$B/late_$std" -ldl -lpthread > "$B/late_$std.err" 2>&1; then
    echo "FAIL late_$std: built, but <stdio.h> first hides what the implementation needs"; fail=1
  elif [ "$(grep -c 'error' "$B/late_$std.err")" -gt 2 ] || ! grep -q 'include dpmem.h first in this file, or compile this file with -D_GNU_SOURCE' "$B/late_$std.err"; then
    echo "FAIL late_$std: not the one #error that says what to do:"; head -20 "$B/late_$std.err"; fail=1
  else echo "ok   late_$std: one #error that says what to do"; fi
done
build late_gnu_source gcc -std=c11 -D_GNU_SOURCE $W $INC $SRC/late_include.c -o "$B/late_gnu_source" -ldl -lpthread && run late_gnu_source "peak=100"
build late_gnu11 gcc -std=gnu11 $W $INC $SRC/late_include.c -o "$B/late_gnu11" -ldl -lpthread && run late_gnu11 "peak=100"
# No NVTX: plain C, no CUDA include path at all.
build no_nvtx gcc -std=c11 $W -DDPMEM_NO_NVTX -I. $SRC/main.c $SRC/work.c -o "$B/no_nvtx" -lpthread && run no_nvtx "$FULL"
if nm "$B/no_nvtx" | grep -i nvtx; then echo "FAIL no_nvtx: NVTX symbols remain"; fail=1; fi
exit $fail
