// The DeepSpeed config reader: the keys of a config's zero_optimization
// section that place a DeepSpeed run in the strategy space (stage, hpZ,
// quantization, MiCS) and those that set how it issues its collectives.
// Offload and the other keys are ignored. strategy.cc maps them to a
// Strategy (a DeepSpeed config given as a strategy spec, FILE.json).
#ifndef SHARDSIM_SIM_STRATEGY_DEEPSPEED_CONFIG_H_
#define SHARDSIM_SIM_STRATEGY_DEEPSPEED_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// Defaults are DeepSpeed's: stage 0, no hpZ, no quantization, no MiCS.
struct DeepSpeedZero {
  std::string path;  // the file read (spec resolved against base_dir)
  int stage = 0;
  int hpz = 1;
  bool qwz = false;
  bool qgz = false;
  int mics_shard_size = -1;
  bool mics_hierarchical = false;
  Execution execution;  // only the keys the file gives
};

// Reads `spec` (a path, relative to `base_dir` unless absolute). Errors
// start "DeepSpeed config PATH: " and name the key at fault.
absl::StatusOr<DeepSpeedZero> ReadDeepSpeedConfig(absl::string_view spec,
                                                  absl::string_view base_dir);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_STRATEGY_DEEPSPEED_CONFIG_H_
