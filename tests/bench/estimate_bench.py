#!/usr/bin/env python3
"""The estimate tier against the engine: error and speed (`shardsim estimate`).

usage: python3 tests/bench/estimate_bench.py build/shardsim [--quick]

The sweep: the quickstart (LLaMA-7B on dgx_a100) with every named strategy
at 8..1024 GPUs, and with tensor, pipeline and interleaved layouts (each with
the strategies that compose with it) at 16..256 GPUs. Every point is run
(`shardsim run`) and estimated (`shardsim estimate`); a point's error is
estimate / run - 1 of the step time. Prints the number of points, the median
and worst |error| (and which point), and the estimate's points per second:
wall time of the estimate sweeps (process start included) over their timed
points. --quick: a sixth of the sweep, for a look.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

QUICK = "scenarios/quickstart.textproto"
NAMED = ["ddp", "zero1", "zero2", "zero3", "fsdp:FULL_SHARD",
         "fsdp:SHARD_GRAD_OP", "fsdp:HYBRID_SHARD", "fsdp:_HYBRID_SHARD_ZERO2",
         "mics", "zeropp", "paro-IGG", "paro-IIG", "paro-NIG",
         "lins:p=1x1:g=1x1:os=8x1"]
# The strategies each kind of layout composes with (the rest are refused).
TP = [s for s in NAMED if not s.startswith(("paro", "lins"))]
PP = ["ddp", "zero1", "fsdp:FULL_SHARD", "fsdp:SHARD_GRAD_OP",
      "fsdp:HYBRID_SHARD"]
# (flags, strategies, GPU counts): each a sweep of `run` and `estimate`.
SWEEPS = [
    ([], NAMED, "8,16,32,64,128,256,512,1024"),
    (["--tp", "2"], TP, "16,64,256"),
    (["--tp", "8", "--sequence-parallel"], TP, "16,64,256"),
    (["--pp", "2", "--micro-batches", "8"], PP,
     "16,32,64,128,256"),
    (["--pp", "4", "--micro-batches", "16"], PP,
     "32,64,128,256"),
    (["--pp", "4", "--vpp", "2", "--micro-batches", "16"], PP,
     "32,64,128,256"),
    (["--tp", "2", "--pp", "2", "--micro-batches", "8"], PP,
     "16,32,64,128,256"),
    (["--tp", "4", "--pp", "4", "--micro-batches", "16",
      "--sequence-parallel"], PP, "32,64,128,256"),
]


def rows(shardsim, command, flags, strategies, gpus, out):
    argv = [shardsim, command, QUICK, "--strategy", ",".join(strategies),
            "--gpus", gpus, "--json", out] + flags
    t = time.time()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    wall = time.time() - t
    with open(out) as f:
        got = json.load(f)["rows"]
    return {(r["strategy"], r["gpus"]): r.get("step_time_s") for r in got
            if "step_time_s" in r}, wall


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    shardsim = sys.argv[1]
    quick = "--quick" in sys.argv[2:]
    errors = []  # (|error|, error, point)
    est_wall = 0.0
    est_points = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        for flags, strategies, gpus in SWEEPS:
            if quick:
                strategies = strategies[::6] or strategies
                gpus = gpus.split(",")[0]
            ran, _ = rows(shardsim, "run", flags, strategies, gpus, out)
            est, wall = rows(shardsim, "estimate", flags, strategies, gpus,
                             out)
            est_wall += wall
            est_points += len(est)
            for point, step in ran.items():
                e = est[point] / step - 1
                name = f"{point[0]} at {point[1]} GPUs {' '.join(flags)}"
                errors.append((abs(e), e, name.strip()))
    errors.sort()
    worst = errors[-1]
    print(f"| estimate against run, {len(errors)} points (quickstart: named "
          f"strategies 8..1024 GPUs; tp, pp, vpp, tp x pp layouts 16..256) | "
          f"median |error| {100 * statistics.median(e[0] for e in errors):.1f}%"
          f", worst {100 * worst[1]:+.1f}% ({worst[2]}) | "
          f"{est_points / est_wall:.0f} points/s ({est_points} points in "
          f"{est_wall:.1f} s, process starts included) |")


if __name__ == "__main__":
    main()
