// The scenario-override flags, defined once for both binaries (shardsim and
// shardsim-hw): --model --platform --strategy --gpus --micro-batches
// --global-batch-tokens --micro-batch-size --seq-len --[no]recompute
// --[no]flash-attention --optimizer-bytes-per-param. Outside the core
// library, which does not depend on Abseil flags.
#ifndef SHARDSIM_SIM_CLI_SCENARIO_FLAGS_H_
#define SHARDSIM_SIM_CLI_SCENARIO_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "sim/scenario/overrides.h"

// For the usage texts: a string literal, so that it joins theirs.
#define SHARDSIM_SCENARIO_FLAGS_HELP                                         \
  "scenario overrides (unset: the scenario's own): --model NAME|FILE\n"      \
  "  --platform NAME|FILE --strategy S1,S2 --gpus N1,N2 --micro-batches N\n" \
  "  | --global-batch-tokens T, --micro-batch-size N --seq-len N\n"          \
  "  --[no]recompute --[no]flash-attention --optimizer-bytes-per-param K\n"  \
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

namespace shardsim {

// The overrides the command line gives (after absl::ParseCommandLine);
// unset flags stay unset, --recompute/--norecompute included. Checking the
// values and resolving paths is ApplyOverrides'.
ScenarioOverrides OverridesFromFlags();

}  // namespace shardsim

#endif  // SHARDSIM_SIM_CLI_SCENARIO_FLAGS_H_
