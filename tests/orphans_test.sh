#!/usr/bin/env bash
# Nothing of a run outlives it: after SIGTERM, SIGINT or a timeout of
# `shardsim run`, none of its simulation children remains.
# usage: orphans_test.sh path/to/shardsim repo-root
set -u
bin=$(realpath "$1")
root=$(realpath "$2")
failed=0
# A run of several seconds (every named strategy at 1024 GPUs, two
# children at a time, every node's network flows run: 8 s; with network
# symmetry the whole sweep takes under 1 s, which a timeout of 2 s would
# never cut short); the marker finds its processes, children included (a
# forked child keeps its parent's command line). The scenario is a copy
# of the quickstart under a name of this run's own, so that the marker
# never finds another test's shardsim running the quickstart at the same
# time (ctest -j), let alone kills it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
marker="$tmp/orphans_quickstart.textproto"
cp "$root/scenarios/quickstart.textproto" "$marker"
args=(run "$marker" --gpus 1024 --jobs 2 --network_symmetry=false)
left() { pgrep -f -- "$bin run $marker --gpus 1024" | wc -l; }

for sig in TERM INT; do
  # A background job of a script starts with SIGINT ignored; a user's
  # Ctrl-C reaches a process that does not ignore it.
  env --default-signal=INT "$bin" "${args[@]}" >/dev/null 2>&1 &
  parent=$!
  for _ in $(seq 50); do
    [ "$(pgrep -P "$parent" | wc -l)" -ge 1 ] && break
    sleep 0.1
  done
  [ "$(pgrep -P "$parent" | wc -l)" -ge 1 ] || { echo "FAIL: SIG$sig: no child started"; failed=$((failed + 1)); }
  kill -"$sig" "$parent"
  wait "$parent" 2>/dev/null
  sleep 0.5
  n=$(left)
  [ "$n" -eq 0 ] || { echo "FAIL: SIG$sig: $n processes left"; failed=$((failed + 1)); pkill -9 -f -- "$bin run $marker --gpus 1024"; }
done

timeout 2 "$bin" "${args[@]}" >/dev/null 2>&1
sleep 0.5
n=$(left)
[ "$n" -eq 0 ] || { echo "FAIL: timeout: $n processes left"; failed=$((failed + 1)); pkill -9 -f -- "$bin run $marker --gpus 1024"; }

echo "orphans: $failed failed"
[ "$failed" -eq 0 ]
