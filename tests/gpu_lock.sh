# gpu_lock.sh — sourced by GPU test scripts: `gpu_lock NAME` takes the machine-wide GPU test lock
# for the rest of the script (tests/gpu_share.h describes it: the same file, $DPMEM_GPU_LOCK or
# /tmp/dpmem-gpu.lock, and the same DPMEM_GPU_LOCK_HELD, so the test programs the script starts run
# under its lock instead of waiting for it). It waits for a holder, naming it on stderr. Without
# flock(1) or a usable lock file it says so and the script goes on unlocked.
# The path is in a shared /tmp and sh has no O_NOFOLLOW: a symbolic link or anything but a regular
# file there is refused; a missing file is made with O_EXCL (noclobber: a link is not followed);
# the file is opened without truncation, and the name is written through that descriptor only when
# the opened file is the path's own (not a link swapped in meanwhile), this user's, with one link.
gpu_lock() {
  if [ -n "$DPMEM_GPU_LOCK_HELD" ] && kill -0 "$DPMEM_GPU_LOCK_HELD" 2>/dev/null; then return 0; fi
  gpu_lock_file=${DPMEM_GPU_LOCK:-/tmp/dpmem-gpu.lock}
  command -v flock >/dev/null 2>&1 || { echo "$1: no flock(1): running without the GPU lock" >&2; return 0; }
  if [ -L "$gpu_lock_file" ] || { [ -e "$gpu_lock_file" ] && [ ! -f "$gpu_lock_file" ]; }; then
    echo "$1: the GPU lock $gpu_lock_file is not a regular file (a link is not followed): running without it" >&2; return 0
  fi
  [ -e "$gpu_lock_file" ] || (set -C; : >"$gpu_lock_file") 2>/dev/null
  if [ -O "$gpu_lock_file" ]; then gpu_lock_mode='<>'; else gpu_lock_mode='<'; fi   # another's: lock, never write
  if ! { eval "command exec 9$gpu_lock_mode\"\$gpu_lock_file\""; } 2>/dev/null; then   # `command`: a failed redirection must not end the script
    echo "$1: cannot open the GPU lock $gpu_lock_file: running without it" >&2; return 0
  fi
  if [ -L "$gpu_lock_file" ] || [ ! -f "$gpu_lock_file" ] || ! [ "$gpu_lock_file" -ef /dev/fd/9 ]; then
    exec 9<&-   # swapped for a link between the check and the open: nothing was written
    echo "$1: the GPU lock $gpu_lock_file is not a regular file (a link is not followed): running without it" >&2; return 0
  fi
  if ! flock -n 9; then
    echo "$1: waiting for the GPU lock $gpu_lock_file (held by pid $(head -n 1 </dev/fd/9 2>/dev/null))" >&2
    flock 9 || { echo "$1: cannot lock $gpu_lock_file: running without it" >&2; return 0; }
  fi
  # the name, into our own file with one link: /dev/fd/9 reopens the inode checked above (no path
  # is looked up again), so the truncation cannot reach another file
  if [ "$gpu_lock_mode" = '<>' ] && [ -O /dev/fd/9 ] && [ "$(stat -L -c %h /dev/fd/9 2>/dev/null)" = 1 ]; then
    printf '%s %s\n' "$$" "$1" >/dev/fd/9
  fi
  DPMEM_GPU_LOCK_HELD=$$; export DPMEM_GPU_LOCK_HELD
}
