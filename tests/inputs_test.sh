#!/usr/bin/env bash
# Nothing the user writes is silently ignored, and the outputs read back:
# --help and usage exit codes, "did you mean" for flags, commands,
# strategies and scenario fields, flags a command does not read, a run
# from flags alone, DeepSpeed keys, Megatron-LM arguments and torchtitan
# keys not modelled (error, or warning with --allow-unmodelled), and
# --csv read back by Python's csv module equal to the JSON's rows.
# usage: inputs_test.sh path/to/shardsim repo-root
set -u
bin=$(realpath "$1")
root=$(realpath "$2")
quick=$root/scenarios/quickstart.textproto
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect RC WANT... -- ARGS: shardsim ARGS exits RC, and stdout+stderr
# has every WANT.
expect() {
  local rc_want=$1; shift
  local wants=()
  while [ "$1" != "--" ]; do wants+=("$1"); shift; done
  shift
  "$bin" "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ "$rc" -eq "$rc_want" ] || { fail "$*: exit $rc, want $rc_want: $(head -c 400 "$tmp/out")"; return; }
  for want in "${wants[@]}"; do
    grep -qF -- "$want" "$tmp/out" || { fail "$*: lacks '$want': $(head -c 400 "$tmp/out")"; return; }
  done
  ok
}

# Usage and help.
expect 2 "usage: shardsim COMMAND" --
expect 0 "usage: shardsim run" "--breakdown" "--csv" -- run --help
expect 0 "usage: shardsim plan" "--deployable" "--memory-cap" -- help plan
expect 0 "usage: shardsim memory" -- memory -h
expect 0 "commands:" -- help
expect 2 'unknown command "rnu" (did you mean "run"?)' -- rnu "$quick"
# Did you mean, and flags a command does not read.
expect 2 'unknown flag --breakdwn (did you mean "--breakdown"?)' -- run "$quick" --breakdwn
expect 2 "--breakdown is not a flag of memory" -- memory "$quick" --breakdown
expect 1 'unknown strategy (did you mean "zero3"?)' -- memory "$quick" --strategy zero-3
printf 'model: "llama-7b"\nplatform: "dgx_a100"\nstrategys: "zero3"\n' >"$tmp/typo.textproto"
expect 1 'strategys' '(did you mean "strategies"?)' -- memory "$tmp/typo.textproto"
printf 'base: "dgx_a100"\nnetwork { nics_per_nod: 4 }\n' >"$tmp/typo_platform.textproto"
expect 1 'nics_per_nod' '(did you mean "nics_per_node"?)' -- platform "$tmp/typo_platform.textproto"
# A scenario from flags alone, and what is missing named.
expect 1 "run without a scenario file needs --strategy, --gpus, --seq-len" -- run --model llama-7b --platform dgx_a100
expect 0 "zero3" "yes (80.0)" "taken as --micro-batch-size 1" -- \
  memory --model llama-7b --platform dgx_a100 --gpus 16 --strategy zero3 --seq-len 2048 --micro-batches 4

expect 0 "best first" -- plan --model llama-7b --platform dgx_a100 --gpus 16 --seq-len 2048 --micro-batches 4 --noalgorithms --nosettings --top 2
# DeepSpeed keys: modelled (ZeRO-Offload keeps no optimizer states on the
# GPU), not modelled, allowed.
cat >"$tmp/optimizer_offload.json" <<'JSON'
{"bf16": {"enabled": true},
 "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}
JSON
expect 0 "12.55    12.55     0.00" -- memory "$quick" --strategy "$tmp/optimizer_offload.json"
cat >"$tmp/offload.json" <<'JSON'
{"bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
JSON
expect 1 "not modelled: zero_optimization.offload_param.device" -- memory "$quick" --strategy "$tmp/offload.json"
"$bin" memory "$quick" --strategy "$tmp/offload.json" --allow-unmodelled --json "$tmp/w.json" >/dev/null 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -qF "warning: DeepSpeed config" "$tmp/err" &&
   python3 -c 'import json,sys; w=json.load(open(sys.argv[1]))["warnings"]; sys.exit(0 if len(w)==1 and "offload_param.device" in w[0] else 1)' "$tmp/w.json"; then
  ok
else
  fail "--allow-unmodelled: exit $rc, stderr $(cat "$tmp/err")"
fi

# Megatron-LM arguments (sim/scenario/megatron_args.h): a pipeline-only run
# from tests/data, an unknown argument named with its line and the nearest
# one, an unmodelled one an error or, allowed, a warning.
expect 0 "megatron:DDP" "16" "yes (80.0)" -- memory "$root/tests/data/megatron_pp.textproto"
printf -- '--bf16 --micro-batch-size 1 --seq-length 512\n--pipeline-model-paralel-size 2\n' >"$tmp/typo.args"
printf 'megatron_args: "typo.args"\nmodel: "llama-7b"\nplatform: "dgx_a100"\ngpus: 8\n' >"$tmp/meg.textproto"
expect 1 "field megatron_args: Megatron-LM arguments $tmp/typo.args:2: unknown argument --pipeline-model-paralel-size" \
  '(did you mean "--pipeline-model-parallel-size"?)' -- memory "$tmp/meg.textproto"
printf -- '--bf16 --micro-batch-size 1 --seq-length 512 --fp8-format hybrid\n' >"$tmp/typo.args"
expect 1 "not modelled: --fp8-format hybrid: trains in FP8" -- memory "$tmp/meg.textproto"
expect 0 "warning: Megatron-LM arguments" "--fp8-format hybrid" -- memory "$tmp/meg.textproto" --allow-unmodelled
# torchtitan configs (sim/scenario/torchtitan_config.h): a pipeline-only
# run from tests/data (its fp32 gradient reduction allowed, a warning),
# an unknown key named with its line and the nearest one, malformed TOML
# with its line and column.
expect 0 "fsdp:FULL_SHARD" "yes (80.0)" "warning: torchtitan config" "mixed_precision_reduce" -- \
  memory "$root/tests/data/torchtitan_pp.textproto"
printf '[training]\nseq_len = 512\n[parallelism]\npipeline_paralel_degree = 2\n' >"$tmp/t.toml"
printf 'torchtitan_config: "t.toml"\nplatform: "dgx_a100"\ngpus: 8\n' >"$tmp/tt.textproto"
expect 1 "field torchtitan_config: torchtitan config $tmp/t.toml:4: unknown key parallelism.pipeline_paralel_degree" \
  '(did you mean "pipeline_parallel_degree"?)' -- memory "$tmp/tt.textproto"
printf '[training]\nseq_len = = 512\n' >"$tmp/t.toml"
expect 1 "torchtitan config $tmp/t.toml:2:" "not valid TOML" -- memory "$tmp/tt.textproto"

# --csv equals --json, row by row and field by field, for each command.
check_csv() {
  local what=$1; shift
  "$bin" "$@" --json "$tmp/c.json" --csv "$tmp/c.csv" >/dev/null 2>"$tmp/err" || { fail "$what: $(cat "$tmp/err")"; return; }
  if python3 - "$tmp/c.json" "$tmp/c.csv" "$what" <<'PY'
import csv, json, sys
data = json.load(open(sys.argv[1]))
what = sys.argv[3]
def flat(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        name = prefix + k
        if isinstance(v, dict):
            out.update(flat(v, name + "."))
        elif isinstance(v, str):
            out[name] = v
        else:
            out[name] = json.dumps(v, separators=(",", ":"))
    return out
if what == "plan":
    rows = [dict(list=l, **flat(r)) for l in ("best", "presets", "pruned_presets", "pareto") for r in data.get(l, [])]
elif what == "collective":
    rows = []
    for run in data.get("runs", [data]):
        for r in run["rows"]:
            lead = {"platform": run["platform"], "op": run["op"], "algorithm": run["algorithm"],
                    "gpus": str(run["gpus"]), "channels": str(run["channels"])}
            rows.append(dict(lead, **flat(r)))
else:
    rows = [flat(r) for r in data["rows"]]
with open(sys.argv[2], newline="") as f:
    read = list(csv.DictReader(f))
assert len(read) == len(rows) and rows, (len(read), len(rows))
for got, want in zip(read, rows):
    for k, v in want.items():
        # Numbers compare as numbers: JSON may print 1e-05 where the
        # cell says 1e-05 too, but compare exactly either way.
        if got[k] != v and float(got[k]) != float(v):
            sys.exit(f"{what}: column {k}: csv {got[k]!r}, json {v!r}")
    for k in got:
        if got[k] != "" and k not in want:
            sys.exit(f"{what}: csv column {k} not in the json row")
PY
  then ok; else fail "$what: csv differs from json"; fi
}
check_csv run run "$quick" --gpus 32 --strategy zero2,zero3
check_csv memory memory "$quick"
check_csv volume volume "$quick"
check_csv collective collective --platform dgx_a100 --gpus 16 --max-bytes 16777216
check_csv plan plan "$quick" --gpus 16 --noalgorithms --nosettings --top 3

echo "inputs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
