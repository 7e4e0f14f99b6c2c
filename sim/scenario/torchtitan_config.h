// torchtitan TOML configs (its train_configs/*.toml) read into the
// scenario fields they set (docs/inputs.md). Every key is accounted for
// against torchtitan's JobConfig (TorchtitanKeys): the keys that place the
// run (model, batch, data/tensor/pipeline/context parallelism, activation
// checkpointing, precision) are read; those that cost nothing shardsim
// measures (logging, learning rate, checkpoint files, data sets) are
// accepted; the rest change what shardsim does not model and are listed
// in `unmodelled` unless at torchtitan's default; a key JobConfig does not
// have is an error with "did you mean".
#ifndef SHARDSIM_SIM_SCENARIO_TORCHTITAN_CONFIG_H_
#define SHARDSIM_SIM_SCENARIO_TORCHTITAN_CONFIG_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/scenario/megatron_args.h"

namespace shardsim {

// Reads `spec` (relative to `base_dir` unless absolute) as TOML. Errors
// start "torchtitan config PATH:LINE: " (TOML syntax errors
// "PATH:LINE:COLUMN: ") and name the key.
absl::StatusOr<FrameworkInput> ReadTorchtitanConfig(absl::string_view spec,
                                                    absl::string_view base_dir);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_TORCHTITAN_CONFIG_H_
