#!/bin/bash
# shardsim-hw on the CPU transport, MPI ranks on this machine. Every
# algorithm x op runs data-checked on 4 ranks (2 nodes of 2: the two
# levels of 2 DGX nodes; each rank loads CUDA's libraries, about a second
# of CPU, so a quarter of the ranks is most of CI's time on 2 cores saved);
# a scenario step replays on 16 ranks (2 nodes of 8); a wrong world size is
# refused.
# usage: hw_cpu_test.sh PATH/TO/shardsim-hw SOURCE_DIR
set -u
HW="$1"
SRC="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# rows_ok JSON N: a CollectiveResults with N rows, each data-checked with
# no wrong element, and the transport that ran it.
rows_ok() {
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = r["rows"]
assert len(rows) == int(sys.argv[2]), len(rows)
assert all(int(x["checked"]) > 0 and int(x["wrong"]) == 0 for x in rows), rows
assert r["measured"]["transport"] == "cpu", r.get("measured")
PY
}

# Every algorithm x op; 1000..64000 B by 4: 125, 500, 2000, 8000 int64
# elements, the first not divisible by 4 ranks. dgx_a100 has SHARP.
for alg in ring hring horing torus2d tree direct sharp; do
  for op in all_gather reduce_scatter all_reduce broadcast; do
    out="$TMP/$alg.$op"
    if "${MPIRUN[@]}" -np 4 "$HW" collective --platform dgx_a100 --op "$op" \
        --gpus-per-node 2 --algorithm "$alg" --min-bytes 1000 --max-bytes 64000 \
        --step-factor 4 --iters 2 --warmup 1 --transport cpu \
        --json "$out.json" >"$out.log" 2>&1 &&
        rows_ok "$out.json" 4 && grep -q '#wrong' "$out.log" &&
        grep -q 'Out of bounds values : 0 OK' "$out.log"; then
      ok
    else
      bad "collective $alg $op"; tail -5 "$out.log"
    fi
  done
done

# Powers of two, 1 KiB .. 64 KiB, and the table's rows.
if "${MPIRUN[@]}" -np 16 "$HW" collective --platform dgx_a100 --op all_reduce \
    --algorithm hring --min-bytes 1024 --max-bytes 65536 --iters 2 \
    --warmup 1 --transport cpu --json "$TMP/p2.json" >"$TMP/p2.log" 2>&1 &&
    rows_ok "$TMP/p2.json" 7 && grep -Eq '^ +65536 +8192 +int64' "$TMP/p2.log"; then
  ok
else
  bad "collective powers of two"; tail -5 "$TMP/p2.log"
fi

# One training step of zero3 on the tiny model, replayed.
if "${MPIRUN[@]}" -np 16 "$HW" run --warmup 0 "$SRC/scenarios/quickstart.textproto" \
    --strategy zero3 --model "$SRC/tests/data/tiny_model.textproto" \
    --transport cpu --json "$TMP/run.json" --trace "$TMP/trace.json" \
    >"$TMP/run.log" 2>&1 &&
    grep -q '"step_time_s"' "$TMP/run.json" &&
    grep -q '"strategy": "zero3"' "$TMP/run.json" &&
    grep -q '"traceEvents"' "$TMP/trace.json" &&
    grep -q '"backend"' "$TMP/run.json.env.json"; then
  ok
else
  bad "run zero3"; tail -5 "$TMP/run.log"
fi
# The trace holds every rank's measured times: 16 processes, each with the
# same collectives, each slice inside the measured step.
if python3 - "$TMP/trace.json" <<'PY'
import collections, json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
slices = [e for e in events if e.get("ph") == "X"]
per_rank = collections.Counter(e["pid"] for e in slices if "bytes" in e["args"])
assert sorted(per_rank) == list(range(16)), per_rank
assert len(set(per_rank.values())) == 1, per_rank
assert all(e["dur"] >= 0 for e in slices)
PY
then ok; else bad "trace per rank"; fi
# The allocation plan, reported per rank without device memory: every
# rank's plan holds at least its model states, 16 bytes a parameter over
# 16 ranks = psi = 2,106,624 bytes (tests/allocation_test.cc derives psi).
if python3 - "$TMP/run.json" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))["rows"][0]
mem = row["rank_memory"]
assert [m.get("rank", 0) for m in mem] == list(range(16)), mem
for m in mem:
    assert int(m["planned_peak_memory_bytes"]) > 2106624, m
    assert "measured_peak_memory_bytes" not in m, m
PY
then ok; else bad "run reports the allocation plan"; fi

# run takes every override shardsim run takes (sim/scenario/flags.h),
# and its command-line paths are the working directory's: the scenario is
# elsewhere, --model is relative. 2 ranks; 2 sequences of 64 tokens, one
# micro-batch, with and without flash attention.
mkdir -p "$TMP/scen"
cp "$SRC/scenarios/quickstart.textproto" "$TMP/scen/q.textproto"
for fa in --flash-attention --noflash-attention; do
  if (cd "$SRC" && "${MPIRUN[@]}" -np 2 "$HW" run --warmup 0 "$TMP/scen/q.textproto" \
      --strategy zero3 --model tests/data/tiny_model.textproto \
      --seq-len 64 --micro-batch-size 2 --micro-batches 1 $fa \
      --transport cpu --json "$TMP/o$fa.json" >"$TMP/o$fa.log" 2>&1); then
    ok
  else
    bad "run with overrides $fa"; tail -5 "$TMP/o$fa.log"
  fi
done
if python3 - "$TMP/o--flash-attention.json" "$TMP/o--noflash-attention.json" <<'PY'
import json, sys
on, off = (json.load(open(f))["rows"][0] for f in sys.argv[1:])
for r in (on, off):
    assert r["gpus"] == 2, r
    # 2 sequences x 64 tokens x 1 micro-batch per GPU per step.
    t = r["tokens_per_gpu_per_s"] * r["step_time_s"]
    assert abs(t - 2 * 64) < 1e-6 * t, t
assert int(on["activation_bytes"]) < int(off["activation_bytes"]), (on, off)
PY
then ok; else bad "run overrides' effects"; fi
# Bad values name the flag; --gpus other than the world size is refused.
if "${MPIRUN[@]}" -np 2 "$HW" run --warmup 0 "$TMP/scen/q.textproto" --strategy zero3 \
    --model "$SRC/tests/data/tiny_model.textproto" --seq-len 0 \
    --transport cpu >"$TMP/e.log" 2>&1; then
  bad "--seq-len 0 accepted"
elif grep -q 'shardsim-hw: error: rank 0: --seq-len: must be >= 1' "$TMP/e.log"; then
  ok
else
  bad "--seq-len 0: unclear error"; cat "$TMP/e.log"
fi
if "${MPIRUN[@]}" -np 2 "$HW" run --warmup 0 "$TMP/scen/q.textproto" --strategy zero3 \
    --model "$SRC/tests/data/tiny_model.textproto" --gpus 4 \
    --transport cpu >"$TMP/g.log" 2>&1; then
  bad "--gpus 4 on 2 ranks accepted"
elif grep -q 'shardsim-hw: error: rank 0: --gpus: the GPU count is the MPI world size, 2' "$TMP/g.log"; then
  ok
else
  bad "--gpus 4: unclear error"; cat "$TMP/g.log"
fi

# Refusal: 12 ranks are not whole nodes of 8.
if "${MPIRUN[@]}" -np 12 "$HW" collective --platform dgx_a100 \
    --gpus-per-node 8 --transport cpu >"$TMP/r.log" 2>&1; then
  bad "12 ranks with --gpus-per-node 8 accepted"
elif grep -q 'shardsim-hw: error: rank 0: the MPI world has 12 ranks, which is not whole nodes of 8' "$TMP/r.log"; then
  ok
else
  bad "12 ranks: unclear error"; cat "$TMP/r.log"
fi

# Refusal: an algorithm the plan cannot run errors cleanly, not a hang.
if "${MPIRUN[@]}" -np 16 "$HW" collective --platform cloud_a100 \
    --algorithm sharp --op all_reduce --transport cpu >"$TMP/s.log" 2>&1; then
  bad "sharp on a platform without SHARP accepted"
elif grep -q 'shardsim-hw: error: rank 0: .*SHARP' "$TMP/s.log"; then
  ok
else
  bad "sharp refusal: unclear error"; cat "$TMP/s.log"
fi

# Refusal: nccl without a GPU or without the CUDA backend.
if "${MPIRUN[@]}" -np 2 env CUDA_VISIBLE_DEVICES= "$HW" collective \
    --platform dgx_a100 --transport nccl >"$TMP/n.log" 2>&1; then
  bad "nccl without a GPU accepted"
elif grep -q 'shardsim-hw: error: rank 0: --transport nccl' "$TMP/n.log"; then
  ok
else
  bad "nccl refusal: unclear error"; cat "$TMP/n.log"
fi

echo "hw: $pass passed, $fail failed"
[[ $fail == 0 ]]
