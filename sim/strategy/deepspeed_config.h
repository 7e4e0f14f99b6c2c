// The DeepSpeed config reader. Every key is accounted for against
// DeepSpeed's schema (deepspeed_keys.h): the zero_optimization keys that
// place a run in the strategy space (stage, hpZ, quantization, MiCS) and
// those that set how it issues its collectives are read; the batch keys
// are kept for a check against the scenario (deepspeed_check.h); keys
// that change what shardsim does not model are listed in `unmodelled`;
// a key DeepSpeed does not know is an error. strategy.cc maps the result
// to a Strategy (a DeepSpeed config given as a strategy spec, FILE.json).
#ifndef SHARDSIM_SIM_STRATEGY_DEEPSPEED_CONFIG_H_
#define SHARDSIM_SIM_STRATEGY_DEEPSPEED_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
  // The batch keys, where given as numbers ("auto" is the HF Trainer's to
  // fill in from its own arguments, so the scenario's then).
  std::optional<int64_t> train_batch_size;
  std::optional<int64_t> micro_batch_size;  // train_micro_batch_size_per_gpu
  std::optional<int64_t> gradient_accumulation_steps;
  // Keys set away from DeepSpeed's default that change what shardsim does
  // not simulate, each "KEY = VALUE: what it does", in file order.
  std::vector<std::string> unmodelled;
};

// Reads `spec` (a path, relative to `base_dir` unless absolute): strict
// JSON (errors give line and column; a key given twice is an error).
// Errors start "DeepSpeed config PATH: " and name the key at fault; an
// unknown key adds the nearest known one ("did you mean").
absl::StatusOr<DeepSpeedZero> ReadDeepSpeedConfig(absl::string_view spec,
                                                  absl::string_view base_dir);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_STRATEGY_DEEPSPEED_CONFIG_H_
