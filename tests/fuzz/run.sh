#!/bin/sh
# Runs one fuzz target for a while: tests/fuzz/run.sh TARGET MINUTES [BUILD_DIR]
#
#   TARGET     scenario, platform, model, strategy, deepspeed, nccl_text,
#              nccl_json or hw_results (fuzz_TARGET in BUILD_DIR/tests/fuzz)
#   MINUTES    how long; "20s" for seconds (the ctest entries use that)
#   BUILD_DIR  a -DSHARDSIM_FUZZ=ON build (default: build-san)
#
# The fuzzer starts from tests/fuzz/corpus/TARGET and replays every saved
# reproducer in tests/fuzz/crashes/TARGET; neither is written to. New
# inputs go to $FUZZ_WORK/corpus and crash artifacts to $FUZZ_WORK/crashes
# (FUZZ_WORK defaults to a fresh directory under /tmp; FUZZ_FRESH=1 empties
# the corpus first). Exits non-zero on any crash, leak, timeout or memory
# blow-up, and prints libFuzzer's final exec count.
set -eu
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '2,15s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
target=$1
case $2 in
  *s) seconds=${2%s} ;;
  *) seconds=$(awk "BEGIN { printf \"%d\", $2 * 60 }") ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
build=${3:-$here/../../build-san}
fuzzer=$build/tests/fuzz/fuzz_$target
if [ ! -x "$fuzzer" ]; then
  echo "run.sh: no $fuzzer: build it with cmake --build $build --target fuzz_$target" >&2
  exit 2
fi
work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/shardsim-fuzz-$target.XXXXXX")}
if [ "${FUZZ_FRESH:-0}" = 1 ]; then rm -rf "$work/corpus"; fi
mkdir -p "$work/corpus" "$work/crashes"

set -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/crashes/"
if [ -f "$here/$target.dict" ]; then set -- "$@" -dict="$here/$target.dict"; fi
set -- "$@" "$work/corpus" "$here/corpus/$target"
if [ -d "$here/crashes/$target" ]; then set -- "$@" "$here/crashes/$target"; fi

echo "run.sh: $target for ${seconds}s; new inputs in $work/corpus," \
     "artifacts in $work/crashes" >&2
status=0
"$fuzzer" "$@" 2>"$work/log" || status=$?
tail -n 40 "$work/log" >&2
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
echo "run.sh: $target: ${execs:-?} executions in ${seconds}s (exit $status; log $work/log)"
if [ "$status" -ne 0 ]; then
  echo "run.sh: $target failed; reproducers:" $(ls "$work/crashes") >&2
  echo "run.sh: save one as tests/fuzz/crashes/$target/<what-it-is> and" \
       "replay it with $fuzzer FILE" >&2
fi
exit "$status"
