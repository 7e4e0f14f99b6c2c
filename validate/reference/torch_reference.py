#!/usr/bin/env python3
"""Reference timings of a LLaMA decoder block and its kernels, in PyTorch.

Runs on a machine with one CUDA GPU and PyTorch (no shardsim needed) and
writes one JSON file. What it measures, and why:

  blocks      forward (no_grad) and forward+backward of an eager LLaMA block
              (the implementation of validate/reference/h100_calibration.json:
              RMSNorm with the fp32 upcast of HF transformers, fused q/k/v,
              rotary by rotate_half, causal SDPA on the default backend,
              separate gate/up, SwiGLU, residuals) at several shapes: wall
              time, and every GPU kernel from torch.profiler (name, calls,
              GPU time), backward with and without .grad accumulation.
  compiled_blocks
              the same block under torch.compile (Inductor fuses the
              elementwise work): a stand-in for hand-fused kernels.
  gemm        bf16 GEMMs in nn.Linear's three layouts: forward x W^T,
              data gradient dY W, weight gradient dY^T X.
  attention   SDPA forward and forward+backward, flash and math backends.
  memory      elementwise kernels over sizes: effective bandwidth and the
              fixed cost of a kernel.
  dispatch    host time of one eager op and of one c10d NCCL call.
  adam, cross_entropy
              fused AdamW over fp32 states; fp32 cross-entropy over logits.

Timings: wall times are CUDA events around 10 runs after 3 warm-ups;
kernel times are torch.profiler's GPU time per kernel, mean of 5 runs, so
that host launch gaps of small kernels do not count.

Usage: python3 torch_reference.py OUT.json [SECTION ...] [--blocks M:B:S,...]
  SECTION: blocks, gemm, attention, memory, dispatch, adam, cross_entropy,
  compiled_blocks (default: all); --blocks replaces BLOCK_SHAPES, e.g.
  --blocks llama7b:4:512,llama7b:10:512 (what hw/README.md compares
  shardsim-hw's blocks with).
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = "cuda"
BF16 = torch.bfloat16
ITERS = 10


def timed(fn, iters=ITERS, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def kernel_times(fn, n=5, warm=3):
    """GPU time of each kernel `fn` launches, per call (torch.profiler), and
    the wall time per call: device time without host launch gaps."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / n
    kernels = {}
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        k = kernels.setdefault(e.name, [0, 0.0])
        k[0] += 1
        k[1] += getattr(e, "device_time_total", 0) or e.cuda_time_total
    rows = [{"kernel": k, "calls": c / n, "us": t / n}
            for k, (c, t) in kernels.items()]
    rows.sort(key=lambda r: -r["us"])
    return {"wall_s": wall, "kernel_s": sum(r["us"] for r in rows) / 1e6,
            "kernels": rows}


def device_s(fn, n=5):
    return kernel_times(fn, n)["kernel_s"]


# ---- the block ---------------------------------------------------------------

class RMSNorm(nn.Module):
    """HF transformers' LlamaRMSNorm: fp32 upcast, eager ops."""

    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Block(nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.h, self.heads, self.d = h, heads, h // heads
        self.norm1 = RMSNorm(h)
        self.qkv = nn.Linear(h, 3 * h, bias=False)
        self.o = nn.Linear(h, h, bias=False)
        self.norm2 = RMSNorm(h)
        self.gate = nn.Linear(h, ffn, bias=False)
        self.up = nn.Linear(h, ffn, bias=False)
        self.down = nn.Linear(ffn, h, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        r = x
        x = self.norm1(x)
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.d).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = r + self.o(a.transpose(1, 2).reshape(b, s, self.h))
        r = x
        x = self.norm2(x)
        return r + self.down(F.silu(self.gate(x)) * self.up(x))


def rope(s, d):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=DEV).float() / d))
    f = torch.outer(torch.arange(s, device=DEV).float(), inv)
    emb = torch.cat((f, f), dim=-1)
    return emb.cos().to(BF16), emb.sin().to(BF16)


MODELS = {  # h, heads, ffn
    "llama7b": (4096, 32, 11008),
    "llama13b": (5120, 40, 13824),
    "llama30b": (6656, 52, 17920),
    "llama65b": (8192, 64, 22016),
}

BLOCK_SHAPES = [  # model, b, s
    ("llama7b", 4, 512), ("llama7b", 1, 2048), ("llama7b", 10, 512),
    ("llama7b", 1, 4096), ("llama7b", 2, 2048), ("llama7b", 1, 512),
    ("llama13b", 1, 4096), ("llama13b", 10, 512),
    ("llama30b", 1, 4096), ("llama65b", 10, 512), ("llama65b", 1, 2048),
]


def make_block(name, b, s):
    h, heads, ffn = MODELS[name]
    block = Block(h, heads, ffn).to(DEV, BF16)
    x = torch.randn(b, s, h, device=DEV, dtype=BF16, requires_grad=True)
    cos, sin = rope(s, h // heads)
    return block, x, cos, sin


def time_block(name, b, s, compiled=False):
    """Wall and per-kernel times of one block. `fwdbwd` accumulates into
    .grad as a loop without zero_grad does (the calibration file's set-up);
    `fwdbwd_fresh` sets every .grad to None first, as ZeRO-3 and FSDP leave
    them."""
    block, x, cos, sin = make_block(name, b, s)
    run = torch.compile(block) if compiled else block
    dy = torch.randn_like(x)

    def fwd():
        with torch.no_grad():
            run(x, cos, sin)

    def fwdbwd():
        run(x, cos, sin).backward(dy)

    def fresh():
        for p in block.parameters():
            p.grad = None
        x.grad = None
        run(x, cos, sin).backward(dy)

    row = {"model": name, "h": block.h, "heads": block.heads,
           "ffn": block.gate.out_features, "b": b, "s": s,
           "compiled": compiled}
    row["fwd_s"] = timed(fwd)
    row["fwdbwd_s"] = timed(fwdbwd)
    row["bwd_s"] = row["fwdbwd_s"] - row["fwd_s"]
    row["fwdbwd_fresh_s"] = timed(fresh)
    row["profile"] = {"fwd": kernel_times(fwd), "fwdbwd": kernel_times(fwdbwd),
                      "fwdbwd_fresh": kernel_times(fresh)}
    del block, x, run
    torch.cuda.empty_cache()
    return row


# ---- kernels ---------------------------------------------------------------

def gemm_rows():
    rows = []
    shapes = set()
    for name in ("llama7b", "llama13b", "llama30b", "llama65b"):
        h, _, ffn = MODELS[name]
        for tokens in (2048, 4096, 5120):
            for n, k in ((3 * h, h), (h, h), (ffn, h), (h, ffn)):
                shapes.add((tokens, n, k))
    for tokens in (2048, 4096, 5120):
        shapes.add((tokens, 32000, 4096))
    for m in (64, 128, 256, 512, 1024):  # small m: tile and wave quantisation
        shapes.add((m, 4096, 4096))
        shapes.add((m, 11008, 4096))
    shapes |= {(4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 11008)}
    for (m, n, k) in sorted(shapes):
        x = torch.randn(m, k, device=DEV, dtype=BF16)
        w = torch.randn(n, k, device=DEV, dtype=BF16)
        dy = torch.randn(m, n, device=DEV, dtype=BF16)
        fwd = device_s(lambda: F.linear(x, w))
        dgrad = device_s(lambda: dy @ w)
        wgrad = device_s(lambda: dy.t() @ x)
        flops = 2.0 * m * n * k
        rows.append({"m": m, "n": n, "k": k, "fwd_s": fwd, "dgrad_s": dgrad,
                     "wgrad_s": wgrad,
                     "fwd_tflops": flops / fwd / 1e12,
                     "dgrad_tflops": flops / dgrad / 1e12,
                     "wgrad_tflops": flops / wgrad / 1e12})
        del x, w, dy
    return rows


def attention_rows():
    """SDPA kernels alone, on the backend PyTorch picks by default (cuDNN's
    fused attention on H100) and on the flash-attention-2 backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    shapes = [(16, 32, 256), (4, 32, 512), (10, 32, 512), (8, 32, 1024),
              (1, 32, 2048), (2, 32, 2048), (1, 32, 4096), (1, 32, 8192),
              (10, 40, 512), (1, 40, 4096), (1, 52, 4096), (10, 64, 512),
              (1, 64, 2048), (4, 64, 512)]
    backends = {"default": None, "flash": SDPBackend.FLASH_ATTENTION,
                "math": SDPBackend.MATH}
    for (b, heads, s) in shapes:
        for causal in (True, False):
            for backend, which in backends.items():
                if backend == "math" and (b * heads * s * s > 2 ** 30):
                    continue
                if not causal and backend != "default":
                    continue
                q, k, v = (torch.randn(b, heads, s, 128, device=DEV, dtype=BF16,
                                       requires_grad=True) for _ in range(3))
                do = torch.randn_like(q)

                def fwd():
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                def both():
                    F.scaled_dot_product_attention(
                        q, k, v, is_causal=causal).backward(do)
                try:
                    if which is None:
                        pf, pb = kernel_times(fwd), kernel_times(both)
                    else:
                        with sdpa_kernel(which):
                            pf, pb = kernel_times(fwd), kernel_times(both)
                except Exception as e:  # noqa: BLE001
                    rows.append({"b": b, "heads": heads, "s": s,
                                 "causal": causal, "backend": backend,
                                 "error": repr(e)})
                    continue
                flops = 4.0 * b * heads * s * s * 128  # QK^T + AV, not halved
                rows.append({"b": b, "heads": heads, "s": s, "d": 128,
                             "causal": causal, "backend": backend,
                             "fwd_s": pf["kernel_s"],
                             "bwd_s": pb["kernel_s"] - pf["kernel_s"],
                             "fwd_kernels": pf["kernels"],
                             "fwdbwd_kernels": pb["kernels"],
                             "fwd_tflops_full": flops / pf["kernel_s"] / 1e12})
                del q, k, v, do
    torch.cuda.empty_cache()
    return rows


def memory_rows():
    rows = []
    for elems in (2 ** 16, 2 ** 20, 2 ** 23, 2 ** 25, 2 ** 27):
        a = torch.randn(elems, device=DEV, dtype=BF16)
        b = torch.randn(elems, device=DEV, dtype=BF16)
        c = torch.empty_like(a)
        f = torch.empty(elems, device=DEV, dtype=torch.float32)
        cases = {
            "add_bf16": (lambda: torch.add(a, b, out=c), 6),
            "copy_bf16": (lambda: c.copy_(a), 4),
            "silu_bf16": (lambda: torch.nn.functional.silu(a), 4),
            "to_fp32": (lambda: f.copy_(a), 6),
            "mul_fp32": (lambda: torch.mul(f, f), 12),
        }
        for name, (fn, bytes_per) in cases.items():
            t = device_s(fn, n=20)
            rows.append({"op": name, "elements": elems, "s": t,
                         "bytes": bytes_per * elems,
                         "gbps": bytes_per * elems / t / 1e9})
        del a, b, c, f
    # Row-wise normalisation over (tokens, h): eager HF RMSNorm against the
    # fused F.rms_norm.
    for tokens, h in ((2048, 4096), (5120, 8192)):
        x = torch.randn(tokens, h, device=DEV, dtype=BF16, requires_grad=True)
        norm = RMSNorm(h).to(DEV, BF16)
        w = norm.weight
        dy = torch.randn_like(x)
        for name, fn in (("rmsnorm_eager", lambda: norm(x)),
                         ("rmsnorm_fused", lambda: F.rms_norm(x, (h,), w, 1e-6))):
            with torch.no_grad():
                p = kernel_times(fn)
            pb = kernel_times(lambda: fn().backward(dy))
            rows.append({"op": name, "tokens": tokens, "h": h,
                         "fwd_s": p["kernel_s"],
                         "bwd_s": pb["kernel_s"] - p["kernel_s"],
                         "fwd_kernels": len(p["kernels"]),
                         "fwdbwd_kernels": pb["kernels"]})
    return rows


def dispatch_rows():
    out = {}
    x = torch.zeros(1, device=DEV)
    torch.cuda.synchronize()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    host = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    out["eager_op_host_s"] = host
    out["eager_op_s"] = timed(lambda: x.add_(1), iters=n)
    try:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        dist.init_process_group("nccl", rank=0, world_size=1)
        inp = torch.zeros(1024, device=DEV, dtype=BF16)
        big = torch.zeros(1024, device=DEV, dtype=BF16)
        for name, fn in (
                ("all_gather_into_tensor",
                 lambda: dist.all_gather_into_tensor(big, inp)),
                ("reduce_scatter_tensor",
                 lambda: dist.reduce_scatter_tensor(inp, big)),
                ("all_reduce", lambda: dist.all_reduce(inp))):
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out[f"c10d_{name}_host_s"] = (time.perf_counter() - t0) / n
            torch.cuda.synchronize()
        out["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001
        out["c10d_error"] = repr(e)
    return out


def adam_rows():
    rows = []
    for n in (10 ** 6, 10 ** 7, 10 ** 8, 210575488):
        p = torch.zeros(n, device=DEV, dtype=torch.float32, requires_grad=True)
        p.grad = torch.randn_like(p)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        t = device_s(opt.step)
        rows.append({"params": n, "fused": True, "s": t,
                     "gbps_at_28B": 28 * n / t / 1e9})
        del p, opt
    torch.cuda.empty_cache()
    return rows


def cross_entropy_rows():
    rows = []
    for tokens in (2048, 4096, 5120):
        logits = torch.randn(tokens, 32000, device=DEV, dtype=BF16,
                             requires_grad=True)
        target = torch.randint(0, 32000, (tokens,), device=DEV)

        def fwd():
            with torch.no_grad():
                F.cross_entropy(logits.float(), target)
        pf = kernel_times(fwd)
        pb = kernel_times(
            lambda: F.cross_entropy(logits.float(), target).backward())
        rows.append({"tokens": tokens, "vocab": 32000, "fwd_s": pf["kernel_s"],
                     "bwd_s": pb["kernel_s"] - pf["kernel_s"],
                     "fwd_kernels": pf["kernels"],
                     "fwdbwd_kernels": pb["kernels"]})
        del logits
    return rows


def main():
    global BLOCK_SHAPES
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    out_path, wanted = args[0], []
    i = 1
    while i < len(args):
        if args[i] == "--blocks":
            if i + 1 >= len(args):
                sys.exit("--blocks: give MODEL:B:S[,...]")
            try:
                BLOCK_SHAPES = [(m, int(b), int(s_)) for m, b, s_ in
                                (x.split(":") for x in args[i + 1].split(","))]
            except ValueError:
                sys.exit(f"--blocks: \"{args[i + 1]}\" is not MODEL:B:S,...")
            for m, _, _ in BLOCK_SHAPES:
                if m not in MODELS:
                    sys.exit(f"--blocks: unknown model {m} ({', '.join(MODELS)})")
            i += 2
        else:
            wanted.append(args[i])
            i += 1
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    result = {
        "what": __doc__,
        "gpu": props.name, "sms": props.multi_processor_count,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }
    sections = [
        ("blocks", lambda: [time_block(*s) for s in BLOCK_SHAPES]),
        ("gemm", gemm_rows), ("attention", attention_rows),
        ("memory", memory_rows), ("dispatch", dispatch_rows),
        ("adam", adam_rows), ("cross_entropy", cross_entropy_rows),
        # Inductor's fused kernels: a stand-in for hand-fused norms, rotary
        # and SwiGLU (Megatron, InternEvo), last because it compiles.
        ("compiled_blocks", lambda: [time_block("llama7b", 4, 512, True),
                                     time_block("llama7b", 1, 4096, True)]),
    ]
    known = [name for name, _ in sections]
    for w in wanted:
        if w not in known:
            sys.exit(f"unknown section {w} ({', '.join(known)})")
    for name, fn in sections:
        if wanted and name not in wanted:
            continue
        t0 = time.time()
        try:
            result[name] = fn()
        except Exception as e:  # noqa: BLE001 - keep the other sections
            result[name + "_error"] = repr(e)
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
