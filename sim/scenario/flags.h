// The flags both binaries (shardsim and shardsim-hw) share, defined once:
// - the scenario overrides: --model --platform --strategy --gpus
//   --micro-batches --global-batch-tokens --micro-batch-size --seq-len
//   --[no]recompute --[no]flash-attention --optimizer-bytes-per-param
//   --allow-unmodelled --megatron-args --torchtitan-config;
// - the collective sweep: --op --algorithm --min-bytes --max-bytes
//   --step-factor --channels --warmup --iters;
// - the outputs: --json --trace.
// Outside the core library, which does not depend on Abseil flags.
#ifndef SHARDSIM_SIM_SCENARIO_FLAGS_H_
#define SHARDSIM_SIM_SCENARIO_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "sim/scenario/overrides.h"
#include "sim/schema/collective.pb.h"

// For the usage texts: a string literal, so that it joins theirs.
#define SHARDSIM_SCENARIO_FLAGS_HELP                                         \
  "scenario overrides (unset: the scenario's own): --model NAME|FILE\n"      \
  "  --platform NAME|FILE --strategy S1,S2 --gpus N1,N2 --micro-batches N\n" \
  "  | --global-batch-tokens T, --micro-batch-size N --seq-len N\n"          \
  "  --[no]recompute --[no]flash-attention --optimizer-bytes-per-param K\n"  \
  "  --allow-unmodelled (framework settings not modelled: warnings)\n"       \
  "  --megatron-args FILE --torchtitan-config FILE.toml (docs/inputs.md)\n"  \
  "  (files named here are relative to the working directory)\n"

ABSL_DECLARE_FLAG(std::optional<std::string>, model);
ABSL_DECLARE_FLAG(std::optional<std::string>, platform);
ABSL_DECLARE_FLAG(std::optional<std::string>, strategy);
ABSL_DECLARE_FLAG(std::optional<std::string>, gpus);
ABSL_DECLARE_FLAG(std::optional<int>, micro_batches);
ABSL_DECLARE_FLAG(std::optional<int64_t>, global_batch_tokens);
ABSL_DECLARE_FLAG(std::optional<int>, micro_batch_size);
ABSL_DECLARE_FLAG(std::optional<int>, seq_len);
ABSL_DECLARE_FLAG(bool, recompute);
ABSL_DECLARE_FLAG(bool, flash_attention);
ABSL_DECLARE_FLAG(std::optional<double>, optimizer_bytes_per_param);
ABSL_DECLARE_FLAG(bool, allow_unmodelled);
ABSL_DECLARE_FLAG(std::optional<std::string>, megatron_args);
ABSL_DECLARE_FLAG(std::optional<std::string>, torchtitan_config);

// For the usage texts, as above.
#define SHARDSIM_SWEEP_FLAGS_HELP                                            \
  "collective sweep: --op all_gather|reduce_scatter|all_reduce|broadcast\n"  \
  "  --algorithm ring|hring|horing|torus2d|tree|direct|sharp\n"              \
  "  --min-bytes A --max-bytes B (default 1 MiB .. 1 GiB) --step-factor F\n" \
  "  --channels K (0: the platform's); measured only: --warmup W --iters N\n"

ABSL_DECLARE_FLAG(std::string, op);
ABSL_DECLARE_FLAG(std::string, algorithm);
ABSL_DECLARE_FLAG(std::string, min_bytes);
ABSL_DECLARE_FLAG(std::string, max_bytes);
ABSL_DECLARE_FLAG(double, step_factor);
ABSL_DECLARE_FLAG(int, channels);
ABSL_DECLARE_FLAG(int, warmup);
ABSL_DECLARE_FLAG(int, iters);
ABSL_DECLARE_FLAG(std::string, json);
ABSL_DECLARE_FLAG(std::string, trace);

namespace shardsim {

// The overrides the command line gives (after absl::ParseCommandLine);
// unset flags stay unset, --recompute/--norecompute included. Checking the
// values and resolving paths is ApplyOverrides'.
ScenarioOverrides OverridesFromFlags();

// The sweep the command line gives, names and byte counts parsed (errors
// name the flag) and every field checked (ValidateSweep, "command line").
absl::StatusOr<CollectiveSweep> SweepFromFlags();

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_FLAGS_H_
