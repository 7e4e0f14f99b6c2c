#!/usr/bin/env bash
# `shardsim run` spread over MPI ranks (sim/runner/distribute.h) prints what
# the serial run prints, byte for byte (table, --breakdown, --json), and so
# does `shardsim plan`, pruning as it does serially; a
# point that fails on another rank fails the run with the serial run's
# message, printed once, and every rank exits non-zero; a rank that cannot
# even start its sweep fails every rank too; nothing hangs. Exit 77
# (skipped) without mpirun.
# usage: mpi_sweep_test.sh path/to/shardsim repo-root
set -u
bin=$(realpath "$1")
root=$(realpath "$2")
command -v mpirun >/dev/null || { echo "mpi_sweep: no mpirun, skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
# The serial runs must be serial even if this test runs inside a launcher.
unset OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMI_SIZE PMI_RANK \
  SLURM_STEP_NUM_TASKS SLURM_PROCID
# As tests/hw_cpu_test.sh: CI runs as root, on 2 cores.
MPIRUN=(timeout 120 mpirun --allow-run-as-root --oversubscribe -np 3)
scenario="$root/scenarios/quickstart.textproto"

# 15 points (5 strategies x 3 GPU counts), 5 per rank, OOM rows included.
args=(run "$scenario" --strategy zero1,zero3,zeropp,fsdp:FULL_SHARD,ddp
      --gpus 8,16,32 --micro-batches 2 --breakdown)
"$bin" "${args[@]}" --json "$tmp/serial.json" >"$tmp/serial.txt" 2>"$tmp/err" ||
  fail "serial run: $(cat "$tmp/err")"
"${MPIRUN[@]}" "$bin" "${args[@]}" --json "$tmp/mpi.json" >"$tmp/mpi.txt" \
  2>"$tmp/err" || fail "mpirun -np 3 (exit $?): $(cat "$tmp/err")"
cmp -s "$tmp/serial.txt" "$tmp/mpi.txt" || fail "stdout differs: serial vs 3 ranks"
cmp -s "$tmp/serial.json" "$tmp/mpi.json" || fail "JSON differs: serial vs 3 ranks"
grep -q '"step_time_s"' "$tmp/serial.json" || fail "no step times in the JSON"

# Every rank's exit status, through a wrapper that exits 0 itself, so that
# mpirun does not end the other ranks when the first one exits.
cat >"$tmp/rank.sh" <<EOF
#!/usr/bin/env bash
"\$@"
echo \$? >"$tmp/exit.\$OMPI_COMM_WORLD_RANK"
EOF
chmod +x "$tmp/rank.sh"
exits() { cat "$tmp"/exit.* 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';'; }

# A point that fails on rank 1 (index 4: MiCS over 2 nodes at 8 GPUs) and
# a later one on rank 0 (index 12): the serial run reports index 4.
fargs=(run "$scenario" --model "$root/tests/data/tiny_model.textproto"
       --strategy zero3,mics:shard_size=16,zero1,zeropp:hpz=16
       --gpus 8,16,32,64 --micro-batches 2)
"$bin" "${fargs[@]}" >"$tmp/fserial.txt" 2>"$tmp/fserial.err"
[ $? -eq 1 ] || fail "serial failing run: want exit 1"
want=$(grep '^shardsim: error: ' "$tmp/fserial.err")
[ -n "$want" ] || fail "serial failing run: no error message"
"${MPIRUN[@]}" "$bin" "${fargs[@]}" >"$tmp/fmpi.txt" 2>"$tmp/fmpi.err"
rc=$?
[ "$rc" -ne 124 ] || fail "failing point: mpirun hung"
[ "$rc" -ne 0 ] || fail "failing point: mpirun exited 0"
[ "$(grep -cxF -- "$want" "$tmp/fmpi.err")" -eq 1 ] ||
  fail "failing point: want the serial message once, got: $(cat "$tmp/fmpi.err")"
[ "$(grep -c '^shardsim: error: ' "$tmp/fmpi.err")" -eq 1 ] ||
  fail "failing point: more than one rank printed an error"
[ ! -s "$tmp/fmpi.txt" ] || fail "failing point: something on stdout"
rm -f "$tmp"/exit.*
"${MPIRUN[@]}" "$tmp/rank.sh" "$bin" "${fargs[@]}" >/dev/null 2>&1
[ "$(exits)" = " 3 1;" ] || fail "failing point: rank exits: $(exits) (want 3 ranks exiting 1)"

# Rank 1 cannot read its model (a file missing on its node): it never runs
# the sweep, the others do theirs, and all stop, rank 0 naming rank 1.
cat >"$tmp/one_bad.sh" <<EOF
#!/usr/bin/env bash
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then set -- "\$@" --model "$tmp/missing.textproto"; fi
"\$@"
echo \$? >"$tmp/exit.\$OMPI_COMM_WORLD_RANK"
EOF
chmod +x "$tmp/one_bad.sh"
rm -f "$tmp"/exit.*
"${MPIRUN[@]}" "$tmp/one_bad.sh" "$bin" "${args[@]}" >"$tmp/bad.txt" 2>"$tmp/bad.err"
[ $? -ne 124 ] || fail "a rank without its sweep: mpirun hung"
[ "$(exits)" = " 3 1;" ] || fail "a rank without its sweep: rank exits: $(exits) (want 3 ranks exiting 1)"
grep -q '^shardsim: error: rank 1: .*missing.textproto' "$tmp/bad.err" ||
  fail "a rank without its sweep: want rank 0 to name rank 1, got: $(cat "$tmp/bad.err")"
[ ! -s "$tmp/bad.txt" ] || fail "a rank without its sweep: something on stdout"

# `plan` under MPI prunes as the serial search does: every rank gets every
# row of a wave. With --jobs 1 on each of 2 ranks, the table and JSON are
# the serial run's with --jobs 2, pruned points and all.
pargs=(plan "$scenario" --gpus 16 --nosettings --noalgorithms)
"$bin" "${pargs[@]}" --jobs 2 --json "$tmp/plan_serial.json" \
  >"$tmp/plan_serial.txt" 2>"$tmp/err" || fail "serial plan: $(cat "$tmp/err")"
timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" \
  "${pargs[@]}" --jobs 1 --json "$tmp/plan_mpi.json" >"$tmp/plan_mpi.txt" \
  2>"$tmp/err" || fail "mpirun -np 2 plan (exit $?): $(cat "$tmp/err")"
cmp -s "$tmp/plan_serial.txt" "$tmp/plan_mpi.txt" || fail "plan table differs: serial vs 2 ranks"
cmp -s "$tmp/plan_serial.json" "$tmp/plan_mpi.json" || fail "plan JSON differs: serial vs 2 ranks"
grep -q '"pruned": [1-9]' "$tmp/plan_mpi.json" || fail "plan under MPI pruned nothing"

# Other commands run on rank 0 alone, never starting MPI.
"$bin" memory "$scenario" >"$tmp/mem_serial.txt" 2>&1 || fail "serial memory"
"${MPIRUN[@]}" "$bin" memory "$scenario" >"$tmp/mem_mpi.txt" 2>&1 ||
  fail "mpirun memory: $(cat "$tmp/mem_mpi.txt")"
cmp -s "$tmp/mem_serial.txt" "$tmp/mem_mpi.txt" || fail "memory differs under mpirun"

echo "mpi_sweep: $failed failed"
[ "$failed" -eq 0 ]
