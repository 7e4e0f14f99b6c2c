#!/usr/bin/env bash
# One-step set-up on a fresh Debian bookworm machine (as root): install the
# Debian packages shardsim needs, build, then either run the default
# scenario or the whole test suite.
#   bash .ci/setup.sh run    # build, then the quickstart scenario
#   bash .ci/setup.sh test   # build, then every test (what CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-run}

packages=(cmake g++ make pkg-config python3 python3-matplotlib
          libabsl-dev libprotobuf-dev protobuf-compiler libgtest-dev libgmock-dev
          libsimgrid-dev libopenmpi-dev openmpi-bin)
# Test only: RapidCheck (the property tests, tests/properties), clang with
# libFuzzer (the sanitizer and fuzzing job),
# clang-format with git for the style check (.ci/format.sh), and dpkg-dev
# for the Debian package test (dpkg-shlibdeps).
[ "$what" = test ] && packages+=(librapidcheck-dev clang libfuzzer-14-dev libclang-rt-14-dev
                                  clang-format git dpkg-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"

case "$what" in
  run)
    build/shardsim run scenarios/quickstart.textproto
    ;;
  test)
    bash .ci/format.sh
    (cd build && ctest --output-on-failure -j "$(nproc)")
    bash .ci/sanitize.sh
    ;;
  *)
    echo "usage: bash .ci/setup.sh run|test" >&2
    exit 2
    ;;
esac
