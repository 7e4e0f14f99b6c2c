#!/usr/bin/env python3
"""Engine speed and memory benchmarks (targets in brackets).

usage: python3 tests/bench/engine_bench.py build/shardsim [--with-zeropp-at-scale]
                                         [--with-reports] [--with-16k]
                                         [--with-plan] [--with-3d]
                                         [--with-3d-plan] [--with-stragglers]

Prints one markdown row per benchmark: wall seconds and peak resident memory
of the largest process (shardsim runs each simulation in a child process).
Run it on an idle machine; the README quotes its numbers.
"""
import resource
import shutil
import statistics
import subprocess
import sys
import time

NAMED = ["ddp", "zero1", "zero2", "zero3", "fsdp:FULL_SHARD",
         "fsdp:SHARD_GRAD_OP", "fsdp:HYBRID_SHARD", "fsdp:_HYBRID_SHARD_ZERO2",
         "mics", "zeropp", "paro-IGG", "paro-IIG", "paro-NIG",
         "lins:p=1x1:g=1x1:os=8x1"]
GPUS = "8,16,32,64,128,256,512,1024"
PAIRS = 10  # runs of each step in the micro-batch row


def measure(argv):
    """Wall seconds and peak RSS (MB) of argv and its descendants."""
    probe = ("import resource, subprocess, sys, time\n"
             "t = time.time()\n"
             "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
             "print(time.time() - t, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
             "r.returncode)\n")
    out = subprocess.run([sys.executable, "-c", probe] + argv,
                         capture_output=True, text=True, check=True).stdout
    seconds, kb, rc = out.split()
    if int(rc) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}")
    return float(seconds), int(kb) / 1024


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    shardsim = sys.argv[1]
    at_scale = "--with-zeropp-at-scale" in sys.argv
    quick = "scenarios/quickstart.textproto"
    benches = [
        ("1 GiB ring all-gather, 4096 GPUs, dgx_a100, 8 channels [< 0.5 s]",
         [shardsim, "collective", "--platform", "dgx_a100", "--op",
          "all_gather", "--algorithm", "ring", "--gpus", "4096",
          "--min-bytes", "1073741824", "--max-bytes", "1073741824"]),
        ("LLaMA-7B ZeRO-3 step, 1 micro-batch, 1024 GPUs [< 1 s]",
         [shardsim, "run", quick, "--strategy", "zero3", "--gpus", "1024",
          "--micro-batches", "1"]),
        ("quickstart, every named strategy but zeropp, 8..1024 GPUs",
         [shardsim, "run", quick, "--gpus", GPUS, "--strategy",
          ",".join(s for s in NAMED if s != "zeropp")]),
        ("quickstart, zeropp, 8..256 GPUs",
         [shardsim, "run", quick, "--gpus", "8,16,32,64,128,256",
          "--strategy", "zeropp"]),
    ]
    if at_scale:
        for gpus in ("512", "1024"):
            benches.append((f"quickstart, zeropp, {gpus} GPUs",
                            [shardsim, "run", quick, "--gpus", gpus,
                             "--strategy", "zeropp", "--jobs", "1"]))
        # The target for qgZ: at 1024 GPUs ZeRO++ should cost no more than
        # ZeRO-3 there, the same step (4 micro-batches) otherwise.
        benches.append(("quickstart, zero3, 1024 GPUs (against zeropp's)",
                        [shardsim, "run", quick, "--gpus", "1024",
                         "--strategy", "zero3", "--jobs", "1"]))
        benches.append(("quickstart sweep, every named strategy, ZeRO++ "
                        "included, 8..1024 GPUs [< 30 s]",
                        [shardsim, "run", quick, "--gpus", GPUS,
                         "--strategy", ",".join(NAMED)]))
        # Beyond 1024 GPUs: qgZ's all-to-all across 256 and 512 nodes.
        benches.append(("quickstart sweep, every named strategy, 2048 and "
                        "4096 GPUs",
                        [shardsim, "run", quick, "--gpus", "2048,4096",
                         "--strategy", ",".join(NAMED)]))
        benches.append(("quickstart, zeropp, 16384 GPUs",
                        [shardsim, "run", quick, "--gpus", "16384",
                         "--strategy", "zeropp", "--jobs", "1"]))
    if "--with-16k" in sys.argv:
        benches.append(("LLaMA-65B ZeRO-3 step, 4 micro-batches, 16384 GPUs, "
                        "dgx_h100 [< 10 s, < 2048 MB]",
                        [shardsim, "run", quick, "--model", "llama-65b",
                         "--platform", "dgx_h100", "--strategy", "zero3",
                         "--gpus", "16384", "--micro-batch-size", "1",
                         "--jobs", "1"]))
    if "--with-3d" in sys.argv:
        # Tensor x pipeline parallelism as Megatron-LM runs it: sequence
        # parallelism, full recomputation, FlashAttention.
        three_d = ["--strategy", "zero1", "--sequence-parallel",
                   "--micro-batch-size", "1", "--seq-len", "2048",
                   "--flash-attention", "--recompute", "--jobs", "1"]
        benches.append(("GPT-3 175B, TP8 x PP8 x interleave 3, 64 dgx_a100 "
                        "GPUs, 64 micro-batches [< 30 s, < 2048 MB]",
                        [shardsim, "run", quick, "--model", "gpt3-175b",
                         "--gpus", "64", "--tp", "8", "--pp", "8", "--vpp",
                         "3", "--micro-batches", "64"] + three_d))
        # 1F1B collapsed (sim/engine/replay.h, pipelines): at 512
        # micro-batches against 64, and against the full replay.
        one_t = [shardsim, "run", quick, "--model",
                 "tests/bench/megatron_1t.textproto", "--tp", "8", "--pp",
                 "64"] + three_d
        for gpus, mbs, extra, label in (
                ("512", "64", [], ""),
                ("512", "512", [], " [< 30 s, < 2048 MB; < 1.5x the 64]"),
                ("512", "512", ["--nocollapse"], ", --nocollapse"),
                ("3072", "512", [], ", x DP6 [< 30 s, < 2048 MB]")):
            benches.append((f"Megatron 1T, TP8 x PP64, {gpus} dgx_a100 GPUs, "
                            f"{mbs} micro-batches{label}",
                            one_t + ["--gpus", gpus, "--micro-batches", mbs]
                            + extra))
    if "--with-reports" in sys.argv:
        regenerate = "reports/regenerate"
        benches.append(("reports/regenerate --quick [< 15 s]",
                        [sys.executable, regenerate, "/tmp/bench_quick",
                         "--quick", "--shardsim", shardsim]))
        benches.append(("reports/regenerate [< 45 s]",
                        [sys.executable, regenerate, "/tmp/bench_full",
                         "--shardsim", shardsim]))
    if "--with-plan" in sys.argv:
        # `shardsim plan`, pruned, every algorithm per group kind; the
        # filtered, pruned and simulated counts are in its first line.
        lins = "scenarios/paper/lins_7b.textproto"
        benches.append(("plan, quickstart (LLaMA-7B), 32 dgx_a100 GPUs",
                        [shardsim, "plan", quick, "--gpus", "32"]))
        benches.append(("plan, Lins set-up (LLaMA-7B, seq 4096, 4M tokens), "
                        "1024 a800_lins GPUs [< 60 s]",
                        [shardsim, "plan", lins, "--gpus", "1024"]))
        # The same with the default kernel style (EAGER: HF modules in
        # eager mode; the scenario runs FUSED kernels, as InternEvo does):
        # more kernels per layer, so longer bounds and simulations.
        eager = "/tmp/bench_lins_7b_eager.textproto"
        with open(lins) as src, open(eager, "w") as dst:
            dst.writelines(line for line in src
                           if not line.startswith("kernels"))
        benches.append(("plan, the Lins set-up with EAGER kernels, 1024 "
                        "a800_lins GPUs [< 60 s]",
                        [shardsim, "plan", eager, "--gpus", "1024"]))
        benches.append(("plan --deployable, the Lins set-up, 1024 a800_lins "
                        "GPUs",
                        [shardsim, "plan", lins, "--gpus", "1024",
                         "--deployable"]))
        # Stopped while bounding: the estimate's best rows of the points
        # bounded, marked estimate and incomplete (exit 0).
        benches.append(("plan --time-limit 10, the Lins set-up, 1024 "
                        "a800_lins GPUs [rows, in about 10 s]",
                        [shardsim, "plan", lins, "--gpus", "1024",
                         "--time-limit", "10"]))
    if "--with-3d-plan" in sys.argv:
        # The layouts searched with the strategies (tp, pp, vpp, cp, each
        # with what its framework runs in it), deployable points only, on
        # both cores: about 40 minutes.
        benches.append(("plan --search-parallelism --deployable, Llama-2-70B "
                        "(scenarios/llama2_70b_3d.textproto), 256 dgx_h100 "
                        "GPUs",
                        [shardsim, "plan", "scenarios/llama2_70b_3d.textproto",
                         "--search-parallelism", "--deployable",
                         "--noalgorithms", "--nosettings", "--jobs", "2",
                         "--time-limit", "3600"]))
        # A model of validate/published/models searched over the layouts
        # around the one given, deployable points only, stopped at `limit`
        # seconds with the best rows simulated by then.
        def plan_3d(model, platform, gpus, strategy, seq, tokens, limit,
                    layout):
            return [shardsim, "plan", "--model",
                    f"validate/published/models/{model}.textproto",
                    "--platform", platform, "--gpus", gpus, "--strategy",
                    strategy, "--seq-len", seq, "--global-batch-tokens",
                    tokens, "--flash-attention", "--sequence-parallel",
                    "--search-parallelism", "--deployable", "--time-limit",
                    limit] + layout
        # A 405B-class model on 16,384 GPUs, around tp 8 x pp 2 (126 blocks
        # split evenly over powers of two up to 2).
        benches.append(("plan --search-parallelism --deployable, Llama 3.1 "
                        "405B, seq 8192, 16M tokens, 16,384 dgx_h100 GPUs "
                        "[< 5 min]",
                        plan_3d("llama-3.1-405b", "dgx_h100", "16384",
                                "fsdp:FULL_SHARD", "8192", "16777216", "280",
                                ["--tp", "8", "--pp", "2"])))
        # A 530B GPT (Megatron's: 105 layers, hidden 20480, 128 heads) on
        # 4,480 A100s, 1,920 sequences of 2,048 a step, around Megatron's
        # tp 8 x pp 35 with full recomputation.
        benches.append(("plan --search-parallelism --deployable, GPT 530B, "
                        "1,920 x 2,048 tokens, 4,480 dgx_a100 GPUs [< 300 s]",
                        plan_3d("megatron-gpt-530b", "dgx_a100", "4480",
                                "zero1", "2048", "3932160", "600",
                                ["--recompute", "--tp", "8", "--pp", "35"])))
    if "--with-plan" in sys.argv and shutil.which("mpirun"):
        # Each wave spread over 2 ranks of one simulation each, against the
        # serial search one simulation at a time: the same JSON.
        plan16 = [shardsim, "plan", quick, "--gpus", "16", "--nosettings",
                  "--jobs", "1"]
        benches.append(("plan, quickstart, 16 GPUs, --nosettings, --jobs 1",
                        plan16))
        benches.append(("the same under mpirun -np 2 [faster than --jobs 1]",
                        ["mpirun", "--allow-run-as-root", "--oversubscribe",
                         "-np", "2"] + plan16))
    print("| benchmark | wall s | peak MB |")
    print("|---|---|---|")
    for name, argv in benches:
        seconds, mb = measure(argv)
        print(f"| {name} | {seconds:.2f} | {mb:.0f} |", flush=True)
    # The same step at 128 micro-batches against 4: collapsed, the cost of
    # the repeating ones is paid once (sim/engine/replay.h). Both take a
    # few tenths of a second, where a busy neighbour on a shared VM moves
    # one run by half: the medians of PAIRS runs of each, taken in turn.
    step = [shardsim, "run", quick, "--strategy", "zero3", "--gpus", "32",
            "--jobs", "1", "--micro-batches"]
    runs = {"4": [], "128": []}
    mb = 0
    for _ in range(PAIRS):
        for count, times in runs.items():
            seconds, peak = measure(step + [count])
            times.append(seconds)
            mb = max(mb, peak)
    four, many = (statistics.median(runs[c]) for c in ("4", "128"))
    print(f"| LLaMA-7B ZeRO-3, 32 GPUs: 128 micro-batches against 4 [<= 1.5x]"
          f" | {many:.2f} / {four:.2f} = {many / four:.2f}x (medians of "
          f"{PAIRS}; 128: {min(runs['128']):.2f}-{max(runs['128']):.2f}, "
          f"4: {min(runs['4']):.2f}-{max(runs['4']):.2f}) | {mb:.0f} |",
          flush=True)
    if "--with-stragglers" in sys.argv:
        stragglers(shardsim)


def median_run(argv, runs):
    """The median wall seconds of `runs` runs of argv, and their range."""
    times = [measure(argv)[0] for _ in range(runs)]
    return statistics.median(times), min(times), max(times)


def stragglers(shardsim):
    """1024-GPU steps, uniform against 8 GPUs at 80% speed
    (docs/examples/a800_lins_8_slow.textproto): as run (the slow class alone
    replayed) and with every class replayed (--nodrop-dominated). Medians of
    PAIRS runs each."""
    slow = ["--platform", "docs/examples/a800_lins_8_slow.textproto"]
    steps = (
        ("LLaMA-13B ZeRO-3 step (the Lins set-up), 1 micro-batch",
         [shardsim, "run", "scenarios/paper/lins_13b.textproto", "--strategy",
          "zero3", "--gpus", "1024", "--jobs", "1"]),
        # Collapsed when uniform or one class; every class replayed, in full.
        ("LLaMA-7B ZeRO-3 step (the quickstart's), 32 micro-batches",
         [shardsim, "run", "scenarios/quickstart.textproto", "--strategy",
          "zero3", "--gpus", "1024", "--micro-batches", "32", "--jobs", "1"]),
    )
    for step_name, step in steps:
        uniform, lo, hi = median_run(step + ["--platform", "a800_lins"], PAIRS)
        for name, extra in (("8 slow GPUs", slow),
                            ("8 slow GPUs, every class replayed",
                             slow + ["--nodrop-dominated"])):
            t, tlo, thi = median_run(step + extra, PAIRS)
            print(f"| {step_name}, 1024 a800_lins GPUs, {name}, against "
                  f"uniform [< 3x] | {t:.2f} / {uniform:.2f} = "
                  f"{t / uniform:.2f}x (medians of {PAIRS}; "
                  f"{tlo:.2f}-{thi:.2f}, uniform {lo:.2f}-{hi:.2f}) | |",
                  flush=True)


if __name__ == "__main__":
    main()
