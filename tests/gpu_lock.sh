# gpu_lock.sh — sourced by GPU test scripts: `gpu_lock NAME` takes the machine-wide GPU test lock
# for the rest of the script (tests/gpu_share.h describes it: the same file, $DPMEM_GPU_LOCK or
# /tmp/dpmem-gpu.lock, and the same DPMEM_GPU_LOCK_HELD, so the test programs the script starts run
# under its lock instead of waiting for it). It waits for a holder, naming it on stderr. Without
# flock(1) or a usable lock file it says so and the script goes on unlocked.
gpu_lock() {
  if [ -n "$DPMEM_GPU_LOCK_HELD" ] && kill -0 "$DPMEM_GPU_LOCK_HELD" 2>/dev/null; then return 0; fi
  gpu_lock_file=${DPMEM_GPU_LOCK:-/tmp/dpmem-gpu.lock}
  command -v flock >/dev/null 2>&1 || { echo "$1: no flock(1): running without the GPU lock" >&2; return 0; }
  if ! { command exec 9<>"$gpu_lock_file"; } 2>/dev/null; then   # `command`: a failed redirection must not end the script
    echo "$1: cannot open the GPU lock $gpu_lock_file: running without it" >&2; return 0
  fi
  if ! flock -n 9; then
    echo "$1: waiting for the GPU lock $gpu_lock_file (held by pid $(head -n 1 "$gpu_lock_file" 2>/dev/null))" >&2
    flock 9 || { echo "$1: cannot lock $gpu_lock_file: running without it" >&2; return 0; }
  fi
  echo "$$ $1" > "$gpu_lock_file"
  DPMEM_GPU_LOCK_HELD=$$; export DPMEM_GPU_LOCK_HELD
}
