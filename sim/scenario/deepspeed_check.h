// A scenario's DeepSpeed configs (strategy specs FILE.json) held against
// the scenario itself: what DeepSpeed would run is what is simulated, or
// the user is told.
#ifndef SHARDSIM_SIM_SCENARIO_DEEPSPEED_CHECK_H_
#define SHARDSIM_SIM_SCENARIO_DEEPSPEED_CHECK_H_

#include "absl/status/status.h"
#include "sim/scenario/scenario.h"

namespace shardsim {

// For each DeepSpeed config among the job's strategies:
// - its batch keys must agree with the scenario at every GPU count:
//   train_micro_batch_size_per_gpu with micro_batch_size,
//   gradient_accumulation_steps with the micro-batches per step, and
//   train_batch_size with their product times the GPUs (DeepSpeed's
//   data-parallel world); errors name both values;
// - keys shardsim does not model (DeepSpeedZero::unmodelled) are an error
//   naming them, unless the scenario allows them (allow_unmodelled), when
//   they go to job->warnings.
absl::Status CheckDeepSpeedConfigs(Job* job);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_DEEPSPEED_CHECK_H_
