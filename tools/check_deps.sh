#!/bin/sh
# Checks that the Debian packages the build needs are present (by a file each: PKG:FILE, or
# PKG:FILE1,FILE2 when any one of them proves it). Installs the missing ones when running as root,
# else prints the exact command. With DEPS=<prefix> (packages unpacked with dpkg -x on a machine where
# nothing can be installed) it looks there instead.
missing=""
for pair in "$@"; do
  pkg=${pair%%:*}; found=""
  for hdr in $(echo "${pair#*:}" | tr ',' ' '); do
    if [ -n "$DEPS" ]; then hdr="$DEPS${hdr#/usr}"; fi
    if [ -e "$hdr" ]; then found=1; break; fi
  done
  if [ -n "$found" ]; then echo "✓ $pkg"; else missing="$missing $pkg"; fi
done
[ -z "$missing" ] && exit 0
if [ -n "$DEPS" ]; then echo "✗ missing under DEPS=$DEPS:$missing (apt-get download them and dpkg -x into it)"; exit 1; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "… installing:$missing"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$missing >/dev/null || exit 1
  echo "✓ installed:$missing"
else
  echo "✗ missing Debian packages:$missing"
  echo "  run: sudo apt-get update && sudo apt-get install -y$missing"
  exit 1
fi
