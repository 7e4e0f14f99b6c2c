#!/usr/bin/env bash
# The same question gives the same bytes: results for --jobs 1, 2 and 8,
# and --trace files from run to run.
# usage: determinism_test.sh path/to/shardsim repo-root
set -u
bin=$(realpath "$1")
root=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# Six points (three strategies x two GPU counts) of the tiny model: more
# points than two jobs, fewer than eight, so that both orders of finishing
# happen.
args=("$root/scenarios/quickstart.textproto"
      --model "$root/tests/data/tiny_model.textproto"
      --strategy zero3,zeropp,paro-IGG --gpus 16,32)
for jobs in 1 2 8; do
  "$bin" run "${args[@]}" --jobs "$jobs" --json "$tmp/jobs$jobs.json" \
    >"$tmp/jobs$jobs.txt" 2>"$tmp/err" || fail "--jobs $jobs: $(cat "$tmp/err")"
done
for jobs in 2 8; do
  cmp -s "$tmp/jobs1.json" "$tmp/jobs$jobs.json" || fail "JSON differs: --jobs 1 vs $jobs"
  cmp -s "$tmp/jobs1.txt" "$tmp/jobs$jobs.txt" || fail "table differs: --jobs 1 vs $jobs"
done
grep -q '"step_time_s"' "$tmp/jobs1.json" || fail "no step times in the JSON"

# Traces: two runs, every point's file byte-identical.
for n in 1 2; do
  mkdir -p "$tmp/trace$n"
  "$bin" run "${args[@]}" --jobs 2 --trace "$tmp/trace$n/step.json" \
    >/dev/null 2>"$tmp/err" || fail "trace run $n: $(cat "$tmp/err")"
done
count=$(ls "$tmp/trace1" | wc -l)
[ "$count" -eq 6 ] || fail "want 6 trace files, got $count"
for f in "$tmp"/trace1/*; do
  cmp -s "$f" "$tmp/trace2/$(basename "$f")" || fail "trace differs: $(basename "$f")"
done

echo "determinism: $failed failed"
[ "$failed" -eq 0 ]
