#!/usr/bin/env bash
# One-step set-up on a fresh Debian bookworm machine (as root): install the
# Debian packages shardsim needs, build, then either run the default
# scenario or the whole test suite.
#   bash .ci/setup.sh run    # build the simulator, then the quickstart
#   bash .ci/setup.sh test   # build everything, then every test (what CI runs)
# `run` builds the `shardsim` target alone (no tests, no shardsim-hw);
# `test` builds everything. Both compile RelWithDebInfo's -O2 code without
# its debug information (a quarter of the compile time; the sanitizer job
# keeps line tables for its reports), so both give the same results. Each
# stage's wall time is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-run}
case "$what" in
  run|test) ;;
  *)
    echo "usage: bash .ci/setup.sh run|test" >&2
    exit 2
    ;;
esac

# Wall seconds of each stage (bash's microsecond clock: no tools needed),
# printed at the end, also when a stage fails.
timings=()
start() { t0=${EPOCHREALTIME//[.,]/}; }
stop() {
  local us=$((${EPOCHREALTIME//[.,]/} - t0))
  timings+=("$1 $((us / 1000000)).$((us / 100000 % 10)) s")
}
report() {
  [ ${#timings[@]} -gt 0 ] || return 0
  local line
  printf -v line '%s, ' "${timings[@]}"
  echo "setup.sh $what: ${line%, }" >&2
}
trap report EXIT

start
packages=(cmake g++ make pkg-config python3
          libabsl-dev libprotobuf-dev protobuf-compiler libgtest-dev libgmock-dev
          nlohmann-json3-dev libtomlplusplus-dev
          libsimgrid-dev libopenmpi-dev openmpi-bin)
# Test only: matplotlib (reports/regenerate and `plan --figure` draw with
# it; with its dependencies it is a third of what `run` would install
# otherwise), RapidCheck (the property tests, tests/properties), clang with
# libFuzzer (the sanitizer and fuzzing job),
# clang-format with git for the style check (.ci/format.sh), and dpkg-dev
# for the Debian package test (dpkg-shlibdeps).
[ "$what" = test ] && packages+=(python3-matplotlib
                                  librapidcheck-dev clang libfuzzer-14-dev libclang-rt-14-dev
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
stop apt

case "$what" in
  run)
    start
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
          "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" >/dev/null
    stop configure
    start
    cmake --build build -j "$(nproc)" --target shardsim
    stop build
    start
    build/shardsim run scenarios/quickstart.textproto
    stop run
    dpkg-query -W -f='${Status}' python3-matplotlib 2>/dev/null |
      grep -q "ok installed" ||
      echo "reports/regenerate and \`shardsim plan --figure\` also need" \
           "python3-matplotlib: apt-get install python3-matplotlib" >&2
    ;;
  test)
    start
    # Warnings are errors here (CMakeLists.txt: -Wall -Wextra).
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
          "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DSHARDSIM_WERROR=ON >/dev/null
    stop configure
    start
    cmake --build build -j "$(nproc)"
    stop build
    start
    bash .ci/format.sh
    python3 .ci/checkdeps.py
    # Every test but those labelled long (ctest -L long: minutes each), and
    # hw_fault, which the sanitizer job runs (the same script, under ASan
    # with the leak check).
    (cd build && ctest --output-on-failure -j "$(nproc)" -LE long -E '^hw_fault$')
    bash .ci/sanitize.sh
    stop tests
    ;;
esac
