#include "sim/scenario/flags.h"

#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "sim/collective/sweep.h"
#include "sim/scenario/args.h"

ABSL_FLAG(std::optional<std::string>, model, std::nullopt,
          "built-in model name, model .textproto or hf:PATH/config.json "
          "(overrides the scenario)");
ABSL_FLAG(std::optional<std::string>, platform, std::nullopt,
          "shipped platform name or platform .textproto");
ABSL_FLAG(std::optional<std::string>, strategy, std::nullopt,
          "comma-separated strategy specs (zero3,paro-IGG,lins:p=1x1:g=1x1:"
          "os=8x1,ds_config.json,...)");
ABSL_FLAG(std::optional<std::string>, gpus, std::nullopt,
          "comma-separated GPU counts");
ABSL_FLAG(std::optional<int>, micro_batches, std::nullopt,
          "micro-batches per step (--micro-batches; replaces "
          "global_batch_tokens)");
ABSL_FLAG(std::optional<int64_t>, global_batch_tokens, std::nullopt,
          "tokens per step over all GPUs (--global-batch-tokens; replaces "
          "micro_batches)");
ABSL_FLAG(std::optional<int>, micro_batch_size, std::nullopt,
          "sequences per micro-batch per GPU (--micro-batch-size)");
ABSL_FLAG(std::optional<int>, seq_len, std::nullopt,
          "sequence length (--seq-len)");
// A bool flag has no unset state, and whether it was given is private to
// Abseil; its update callback tells. Abseil also calls it once when the flag
// is registered, at static initialisation, so the marks are cleared after
// the definitions (in this file's order of initialisation).
namespace {
bool recompute_given = false;
bool flash_attention_given = false;
bool sequence_parallel_given = false;
}  // namespace
ABSL_FLAG(bool, recompute, false,
          "full activation recomputation (--recompute, --norecompute; unset: "
          "the scenario's)")
    .OnUpdate([] { recompute_given = true; });
ABSL_FLAG(bool, flash_attention, false,
          "attention scores not stored (--flash-attention, "
          "--noflash-attention; unset: the scenario's)")
    .OnUpdate([] { flash_attention_given = true; });
ABSL_FLAG(bool, sequence_parallel, false,
          "Megatron's sequence parallelism with tp (--sequence-parallel, "
          "--nosequence-parallel; unset: the scenario's)")
    .OnUpdate([] { sequence_parallel_given = true; });
namespace {
const bool kMarksCleared = [] {
  recompute_given = false;
  flash_attention_given = false;
  sequence_parallel_given = false;
  return true;
}();
}  // namespace
ABSL_FLAG(std::optional<int>, tp, std::nullopt, "tensor-parallel size");
ABSL_FLAG(std::optional<int>, pp, std::nullopt, "pipeline stages");
ABSL_FLAG(std::optional<int>, vpp, std::nullopt,
          "model chunks per pipeline stage (interleaved 1F1B)");
ABSL_FLAG(std::optional<int>, cp, std::nullopt, "context-parallel size");
ABSL_FLAG(std::optional<std::string>, pipeline_schedule, std::nullopt,
          "gpipe, 1f1b or interleaved (--pipeline-schedule; unset: 1f1b, "
          "interleaved with --vpp)");
ABSL_FLAG(std::optional<std::string>, parallel_order, std::nullopt,
          "rank order of the dimensions, innermost first (--parallel-order; "
          "Megatron's tp-cp-dp-pp unless given)");
ABSL_FLAG(std::optional<std::string>, recompute_granularity, std::nullopt,
          "none, full, selective or selective-layer:K "
          "(--recompute-granularity)");
ABSL_FLAG(std::optional<double>, optimizer_bytes_per_param, std::nullopt,
          "optimizer-state bytes per parameter (--optimizer-bytes-per-param; "
          "12 for mixed-precision Adam)");

ABSL_FLAG(bool, what_if, false,
          "simulate compositions with tp, cp or pp that the strategy's "
          "framework refuses (ZeRO-3 with DeepSpeed's pipeline, ...)");
ABSL_FLAG(bool, allow_unmodelled, false,
          "DeepSpeed keys, Megatron-LM arguments and torchtitan keys "
          "shardsim does not model (offload, NVMe, fp32 training, ...) are "
          "warnings, not errors; the JSON lists them");

ABSL_FLAG(std::optional<std::string>, megatron_args, std::nullopt,
          "a file of Megatron-LM pretrain_gpt.py arguments "
          "(--megatron-args; sets the scenario's megatron_args)");
ABSL_FLAG(std::optional<std::string>, torchtitan_config, std::nullopt,
          "a torchtitan train_configs/*.toml (--torchtitan-config; sets the "
          "scenario's torchtitan_config)");

ABSL_FLAG(std::string, op, "all_gather",
          "collective: all_gather, reduce_scatter, all_reduce, broadcast");
ABSL_FLAG(std::string, algorithm, "ring",
          "collective: ring, hring, horing, torus2d, tree, direct, sharp");
ABSL_FLAG(std::string, min_bytes, "1048576", "collective: first size");
ABSL_FLAG(std::string, max_bytes, "1073741824", "collective: last size");
ABSL_FLAG(double, step_factor, 2, "collective: size multiplier");
ABSL_FLAG(int, channels, 0, "parallel rings (0 = the platform's)");
ABSL_FLAG(int, warmup, 2,
          "shardsim-hw collective: untimed runs per size; shardsim-hw run: "
          "untimed steps first");
ABSL_FLAG(int, iters, 10, "shardsim-hw collective: timed runs per size");
ABSL_FLAG(std::string, json, "", "write results as JSON to this file");
ABSL_FLAG(std::string, trace, "", "run: write a Chrome-trace timeline here");

namespace shardsim {

ScenarioOverrides OverridesFromFlags() {
  ScenarioOverrides o;
  o.model = absl::GetFlag(FLAGS_model);
  o.platform = absl::GetFlag(FLAGS_platform);
  if (std::optional<std::string> v = absl::GetFlag(FLAGS_strategy)) {
    std::vector<std::string> specs = absl::StrSplit(*v, ',', absl::SkipEmpty());
    o.strategies = std::move(specs);
  }
  o.gpus = absl::GetFlag(FLAGS_gpus);
  o.micro_batches = absl::GetFlag(FLAGS_micro_batches);
  o.global_batch_tokens = absl::GetFlag(FLAGS_global_batch_tokens);
  o.micro_batch_size = absl::GetFlag(FLAGS_micro_batch_size);
  o.seq_len = absl::GetFlag(FLAGS_seq_len);
  (void)kMarksCleared;
  if (recompute_given) o.recompute = absl::GetFlag(FLAGS_recompute);
  if (flash_attention_given) {
    o.flash_attention = absl::GetFlag(FLAGS_flash_attention);
  }
  o.optimizer_bytes_per_param = absl::GetFlag(FLAGS_optimizer_bytes_per_param);
  o.tp = absl::GetFlag(FLAGS_tp);
  o.pp = absl::GetFlag(FLAGS_pp);
  o.vpp = absl::GetFlag(FLAGS_vpp);
  o.cp = absl::GetFlag(FLAGS_cp);
  if (sequence_parallel_given) {
    o.sequence_parallel = absl::GetFlag(FLAGS_sequence_parallel);
  }
  o.pipeline_schedule = absl::GetFlag(FLAGS_pipeline_schedule);
  o.parallel_order = absl::GetFlag(FLAGS_parallel_order);
  o.recompute_granularity = absl::GetFlag(FLAGS_recompute_granularity);
  if (absl::GetFlag(FLAGS_allow_unmodelled)) o.allow_unmodelled = true;
  if (absl::GetFlag(FLAGS_what_if)) o.what_if = true;
  o.megatron_args = absl::GetFlag(FLAGS_megatron_args);
  o.torchtitan_config = absl::GetFlag(FLAGS_torchtitan_config);
  return o;
}

absl::StatusOr<CollectiveSweep> SweepFromFlags() {
  absl::StatusOr<CollectiveOp> op = ParseEnum<CollectiveOp>(
      "op", absl::GetFlag(FLAGS_op), CollectiveOp_Parse);
  if (!op.ok()) return op.status();
  absl::StatusOr<Algorithm> algorithm = ParseEnum<Algorithm>(
      "algorithm", absl::GetFlag(FLAGS_algorithm), Algorithm_Parse);
  if (!algorithm.ok()) return algorithm.status();
  absl::StatusOr<int64_t> min =
      ParseBytes("min-bytes", absl::GetFlag(FLAGS_min_bytes));
  if (!min.ok()) return min.status();
  absl::StatusOr<int64_t> max =
      ParseBytes("max-bytes", absl::GetFlag(FLAGS_max_bytes));
  if (!max.ok()) return max.status();
  CollectiveSweep sweep;
  sweep.set_op(*op);
  sweep.set_algorithm(*algorithm);
  sweep.set_min_bytes(*min);
  sweep.set_max_bytes(*max);
  sweep.set_step_factor(absl::GetFlag(FLAGS_step_factor));
  sweep.set_channels(absl::GetFlag(FLAGS_channels));
  sweep.set_warmup(absl::GetFlag(FLAGS_warmup));
  sweep.set_iters(absl::GetFlag(FLAGS_iters));
  if (absl::Status s = ValidateSweep(sweep, "command line"); !s.ok()) {
    return s;
  }
  return sweep;
}

}  // namespace shardsim
