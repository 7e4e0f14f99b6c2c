#!/bin/bash
# shardsim-hw's failure paths on the CPU transport, 4 MPI ranks: a rank that
# skips a collective run (the others wait on it: the watchdog must end the
# job) and a rank that dies before one (mpirun must end the job), in a
# `collective` sweep and in a `run` of the tiny model. Each must exit
# non-zero within a bound, say which rank and what, and leave no process
# behind. A bad --fault is refused.
# usage: hw_fault_test.sh PATH/TO/shardsim-hw SOURCE_DIR
set -u
HW="$1"
SRC="$2"
# The temp dir is in every command line: the marker the leftover check
# looks for.
TMP="$(mktemp -d /tmp/hw_fault.XXXXXX)"
trap 'pkill -9 -f "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
MPIRUN=(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 4)
WATCHDOG_S=5
BOUND_S=30  # the watchdog, mpirun's start and the run's setup, with margin
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

COLLECTIVE=(collective --platform dgx_a100 --op all_reduce --algorithm ring
            --min-bytes 1024 --max-bytes 4096 --iters 2 --warmup 1
            --transport cpu --watchdog-s "$WATCHDOG_S")
RUN=(run --warmup 0 "$SRC/scenarios/quickstart.textproto" --strategy zero3
     --model "$SRC/tests/data/tiny_model.textproto" --transport cpu
     --watchdog-s "$WATCHDOG_S")

# expect_fault NAME PATTERN... -- ARGS: runs shardsim-hw ARGS (a --json in
# $TMP marks it); passes when mpirun exits non-zero within BOUND_S, stderr
# matches every PATTERN (grep -E) and no process of the run remains.
expect_fault() {
  local name="$1"
  shift
  local patterns=()
  while [[ "$1" != "--" ]]; do patterns+=("$1"); shift; done
  shift
  local log="$TMP/$name"
  local t0 t1 rc ms
  t0=$(date +%s%N)
  "${MPIRUN[@]}" "$HW" "$@" --json "$TMP/$name.json" >"$log.out" 2>"$log.err"
  rc=$?
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  echo "$name: exit $rc after ${ms} ms"
  local why=""
  if [[ $rc == 0 ]]; then why="exit 0"; fi
  if [[ $rc == 124 ]]; then why="hung: killed by timeout 60"; fi
  if ((ms > BOUND_S * 1000)); then why="$why; took ${ms} ms > ${BOUND_S} s"; fi
  for p in "${patterns[@]}"; do
    grep -Eq -- "$p" "$log.err" || why="$why; stderr lacks /$p/"
  done
  # mpirun waits for its ranks, but allow them a moment to be reaped.
  local left=""
  for _ in 1 2 3 4 5; do
    left=$(pgrep -af -- "$TMP/$name.json") || break
    sleep 1
  done
  if [[ -n "$left" ]]; then
    why="$why; processes left: $left"
    pkill -9 -f -- "$TMP/$name.json"
  fi
  if [[ -z "$why" ]]; then
    ok
  else
    bad "$name: $why"
    tail -20 "$log.err"
  fi
}

# The same runs without a fault pass: what fails below is the fault.
if "${MPIRUN[@]}" "$HW" "${COLLECTIVE[@]}" --json "$TMP/clean.json" \
    >"$TMP/clean.log" 2>&1; then
  ok
else
  bad "collective without a fault"; tail -10 "$TMP/clean.log"
fi
if "${MPIRUN[@]}" "$HW" "${RUN[@]}" --json "$TMP/clean.json" \
    >"$TMP/clean.log" 2>&1; then
  ok
else
  bad "run without a fault"; tail -10 "$TMP/clean.log"
fi

# (d) A collective that never completes: rank 1 skips its 3rd collective run
# (the first timed one); the ranks waiting on it name what they wait on.
WD="rank [0-9]+: watchdog: no progress for $WATCHDOG_S s waiting on"
expect_fault collective_skip \
  "rank 1 skips its collective run 3" \
  "$WD (timed|checked) ALL_REDUCE RING of [0-9]+ bytes" -- \
  "${COLLECTIVE[@]}" --fault skip:1:3
expect_fault run_skip \
  "rank 3 skips its collective run 5" \
  "$WD op [0-9]+: [A-Z_]+ [A-Z0-9]+ of [0-9]+ bytes over group" -- \
  "${RUN[@]}" --fault skip:3:5

# (a) A rank dying mid-collective: rank 2 SIGKILLs itself before its 3rd
# run; mpirun names it.
DIED="process rank %d .* exited on signal 9"
expect_fault collective_die \
  "rank 2 raises SIGKILL before its collective run 3" \
  "$(printf "$DIED" 2)" -- \
  "${COLLECTIVE[@]}" --fault die:2:3
expect_fault run_die \
  "rank 1 raises SIGKILL before its collective run 5" \
  "$(printf "$DIED" 1)" -- \
  "${RUN[@]}" --fault die:1:5

# Bad specs: refused at setup (exit 1 or 2), naming --fault and the value.
for spec in bogus skip:4:1 die:1:0 kill:0:1 skip:1; do
  "${MPIRUN[@]}" "$HW" "${COLLECTIVE[@]}" --fault "$spec" \
      --json "$TMP/spec.json" >"$TMP/spec.log" 2>&1
  rc=$?
  if [[ ($rc == 1 || $rc == 2) ]] &&
      grep -Fq -- "--fault: \"$spec\"" "$TMP/spec.log"; then
    ok
  else
    bad "--fault $spec: exit $rc"; tail -5 "$TMP/spec.log"
  fi
done

echo "hw_fault: $pass passed, $fail failed"
[[ $fail == 0 ]]
