// A scenario's framework files (megatron_args, torchtitan_config) merged
// into the scenario: each file sets the fields it determines, and the
// scenario may give the rest, or the same values, but not others.
#ifndef SHARDSIM_SIM_SCENARIO_FRAMEWORK_INPUTS_H_
#define SHARDSIM_SIM_SCENARIO_FRAMEWORK_INPUTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim {

// Reads the files `scenario` names (paths relative to `base_dir`) and
// sets the fields they give. A field the scenario sets otherwise is an
// error naming it, both values and the file ("PATH: field parallelism.pp:
// ..."), as is a model given in both. Settings the files have that
// shardsim does not model are an error naming them, unless the scenario
// allows them (allow_unmodelled), when they go to `warnings`.
absl::Status ApplyFrameworkInputs(absl::string_view path,
                                  absl::string_view base_dir,
                                  Scenario* scenario,
                                  std::vector<std::string>* warnings);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_FRAMEWORK_INPUTS_H_
