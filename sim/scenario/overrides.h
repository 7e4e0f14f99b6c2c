// Command-line overrides of a scenario's fields, as both CLIs (shardsim,
// shardsim-hw) give them. Unset fields leave the scenario alone.
#ifndef SHARDSIM_SIM_SCENARIO_OVERRIDES_H_
#define SHARDSIM_SIM_SCENARIO_OVERRIDES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim {

struct ScenarioOverrides {
  std::optional<std::string> model;     // replaces model / model_def
  std::optional<std::string> platform;  // replaces platform / platform_def
  std::optional<std::vector<std::string>> strategies;  // replace them all
  std::optional<std::string> gpus;      // comma-separated GPU counts
  std::optional<int> micro_batches;
  std::optional<int> micro_batch_size;
  std::optional<int> seq_len;
  std::optional<bool> recompute;
};

// Applies the set fields to `s`. Errors name the flag (--gpus: "x" is not a
// number).
absl::Status ApplyOverrides(const ScenarioOverrides& o, Scenario* s);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_OVERRIDES_H_
