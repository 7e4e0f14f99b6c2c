// Command-line overrides of a scenario's fields, as both CLIs (shardsim,
// shardsim-hw) give them (sim/scenario/flags.h makes them from the
// flags). Unset fields leave the scenario alone.
#ifndef SHARDSIM_SIM_SCENARIO_OVERRIDES_H_
#define SHARDSIM_SIM_SCENARIO_OVERRIDES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim {

struct ScenarioOverrides {
  std::optional<std::string> model;     // replaces model / model_def
  std::optional<std::string> platform;  // replaces platform / platform_def
  std::optional<std::vector<std::string>> strategies;  // replace them all
  std::optional<std::string> gpus;  // comma-separated GPU counts
  // micro_batches and global_batch_tokens: either one replaces both.
  std::optional<int> micro_batches;
  std::optional<int64_t> global_batch_tokens;
  std::optional<int> micro_batch_size;
  std::optional<int> seq_len;
  std::optional<bool> recompute;
  std::optional<bool> flash_attention;
  std::optional<double> optimizer_bytes_per_param;
  std::optional<bool> allow_unmodelled;
  std::optional<bool> what_if;
  // parallelism's fields; the names as the flags take them ("1f1b",
  // "selective-layer:2").
  std::optional<int> tp, pp, vpp, cp;
  std::optional<bool> sequence_parallel;
  std::optional<std::string> pipeline_schedule;
  std::optional<std::string> parallel_order;
  std::optional<std::string> recompute_granularity;
  // Framework files (docs/inputs.md): each replaces the scenario's field of
  // the same name, and is read, as the field is, when the job is resolved.
  std::optional<std::string> megatron_args;
  std::optional<std::string> torchtitan_config;
};

// Applies the set fields to `s`. Errors name the flag (--gpus: "x" is not a
// number; --seq-len: must be >= 1, got 0).
//
// Paths in `o` are the user's, relative to the working directory, while a
// scenario's own paths are relative to the scenario file: a relative model
// or platform file (*.textproto), a Hugging Face config (hf:PATH), a
// relative DeepSpeed config (*.json strategy), Megatron-LM arguments and a
// torchtitan config are made absolute here, from the working directory.
// Names (llama-7b, dgx_a100, zero3, ...) are kept as they are.
absl::Status ApplyOverrides(const ScenarioOverrides& o, Scenario* s);

// `path` made absolute from the working directory where it is relative.
std::string FromWorkingDirectory(absl::string_view path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_OVERRIDES_H_
