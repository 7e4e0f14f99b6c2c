#!/usr/bin/env python3
"""Writes a100_liger_kernels.json from Liger-Kernel's published benchmark
table: RMSNorm and rotary on an A100-SXM4-80GB, each as Liger's fused
Triton kernel (shardsim's FUSED style) and as Hugging Face's eager module
(EAGER), forward and backward, for `shardsim validate`.

Liger-Kernel (https://github.com/linkedin/Liger-Kernel) keeps every
benchmark it ran in benchmark/data/all_benchmark_data.csv; its rows of
2024-09-03 (Liger 0.2.1) were taken by benchmark/scripts/
benchmark_rms_norm.py and benchmark_rope.py at the commit below: bf16
inputs, triton.testing.do_bench, the median (y_value_50) in ms.
- rms_norm: x of M = 2048 rows by H; LigerRMSNorm against a copy of
  LlamaRMSNorm. Both modules keep an fp32 weight (torch.ones), so the eager
  module's last multiply writes fp32: 2 bytes an element more than the bf16
  chain shardsim models.
- rope: q of (1, T, 32 heads, H / 32) and k of 8 heads, both transposed
  views; liger_rotary_pos_emb against transformers' apply_rotary_pos_emb.
Backward is `y.backward(dy)` (rms_norm) or `torch.autograd.grad` (rope) on
a kept graph: the gradients only.

Kept: the rows whose time grows with their size, i.e. bound by the GPU.
do_bench times each call from the host; where launching (Python, autograd,
Triton's launcher) takes longer than the kernels, the time stays flat as
the size doubles and says nothing about the kernels. A row is kept when it
takes at least 0.75 x (its size / the previous size) x the previous row's
time in its sweep; the first row of a sweep has no previous and is left
out. The "full" rows (forward + backward) repeat the others and are left
out, as is swiglu (a whole MLP, GEMMs included).

Usage: liger_a100_ops.py LIGER_GIT_DIR > a100_liger_kernels.json
"""
import csv
import io
import json
import subprocess
import sys

COMMIT = "b5672a153b7b314a367996fc6cd60a57aeda4ccc"
PATH = "benchmark/data/all_benchmark_data.csv"
STYLE = {"liger": "FUSED", "huggingface": "EAGER"}


def shape(row):
    """op, tokens, h, heads, kv_heads of a row."""
    extra = json.loads(row["extra_benchmark_config_str"])
    x = int(float(row["x_value"]))
    if row["kernel_name"] == "rms_norm":
        return "rmsnorm", extra["M"], x, None, None
    tokens = extra.get("seq_len", x)
    h = extra.get("hidden_size", x)
    return "rotary", tokens, h, extra["num_q_heads"], extra["num_kv_heads"]


def main(git_dir):
    text = subprocess.run(["git", "-C", git_dir, "show", f"{COMMIT}:{PATH}"],
                          check=True, capture_output=True, text=True).stdout
    sweeps = {}
    for line, row in enumerate(csv.DictReader(io.StringIO(text)), 2):
        if (row["kernel_name"] not in ("rms_norm", "rope") or
                row["metric_name"] != "speed" or
                row["kernel_operation_mode"] not in ("forward", "backward") or
                row["gpu_name"] != "NVIDIA A100-SXM4-80GB"):
            continue
        key = (row["kernel_name"], row["kernel_provider"],
               row["kernel_operation_mode"], row["x_name"])
        sweeps.setdefault(key, []).append((line, row))
    ops = []
    for (_, provider, mode, _), rows in sorted(sweeps.items()):
        rows.sort(key=lambda r: float(r[1]["x_value"]))
        for (_, prev), (line, row) in zip(rows, rows[1:]):
            grow = float(row["x_value"]) / float(prev["x_value"])
            ms, prev_ms = float(row["y_value_50"]), float(prev["y_value_50"])
            if ms < 0.75 * grow * prev_ms:
                continue
            op, tokens, h, heads, kv_heads = shape(row)
            out = {"op": op, "style": STYLE[provider], "pass": mode,
                   "tokens": tokens, "h": h}
            if heads is not None:
                out.update(heads=heads, kv_heads=kv_heads)
            out.update(s=ms * 1e-3, source="L1",
                       where=f"{PATH} line {line} ({row['kernel_name']}, "
                             f"{provider}, {mode}, {row['x_name']} = "
                             f"{row['x_value']}), y_value_50 = "
                             f"{row['y_value_50']} ms")
            ops.append(out)
    json.dump({
        "what": "Measured RMSNorm and rotary on an A100, fused (Liger's "
                "Triton kernels: shardsim's FUSED style) and eager (Hugging "
                "Face's modules: EAGER), forward and backward; the median "
                "time of triton.testing.do_bench. Checks of the A100 "
                "kernel model, not fitted to. Written by liger_a100_ops.py, "
                "which says which rows and how they were measured.",
        "gpu": "NVIDIA A100-SXM4-80GB (the table's gpu_name)",
        "software": "Liger-Kernel 0.2.1, bf16; torch and transformers "
                    "versions not recorded",
        "sources": [{
            "id": "L1",
            "url": f"https://github.com/linkedin/Liger-Kernel/blob/{COMMIT}/"
                   f"{PATH}",
            "how": f"benchmark/scripts/benchmark_rms_norm.py and "
                   f"benchmark_rope.py at {COMMIT[:8]}"
        }],
        "ops": ops,
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: liger_a100_ops.py LIGER_GIT_DIR")
    main(sys.argv[1])
