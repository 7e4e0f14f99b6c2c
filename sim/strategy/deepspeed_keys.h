// DeepSpeed's config schema as shardsim reads it: every key DeepSpeed
// knows, each with what it does to a simulated step. A key not listed is
// not DeepSpeed's (a typo, or another tool's); a key listed is modelled,
// costs nothing shardsim measures, or changes what shardsim does not model.
//
// From DeepSpeed's sources (deepspeedai/DeepSpeed, commit edaa722 of
// 2026-08-22): the top-level keys DeepSpeedConfig reads
// (deepspeed/runtime/config.py, constants.py), zero_optimization's
// DeepSpeedZeroConfig with its aliases (runtime/zero/config.py), the
// offload sections (runtime/zero/offload_config.py), bf16 and fp16
// (runtime/precision_config.py) and activation_checkpointing
// (runtime/activation_checkpointing/config.py).
#ifndef SHARDSIM_SIM_STRATEGY_DEEPSPEED_KEYS_H_
#define SHARDSIM_SIM_STRATEGY_DEEPSPEED_KEYS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardsim {

enum class DeepSpeedKeyKind {
  // Read by deepspeed_config.cc: changes the result as it does DeepSpeed's.
  kModelled,
  // An object whose keys are listed under "PATH.".
  kSection,
  // Changes no step time, memory or traffic (logging, learning rate,
  // checkpoint files, loss scaling): accepted with any value.
  kNoCost,
  // Changes step time, memory or traffic in a way shardsim does not
  // simulate, unless it has DeepSpeed's default value (`default_json`).
  kUnmodelled,
  // An object whose keys change no cost (optimizer params, monitors).
  kOpaqueNoCost,
  // An object that turns on a feature shardsim does not simulate: not
  // modelled unless empty, null or {"enabled": false}.
  kOpaqueUnmodelled,
};

struct DeepSpeedKey {
  absl::string_view path;  // "zero_optimization.offload_optimizer.device"
  DeepSpeedKeyKind kind;
  // kUnmodelled: DeepSpeed's default as JSON; a key at it changes nothing.
  absl::string_view default_json;
  // kUnmodelled, kOpaqueUnmodelled: what it does that shardsim does not.
  absl::string_view what;
};

// Every key, sections before their keys.
const std::vector<DeepSpeedKey>& DeepSpeedKeys();

// The key at `path`, or null when DeepSpeed has none there.
const DeepSpeedKey* FindDeepSpeedKey(absl::string_view path);

// The keys directly under `section` ("" for the top level), for "did you
// mean".
std::vector<std::string> DeepSpeedKeysUnder(absl::string_view section);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_STRATEGY_DEEPSPEED_KEYS_H_
