// Megatron-LM argument files: pretrain_gpt.py's command-line arguments,
// written as a shell would take them, read into the scenario fields they
// set (docs/inputs.md). Every argument is accounted for against
// Megatron-LM's megatron/training/arguments.py (MegatronArgumentNames):
// those that place the run (parallelism, batch, recomputation, attention,
// precision, optimizer sharding, the model's shape) are read; those that
// cost nothing shardsim measures (logging, learning rate, checkpoints,
// data paths) are accepted; the rest change what shardsim does not model
// and are listed in `unmodelled` unless at Megatron's default; a name
// Megatron does not have is an error with "did you mean".
#ifndef SHARDSIM_SIM_SCENARIO_MEGATRON_ARGS_H_
#define SHARDSIM_SIM_SCENARIO_MEGATRON_ARGS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim {

// What a framework's config file sets in a scenario.
struct FrameworkInput {
  std::string path;  // the file read
  // Only the fields the file sets (parallelism, micro_batch_size,
  // micro_batches or global_batch_tokens, seq_len, recompute_granularity
  // and recompute_every_layers, flash_attention, strategies, model or
  // model_def).
  Scenario scenario;
  // Arguments or keys set away from the framework's default that change
  // what shardsim does not simulate, each "NAME VALUE: what it does", in
  // file order.
  std::vector<std::string> unmodelled;
};

// Reads the file `spec` names (relative to `base_dir` unless absolute) and
// gives its text and path to `parse`. Errors start "KIND PATH: ", or
// "KIND PATH:LINE: " where `parse`'s message starts with its line.
using FrameworkParser = std::function<absl::StatusOr<FrameworkInput>(
    const std::string& text, const std::string& path)>;
absl::StatusOr<FrameworkInput> ReadFrameworkFile(absl::string_view kind,
                                                 absl::string_view spec,
                                                 absl::string_view base_dir,
                                                 const FrameworkParser& parse);

// Reads `spec` (relative to `base_dir` unless absolute): arguments
// separated by blanks or newlines, with '...' and "..." quoting,
// backslash line continuations and # comments; "--name value", "--name=value"
// or a bare flag. A leading program ("python pretrain_gpt.py", "torchrun ...
// pretrain_gpt.py") is not taken: the file holds arguments only. Errors
// start "Megatron-LM arguments PATH:LINE: " and name the argument.
absl::StatusOr<FrameworkInput> ReadMegatronArgs(absl::string_view spec,
                                                absl::string_view base_dir);

// Every argument name Megatron-LM's pretrain_gpt.py takes ("--seq-length").
const std::vector<absl::string_view>& MegatronArgumentNames();

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_MEGATRON_ARGS_H_
