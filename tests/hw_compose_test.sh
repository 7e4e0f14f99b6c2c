#!/bin/bash
# shardsim-hw replays the composition of tests/composition_test.cc, ZeRO-3
# x TP8 (sequence parallel) x PP4 at 256 GPUs, on 256 CPU ranks: every
# rank runs its stage's program, each collective (TP groups, dp groups)
# carries the data check's values and is checked where it lands, and each
# pipeline send is checked byte by byte. Then one bad element is reported
# as the run's failure: the check can fail.
# usage: hw_compose_test.sh PATH/TO/shardsim-hw SOURCE_DIR
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

if "${MPIRUN[@]}" -np 256 "$HW" run --warmup 0 \
    "$SRC/tests/data/compose_256.textproto" --transport cpu \
    --json "$TMP/run.json" >"$TMP/run.log" 2>&1; then
  ok
else
  bad "run on 256 ranks"; tail -20 "$TMP/run.log"
fi
# Every rank's collectives and sends were checked, none wrong: at least
# every rank's ZeRO-3 gathers and, on 3 boundaries, each micro-batch's
# activations and their gradients.
if python3 - "$TMP/run.json" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))["rows"][0]
d = row["data_check"]
assert row["gpus"] == 256, row["gpus"]
assert int(d.get("collective_wrong", 0)) == 0, d
assert int(d.get("sent_wrong", 0)) == 0, d
# The check's elements are int64, one per 8 bytes of a buffer. The
# smallest stage holds 99,328 parameters a GPU, 2 bytes each; every rank
# checks the whole of each gather, two a micro-batch, 4 micro-batches:
# at least 256 x 4 x 2 x 99,328 x 2 / 8 elements (TP's are on top).
assert int(d["collective_elements"]) >= 256 * 4 * 2 * 99328 * 2 // 8, d
# Sends: 3 boundaries x 64 rank pairs x 4 micro-batches x 2 ways x 4 KiB.
assert int(d["sent_bytes"]) == 3 * 64 * 4 * 2 * 4096, d
PY
then ok; else bad "data check of every rank"; fi
grep -q "data check over 256 ranks" "$TMP/run.log" && ok || bad "data check line"

# The check can fail: rank 100 (stage 1) corrupts its 30th collective run;
# the run reports wrong elements and exits 3.
"${MPIRUN[@]}" -np 256 "$HW" run --warmup 0 \
    "$SRC/tests/data/compose_256.textproto" --transport cpu \
    --fault corrupt:100:30 --json "$TMP/bad.json" >"$TMP/bad.log" 2>&1
rc=$?
if [ "$rc" -eq 3 ] && python3 - "$TMP/bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["rows"][0]["data_check"]
assert int(d["collective_wrong"]) > 0, d
PY
then ok; else bad "a corrupted result: exit $rc"; tail -5 "$TMP/bad.log"; fi

echo "hw_compose: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
