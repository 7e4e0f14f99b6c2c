#!/usr/bin/env python3
"""Exhaustive and pruned plans agree across layouts, on cases larger than
tests/search_test.cc's (the estimate orders the work, the bound prunes).

usage: python3 tests/bench/plan_agree_bench.py build/shardsim

Each case is searched twice with --search-parallelism: --exhaustive (every
point that fits simulated) and pruned. They must name the same best point
and the same Pareto front, and the pruned search's pruned and simulated
points must add up to the exhaustive one's simulated. Prints a markdown row
per case (points, pruned, both wall times) and exits 1 on a disagreement.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

TINY = "tests/data/tiny_model.textproto"
QUICK = "scenarios/quickstart.textproto"
# (name, flags): the tiny model (2 blocks) in sequences of 64, every
# layout plan --search-parallelism tries (tp, pp, vpp, cp with the rest).
CASES = [
    ("tiny model, 32 dgx_a100 GPUs, 2^13 tokens a step",
     ["--gpus", "32", "--global-batch-tokens", "8192"]),
    ("tiny model, 64 dgx_a100 GPUs, 2^14 tokens a step",
     ["--gpus", "64", "--global-batch-tokens", "16384"]),
]
COMMON = [QUICK, "--model", TINY, "--seq-len", "64", "--micro-batch-size",
          "2", "--search-parallelism", "--noalgorithms", "--top", "100000"]


def plan(shardsim, flags, out, exhaustive):
    argv = [shardsim, "plan"] + COMMON + flags + ["--json", out]
    if exhaustive:
        argv.append("--exhaustive")
    t = time.time()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    wall = time.time() - t
    with open(out) as f:
        return json.load(f), wall


def name(row):
    """The point's name as far as the JSON tells it apart."""
    return json.dumps([row["strategy"], row.get("settings", {})],
                      sort_keys=True)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    shardsim = sys.argv[1]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        for title, flags in CASES:
            every, t_every = plan(shardsim, flags, out, True)
            some, t_some = plan(shardsim, flags, out, False)
            agree = (name(every["best"][0]) == name(some["best"][0])
                     and [name(r) for r in every["pareto"]]
                     == [name(r) for r in some["pareto"]]
                     and some["pruned"] + some["simulated"]
                     == every["simulated"])
            bad += not agree
            print(f"| plan --search-parallelism, {title}: exhaustive against "
                  f"pruned | {'agree' if agree else 'DISAGREE'} | "
                  f"{every['points']} points, {some['pruned']} pruned; "
                  f"{t_every:.1f} s exhaustive, {t_some:.1f} s pruned |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
