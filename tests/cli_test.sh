#!/usr/bin/env bash
# The CLI as a user meets it: exit codes, error messages that name the file
# and field, overrides, and the JSON rows' field names.
# usage: cli_test.sh path/to/shardsim repo-root
set -u
bin=$1
root=$2
bad=$root/tests/data/bad
quick=$root/scenarios/quickstart.textproto
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect_error FILE SUBSTRING...: exits 1, and stderr has every substring.
expect_error() {
  local file=$1; shift
  "$bin" memory "$bad/$file" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 1 ] || { fail "$file: exit $rc, want 1"; return; }
  for want in "$@"; do
    grep -qF -- "$want" "$tmp/err" || { fail "$file: stderr lacks '$want': $(cat "$tmp/err")"; return; }
  done
  ok
}

expect_error syntax.textproto "syntax.textproto:4:10"
expect_error unknown_field.textproto "unknown_field.textproto:9" "learning_rate"
expect_error bad_strategy.textproto "bad_strategy.textproto" "field strategies" "zero4" "unknown strategy"
expect_error rule_violation.textproto "field strategies" "s_p <= s_g" "s_p = 8, s_g = 1"
expect_error impossible_mics.textproto "field strategies" "shard_size 64"
expect_error gpus_not_nodes.textproto "field gpus" "12 GPUs"
expect_error zero_micro_batches.textproto "field micro_batches" "got 0"
expect_error unknown_model.textproto "field model" "llama-8b" "llama-7b"
expect_error unknown_platform.textproto "field platform" "dgx_z9"
expect_error missing_k.textproto "field optimizer_bytes_per_param"
expect_error bad_model_file.textproto "field model" "broken_model.textproto" "model.hidden"
expect_error too_many_gpus.textproto "field gpus" "has 2"

"$bin" help | grep -q "memory" && ok || fail "help lists no commands"
"$bin" frobnicate "$quick" >/dev/null 2>&1; [ $? -eq 2 ] && ok || fail "unknown command: want exit 2"
"$bin" memory >/dev/null 2>&1; [ $? -eq 2 ] && ok || fail "no scenario: want exit 2"
"$bin" memory "$quick" --gpus 8,x >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q -- "--gpus" "$tmp/err" && ok || fail "bad --gpus"

# Every named strategy of the quickstart, each as the user wrote it.
"$bin" memory "$quick" >"$tmp/mem" || fail "quickstart memory"
for s in ddp zero1 zero2 zero3 fsdp:FULL_SHARD fsdp:HYBRID_SHARD mics zeropp \
         paro-IGG paro-IIG paro-NIG "lins:p=1x1:g=1x1:os=8x1"; do
  grep -q "^$s " "$tmp/mem" && ok || fail "memory table lacks $s"
done
grep -q "^ddp .*OOM" "$tmp/mem" && ok || fail "ddp of LLaMA-7B must be OOM on 80 GB"

# Overrides: every combination, dashed flag names.
"$bin" volume "$quick" --strategy zero3,mics --gpus 16,64 --micro-batches 2 \
  --micro-batch-size 1 --seq-len 1024 --recompute --json "$tmp/r.json" >"$tmp/vol" \
  || fail "volume with overrides"
[ "$(grep -cE '^(zero3|mics) ' "$tmp/vol")" -eq 4 ] && ok || fail "want 4 rows: $(cat "$tmp/vol")"
python3 - "$tmp/r.json" <<'PY' && ok || fail "json rows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
need = ["strategy", "gpus", "param_bytes", "grad_bytes", "optimizer_bytes",
        "activation_bytes", "buffer_bytes", "peak_memory_bytes", "oom",
        "intra_node_bytes", "inter_node_bytes"]
assert len(rows) == 4, rows
for r in rows:
    missing = [k for k in need if k not in r]
    assert not missing, missing
    assert "step_time_s" not in r, "no engine yet: no times"
assert [r["strategy"] for r in rows] == ["zero3", "zero3", "mics", "mics"]
PY

"$bin" schedule "$quick" --strategy paro-IGG --gpus 16 >"$tmp/sched" || fail "schedule"
grep -q "REDUCE_SCATTER over 8x2, HORING" "$tmp/sched" && ok || fail "paro-IGG RS by HO-Ring"
"$bin" schedule "$quick" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "one --strategy" "$tmp/err" && ok || fail "schedule needs one point"

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
