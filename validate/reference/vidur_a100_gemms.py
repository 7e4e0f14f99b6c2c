#!/usr/bin/env python3
"""Writes a100_gemm_vidur_llm_shapes.json from Microsoft Vidur's A100
profiling tables: the fit set of the A100 GEMM model.

Vidur (https://github.com/microsoft/vidur) profiles each layer of eight
LLMs on an A100 80GB: torch.nn.functional.linear in fp16 (x[m,k] @ W[n,k]^T,
cuBLAS through ATen), 20 repeats under torch.profiler, the layer's GPU
kernel time summed (vidur/profiling/mlp/mlp_wrapper.py). Its mlp.csv gives
min, max, mean, median and std in ms for the four projections of a
decoder layer at each token count m and tensor-parallel degree t:

  attn_pre_proj   n = (heads + 2 kv_heads) x head_dim / t, k = hidden
  attn_post_proj  n = hidden, k = heads x head_dim / t
  mlp_up_proj     n = (2 if gated else 1) x ffn / t, k = hidden
  mlp_down_proj   n = hidden, k = ffn / t

Kept: the token counts a training micro-batch has, m = 2048, 3072 and 4096
in every file (the largest multiples of 1024 the six other files reach)
and 8192, 12288 and 16384 in the two Llama-3 files, which go further.
Where a file repeats an (m, t) row, the median of the rows' medians.

Usage: vidur_a100_gemms.py VIDUR_GIT_DIR > a100_gemm_vidur_llm_shapes.json
(VIDUR_GIT_DIR: a clone holding the commit below; read with git show).
"""
import csv
import io
import json
import statistics
import subprocess
import sys

COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"
BASE = "data/profiling/compute/a100/"
MODELS = [
    "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf",
    "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B",
    "codellama/CodeLlama-34b-Instruct-hf", "internlm/internlm-20b",
    "Qwen/Qwen-72B", "microsoft/phi-2"
]
TOKENS = [2048, 3072, 4096]
LONG_TOKENS = [8192, 12288, 16384]  # Llama-3 files only


def shapes(row, tp):
    heads, kv = int(row["n_head"]), int(row["n_kv_head"])
    hidden, ffn = int(row["n_embd"]), int(row["n_expanded_embd"])
    head_dim = hidden // heads
    up = (2 if row["use_gated_mlp"] == "True" else 1) * ffn
    return {
        "attn_pre_proj": ((heads + 2 * kv) * head_dim // tp, hidden),
        "attn_post_proj": (hidden, heads * head_dim // tp),
        "mlp_up_proj": (up // tp, hidden),
        "mlp_down_proj": (hidden, ffn // tp),
    }


def main(git_dir):
    sources, gemm = [], []
    for i, model in enumerate(MODELS, 1):
        path = BASE + model + "/mlp.csv"
        text = subprocess.run(["git", "-C", git_dir, "show",
                               f"{COMMIT}:{path}"], check=True,
                              capture_output=True, text=True).stdout
        rows = list(csv.DictReader(io.StringIO(text)))
        sid = f"V{i}"
        sources.append({
            "id": sid, "model": model,
            "url": f"https://github.com/microsoft/vidur/blob/{COMMIT}/{path}"
        })
        wanted = TOKENS + (LONG_TOKENS if "Llama-3" in model else [])
        groups = {}
        for line, row in enumerate(rows, 2):
            key = (int(row["num_tokens"]),
                   int(row["num_tensor_parallel_workers"]))
            if key[0] in wanted:
                groups.setdefault(key, []).append((line, row))
        for (m, tp), found in sorted(groups.items(), key=lambda g: (g[0][1],
                                                                     g[0][0])):
            for op, (n, k) in shapes(found[0][1], tp).items():
                ms = statistics.median(
                    float(r[f"time_stats.{op}.median"]) for _, r in found)
                lines = ",".join(str(line) for line, _ in found)
                gemm.append({
                    "m": m, "n": n, "k": k,
                    "tflops": round(2 * m * n * k / (ms * 1e-3) / 1e12, 2),
                    "source": sid,
                    "where": f"line {lines} (num_tokens={m}, "
                             f"num_tensor_parallel_workers={tp}), "
                             f"time_stats.{op}.median = {ms} ms"
                })
    json.dump({
        "what": "Measured A100 GEMMs of LLM layers: Microsoft Vidur's "
                "profiling of torch.nn.functional.linear (x[m,k] @ "
                "W[n,k]^T, cuBLAS through ATen) in fp16 on an A100 80GB, "
                "the four projections of a decoder layer of eight LLMs at "
                "tensor-parallel degrees 1-8; tflops = 2 m n k over the "
                "median of 20 repeats (the layer's GPU kernel time from "
                "torch.profiler). fp16 and bf16 have the same A100 "
                "tensor-core rate (312 TFLOP/s dense). The fit set of "
                "platforms/gpus/a100_sxm4_80gb.textproto's GEMM model. "
                "Written by vidur_a100_gemms.py, which says which rows.",
        "gpu": "NVIDIA A100 80GB (Vidur's folder 'a100'; its docs list "
               "both the PCIe and the SXM part; which one was profiled is "
               "not stated)",
        "software": "not recorded in the tables (sarathi-serve's "
                    "environment, torch and CUDA versions not stated)",
        "peak_bf16_dense_flops": 312e12,
        "sources": sources,
        "gemm": gemm,
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: vidur_a100_gemms.py VIDUR_GIT_DIR")
    main(sys.argv[1])
