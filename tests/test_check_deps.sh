#!/bin/sh
# test_check_deps.sh — the dependency check (tools/check_deps.sh over the Makefile's DEB_HEADERS, as
# `make deps` runs it) against fake DEPS prefixes: netlib's cblas.h (libblas-dev) alone does not prove
# libopenblas-dev, whose cblas_somatcopy the build needs; OpenBLAS's own openblas_config.h does, as
# dpkg -x unpacks it (openblas-pthread/) or as an installed variant's alternatives link (a dangling
# link does not). Exits 0 on pass, 1 on failure.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# The Makefile's list, read by make itself (a one-line makefile after it prints the variable; not
# as a sub-make of `make test`, whose flags and jobserver are not for it).
pairs=$(printf 'print-deb-headers:\n\t@echo $(DEB_HEADERS)\n' |
        MAKEFLAGS='' MFLAGS='' MAKELEVEL='' make -s --no-print-directory -f Makefile -f - print-deb-headers BUILD="$tmp/build" 2>/dev/null)
ob=$(printf '%s\n' $pairs | grep '^libopenblas-dev:')
[ -n "$ob" ] || { echo "FAIL: no libopenblas-dev entry in the Makefile's DEB_HEADERS: '$pairs'"; exit 1; }
echo "the check: $ob"

# expect NAME WANT(ok|missing): runs the check on the prefix $tmp/NAME/usr.
expect() {
    out=$(DEPS="$tmp/$1/usr" sh tools/check_deps.sh "$ob" 2>&1); rc=$?
    case $2 in
        ok) [ $rc -eq 0 ] && [ "$out" = "✓ libopenblas-dev" ] ;;
        missing) [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "^✗ missing under DEPS=$tmp/$1/usr: libopenblas-dev " &&
                 ! printf '%s\n' "$out" | grep -q "✓" ;;
    esac && { echo "ok   [$1] $2: $out"; return; }
    echo "FAIL [$1]: want $2, got exit $rc: $out"; fail=1
}

# netlib's BLAS only: a cblas.h without cblas_somatcopy (what libblas-dev's alternative links to)
inc=$tmp/netlib/usr/include/x86_64-linux-gnu
mkdir -p "$inc"
cat >"$inc/cblas-netlib.h" <<'H'
#ifndef CBLAS_H
#define CBLAS_H
void cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
#endif
H
ln -s cblas-netlib.h "$inc/cblas.h"
expect netlib missing

# OpenBLAS unpacked with dpkg -x (libopenblas-pthread-dev): its headers under openblas-pthread/
cp -R "$tmp/netlib" "$tmp/unpacked"
mkdir -p "$tmp/unpacked/usr/include/x86_64-linux-gnu/openblas-pthread"
echo '#define OPENBLAS_VERSION " OpenBLAS 0.3.21 "' >"$tmp/unpacked/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h"
expect unpacked ok

# OpenBLAS installed (any variant: pthread, openmp, serial): the alternatives link openblas_config.h
cp -R "$tmp/netlib" "$tmp/installed"
inc=$tmp/installed/usr/include/x86_64-linux-gnu
mkdir -p "$inc/openblas-openmp"
echo '#define OPENBLAS_VERSION " OpenBLAS 0.3.21 "' >"$inc/openblas-openmp/openblas_config.h"
ln -s openblas-openmp/openblas_config.h "$inc/openblas_config.h"
expect installed ok

# ... but a link left behind by a removed OpenBLAS proves nothing
cp -R "$tmp/netlib" "$tmp/dangling"
ln -s openblas-openmp/openblas_config.h "$tmp/dangling/usr/include/x86_64-linux-gnu/openblas_config.h"
expect dangling missing

[ $fail -eq 0 ] && echo "the dependency check needs OpenBLAS itself"
exit $fail
