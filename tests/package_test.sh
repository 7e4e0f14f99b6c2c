#!/usr/bin/env bash
# The Debian package (cpack -G DEB) holds what a fresh machine needs: it is
# unpacked into a temporary root (no system install) and its shardsim runs
# the quickstart at 16 GPUs from there, with the same rows as the build tree.
# Its library dependencies are dpkg-shlibdeps' (CMakeLists.txt).
# usage: tests/package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "package_test: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$tmp/out" >/dev/null)
deb=$(ls "$tmp"/out/shardsim_*.deb) || fail "cpack made no .deb"
dpkg-deb -f "$deb" Depends | grep -q libsimgrid || fail "Depends lacks SimGrid"
dpkg-deb -x "$deb" "$tmp/root"
R=$tmp/root/usr
(cd / && "$R/bin/shardsim" run "$R/share/shardsim/scenarios/quickstart.textproto" \
   --gpus 16 >"$tmp/packaged.txt")
(cd / && "$build/shardsim" run "$src/scenarios/quickstart.textproto" \
   --gpus 16 >"$tmp/tree.txt")
cmp "$tmp/packaged.txt" "$tmp/tree.txt" || fail "the tables differ"
echo "package_test: ok ($(basename "$deb"): $(dpkg-deb -f "$deb" Depends))"
