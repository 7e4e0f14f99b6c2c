// How each framework issues a strategy's collectives: its defaults, from its
// documentation and source code, and the scenario's overrides on top.
#ifndef SHARDSIM_SIM_STRATEGY_EXECUTION_H_
#define SHARDSIM_SIM_STRATEGY_EXECUTION_H_

#include "absl/status/status.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// The framework's defaults for `strategy` (its stage follows from the
// factors), then what the strategy carries (a DeepSpeed config's keys, its
// "auto" ones filled from the model's `hidden` size), then every field
// `overrides` sets; the result has every field set. Errors name the field
// and the value (a negative bucket, ...).
// `strategy.execution().framework()` must be set (ParseStrategy does).
absl::Status ResolveExecution(const Execution& overrides, int64_t hidden,
                              Strategy* strategy);

// The framework's name as users know it ("DeepSpeed", "FSDP", ...).
const char* FrameworkName(Framework framework);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_STRATEGY_EXECUTION_H_
