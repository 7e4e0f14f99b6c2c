#!/bin/bash
# One memory model: shardsim-hw's planned peak per GPU (run --plan-only on
# CPU stand-ins: the step lowered at the MPI world size and its allocation
# plan walked, nothing replayed) equals shardsim memory's peak less the
# platform's reserve, within 1%, for every named strategy: on the
# quickstart (LLaMA-7B, 32 ranks, 4 micro-batches: the whole step both
# sides) and on the tiny model (16 ranks, 12 micro-batches: shardsim
# folds the step where the fold holds, shardsim-hw plans it whole).
# usage: hw_memory_test.sh PATH/TO/shardsim PATH/TO/shardsim-hw SOURCE_DIR
set -u
SIM="$1"
HW="$2"
SRC="$3"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
fail=0

# check NAME GPUS [overrides...]
check() {
  local name="$1" gpus="$2"
  shift 2
  if ! "$SIM" memory "$SRC/scenarios/quickstart.textproto" --gpus "$gpus" "$@" \
      --json "$TMP/$name.sim.json" >"$TMP/$name.sim.log" 2>&1; then
    echo "FAIL: shardsim memory ($name)"; cat "$TMP/$name.sim.log"; fail=1; return
  fi
  if ! "${MPIRUN[@]}" -np "$gpus" "$HW" run --plan-only --transport cpu \
      "$SRC/scenarios/quickstart.textproto" "$@" \
      --json "$TMP/$name.hw.json" >"$TMP/$name.hw.log" 2>&1; then
    echo "FAIL: shardsim-hw run --plan-only ($name)"; tail -5 "$TMP/$name.hw.log"
    fail=1; return
  fi
  if ! python3 - "$name" "$TMP/$name.sim.json" "$TMP/$name.hw.json" <<'PY'
import json, sys
name, sim, hw = sys.argv[1], *(json.load(open(f))["rows"] for f in sys.argv[2:])
named = ["ddp", "zero1", "zero2", "zero3", "fsdp:FULL_SHARD",
         "fsdp:SHARD_GRAD_OP", "fsdp:HYBRID_SHARD", "fsdp:_HYBRID_SHARD_ZERO2",
         "mics", "zeropp", "paro-IGG", "paro-IIG", "paro-NIG",
         "lins:p=1x1:g=1x1:os=8x1"]
assert [r["strategy"] for r in sim] == named, [r["strategy"] for r in sim]
assert [r["strategy"] for r in hw] == named, [r["strategy"] for r in hw]
bad = 0
for s, h in zip(sim, hw):
    want = int(s["peak_memory_bytes"]) - int(s["reserved_bytes"])
    assert int(s["reserved_bytes"]) > 0, s
    got = {int(m["planned_peak_memory_bytes"]) for m in h["rank_memory"]}
    assert len(got) == 1 and len(h["rank_memory"]) == int(s["gpus"]), h
    got = got.pop()
    off = abs(got - want) / want
    print(f"{name:10s} {s['strategy']:26s} hw planned {got:>14d} "
          f"sim peak - reserve {want:>14d}  {100 * off:.4f}%")
    bad += off > 0.01
sys.exit(1 if bad else 0)
PY
  then
    echo "FAIL: planned peaks ($name) differ from the simulator's by more than 1%"
    fail=1
  fi
}

check quickstart 32
check tiny 16 --model "$SRC/tests/data/tiny_model.textproto" --micro-batches 12

[[ $fail == 0 ]] && echo "hw memory: every planned peak is the simulator's"
exit "$fail"
