#!/usr/bin/env python3
"""Fails when a folder includes one above it in the pipeline's order.

The order, stated once (LAYERS): a folder may include its own files, the
generated schemas, and folders of earlier layers only; folders of one layer
never include each other. In the spirit of Chromium's checkdeps, over the
`#include "..."` lines of every .h, .cc and .cu file under sim/, hw/ and
validate/.

    python3 .ci/checkdeps.py [ROOT]    # ROOT: this checkout unless given;
                                       # exit 1, one line per violation
"""
import os
import re
import sys

# Earliest first. Each entry is a layer: folders that sit side by side.
LAYERS = [
    ["sim/schema"],           # the protobuf schemas (generated code)
    ["sim/base"],             # mesh, groups, link rates, names
    ["sim/model"],            # model -> layers, units, kernels
    ["sim/compute"],          # a kernel's time on a GPU
    ["sim/strategy"],         # sharding factors, how frameworks run them
    ["sim/collective"],       # one plan per collective, its estimates
    ["sim/schedule"],         # the step lowered to the schedule IR
    ["sim/memory", "sim/traffic"],  # what the IR allocates and moves
    ["sim/scenario"],         # files and flags -> a job
    ["sim/analyze"],          # a job's points resolved and lowered
    ["sim/results"],          # tables, JSON, CSV, traces
    ["sim/runner"],           # points in child processes, over MPI
    ["sim/engine"],           # SimGrid: the step replayed on the fabric
    ["sim/simulate", "sim/estimate"],  # the job driver: analyze -> engine ->
                                       # results; or -> the estimate tier
    ["sim/search", "sim/goodput"],  # `plan`'s search; goodput over many steps
    ["hw/backend.h"],         # shardsim-hw: what a backend provides
    ["hw/runtime"],           # ... runs a schedule's ranks
    ["hw/cpu", "hw/cuda"],    # ... on CPU stand-ins or GPUs
    ["hw/main.cc"],
    ["validate"],             # calibration and validation
    ["sim/cli"],              # the `shardsim` command
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """(layer index, unit) of a repository path, or None."""
    best = None
    for i, layer in enumerate(LAYERS):
        for unit in layer:
            if path == unit or path.startswith(unit + "/"):
                if best is None or len(unit) > len(best[1]):
                    best = (i, unit)
    return best


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    bad = []
    for top in ("sim", "hw", "validate"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".h", ".cc", ".cu")):
                    continue
                path = os.path.relpath(os.path.join(d, f), root)
                src = layer_of(path)
                if src is None:
                    bad.append(f"{path}: in no layer of .ci/checkdeps.py")
                    continue
                text = open(os.path.join(root, path), encoding="utf-8").read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    if not inc.startswith(("sim/", "hw/", "validate/")):
                        continue
                    dst = layer_of(inc)
                    line = text.count("\n", 0, m.start()) + 1
                    if dst is None:
                        bad.append(f"{path}:{line}: includes {inc}, in no layer")
                    elif dst[1] != src[1] and dst[0] >= src[0]:
                        bad.append(f"{path}:{line}: {src[1]} includes {inc}, "
                                   f"which is not below it ({dst[1]})")
    for b in bad:
        print(b)
    if bad:
        print(f"checkdeps: {len(bad)} include(s) against the pipeline order "
              "(.ci/checkdeps.py LAYERS)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
