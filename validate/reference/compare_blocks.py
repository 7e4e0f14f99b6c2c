#!/usr/bin/env python3
"""Per-block forward and backward: shardsim-hw's replay against PyTorch.

Usage: compare_blocks.py TORCH.json HW_TRACE.json [HW_TRACE.json ...]

TORCH.json is torch_reference.py's output (its "blocks"); each HW_TRACE is
`shardsim-hw run --trace` of a scenario whose layers are LLaMA blocks
(scenarios/hw/h100_blocks.textproto). A block's time in the trace is the
sum of its compute ops (one per module under DeepSpeed-style gathering)
on rank 0, per micro-batch; micro-batch 0's backward starts fresh .grad,
later ones accumulate, as torch_reference.py's `fwdbwd_fresh` and
`fwdbwd` do. The shape (b, s) is read from the trace's first attention
kernel. Prints forward and backward per shape, and hw / torch - 1.
"""
import collections
import json
import sys


def hw_blocks(path):
    events = json.load(open(path))["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("pid") == 0
           and e.get("tid") == 1 and "kernel_list" in e.get("args", {})
           and " block " in " " + e["name"] + " "]
    shape = None
    for e in ops:
        for k in e["args"]["kernel_list"]:
            if "attention" in k:
                a = k["attention"]
                shape = (int(a["batch"]), int(a["seq"]))
                break
        if shape:
            break
    t = collections.defaultdict(float)  # (phase, mb, block) -> seconds
    for e in ops:
        words = e["name"].split()
        phase, block = words[0], int(words[2])
        t[(phase, e["args"]["micro_batch"], block)] += e["dur"] * 1e-6
    def mean(phase, mb):
        v = [s for (p, m, _), s in t.items() if p == phase and m == mb]
        return sum(v) / len(v) if v else float("nan")
    return shape, {"fwd": mean("forward", 0), "bwd_fresh": mean("backward", 0),
                   "bwd": mean("backward", 1)}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    torch = {(r["b"], r["s"]): r for r in json.load(open(sys.argv[1]))["blocks"]
             if r["model"] == "llama7b" and not r.get("compiled")}
    print(f"{'shape':>8} {'what':>10} {'torch ms':>9} {'hw ms':>8} {'error':>7}")
    for path in sys.argv[2:]:
        shape, hw = hw_blocks(path)
        r = torch.get(shape)
        if r is None:
            sys.exit(f"{path}: no torch block at b={shape[0]} s={shape[1]}")
        ref = {"fwd": r["fwd_s"], "bwd": r["bwd_s"],
               "bwd_fresh": r["fwdbwd_fresh_s"] - r["fwd_s"]}
        for what in ("fwd", "bwd", "bwd_fresh"):
            print(f"{shape[0]:>3}x{shape[1]:<4} {what:>10} {ref[what]*1e3:9.3f} "
                  f"{hw[what]*1e3:8.3f} {hw[what]/ref[what]-1:+7.1%}")


if __name__ == "__main__":
    main()
