#!/bin/sh
# test_cuda_sanitize_scripts.sh — the two compute-sanitizer tests (test_cuda_ops_sanitize.sh,
# test_cuda_memcheck.sh) run here, without a GPU, against stand-ins for nvidia-smi and
# compute-sanitizer that print what the real tools print (the first H100 run's lines): each script
# must pass on clean output, and fail when the planted race or out-of-bounds write goes unreported, when
# racecheck reports a hazard, when an NVTX call is refused, or when the leak is reported without its
# tag. The real runs need a GPU; this checks the scripts' own logic.
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/dpmem_cs_scripts_XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/build/tests"
for f in test_cuda_kernels cuda_sanitize_plant test_cuda_gpu; do printf '#!/bin/sh\nexit 0\n' > "$dir/build/tests/$f"; chmod +x "$dir/build/tests/$f"; done
printf '#!/bin/sh\necho "GPU 0: stand-in (UUID: GPU-0)"\n' > "$dir/bin/nvidia-smi"
# The stand-in compute-sanitizer: FAKE_CS picks what goes wrong (clean, blind, hazard, nvtx, unnamed).
cat > "$dir/bin/compute-sanitizer" <<'EOS'
#!/bin/sh
tool=memcheck; target=""; mode=""; args=""
while [ $# -gt 0 ]; do
  case "$1" in --tool) tool=$2; shift;; --error-exitcode|--leak-check|--nvtx) shift;; -*) ;; *) [ -z "$target" ] && target=$1 || { [ -z "$mode" ] && mode=$1; args="$args $1"; };; esac
  shift
done
echo "========= COMPUTE-SANITIZER"
# racecheck and synccheck must not run cuDNN's kernels (groups cudnn and plan, or no group: all), as
# the real tools misjudge them: the stand-in reports a hazard where they would
if [ "${target##*/}" = test_cuda_kernels ] && { [ "$tool" = racecheck ] || [ "$tool" = synccheck ]; }; then
  case " $args " in "  "|*" cudnn "*|*" plan "*) echo "========= Error: Race reported in cudnn_generated_fort_native_sdpa_sm90_flash_bprop"
    [ "$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" || echo "========= ERROR SUMMARY: 1 error"
    exit 9;; esac
fi
case "${target##*/} $mode $FAKE_CS" in
  "cuda_sanitize_plant race "*blind*|"cuda_sanitize_plant oob "*blind*) ;;
  "cuda_sanitize_plant race"*) echo "========= Error: Race reported between Write access at race(int *)+0x70 in cuda_sanitize_plant.cu:23"
                               echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 9;;
  "cuda_sanitize_plant oob"*)  echo "========= Invalid __global__ write of size 4 bytes"; echo "========= ERROR SUMMARY: 1 error"; exit 9;;
  "test_cuda_kernels "*hazard*) [ "$tool" = racecheck ] && { echo "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)"; exit 0; };;
  "test_cuda_gpu clean "*nvtx*) echo "========= Warning: Call to nvtxMemRegionsRegister failed: One or more of the parameters is invalid"
                                 echo "========= ERROR SUMMARY: 26 errors"; exit 9;;
  "test_cuda_gpu leak "*unnamed*) echo "========= Leaked 1,048,576 bytes at 0x7f26c3000000"
                                  echo "========= LEAK SUMMARY: 1,048,576 bytes leaked in 1 allocations"; echo "========= ERROR SUMMARY: 1 error"; exit 0;;
  "test_cuda_gpu leak "*) echo "========= Leaked 1,048,576 bytes at 0x7f26c3000000 called params/leaked_on_purpose"
                          echo "========= LEAK SUMMARY: 1,048,576 bytes leaked in 1 allocations"; echo "========= ERROR SUMMARY: 1 error"; exit 0;;
esac
if [ "$tool" = racecheck ]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else echo "========= ERROR SUMMARY: 0 errors"; fi
exit 0
EOS
chmod +x "$dir/bin/compute-sanitizer" "$dir/bin/nvidia-smi"
PATH="$dir/bin:$PATH"; DPMEM_BUILD="$dir/build"; DPMEM_GPU_LOCK="$dir/gpu.lock"; export PATH DPMEM_BUILD DPMEM_GPU_LOCK
unset DPMEM_GPU_LOCK_HELD
fail=0
expect() {   # expect WANT-RC SCRIPT FAKE_CS WANT-TEXT
  out=$(FAKE_CS=$3 sh "$here/$2" 2>&1); rc=$?
  if [ $rc -ne "$1" ] || ! printf '%s\n' "$out" | grep -qF "$4"; then
    echo "FAIL: $2 with a $3 stand-in: exit $rc (want $1), want a line with \"$4\":"; printf '%s\n' "$out" | sed 's/^/    /'; fail=1
  fi
}
expect 0 test_cuda_ops_sanitize.sh clean "ok   racecheck test_cuda_kernels (no cuDNN): RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
expect 0 test_cuda_ops_sanitize.sh clean "ok   synccheck test_cuda_kernels (no cuDNN): ERROR SUMMARY: 0 errors"
expect 0 test_cuda_ops_sanitize.sh clean "ok   racecheck: planted shared-memory race caught: racecheck: RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
expect 1 test_cuda_ops_sanitize.sh blind "FAIL racecheck: planted shared-memory race: judged clean"
expect 1 test_cuda_ops_sanitize.sh blind "FAIL memcheck: planted out-of-bounds write: judged clean"
expect 1 test_cuda_ops_sanitize.sh hazard "FAIL racecheck test_cuda_kernels (no cuDNN): racecheck: RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)"
expect 0 test_cuda_memcheck.sh clean "the deliberate leak is reported as: Leaked 1,048,576 bytes at 0x7f26c3000000 called params/leaked_on_purpose"
expect 1 test_cuda_memcheck.sh nvtx "FAIL: memcheck of test_cuda_gpu clean: the tool refused an NVTX call: Warning: Call to nvtxMemRegionsRegister failed"
expect 1 test_cuda_memcheck.sh unnamed "FAIL: the leak report does not name the buffer by its tag"
[ $fail -eq 0 ] && echo "test_cuda_sanitize_scripts: all checks passed"
exit $fail
