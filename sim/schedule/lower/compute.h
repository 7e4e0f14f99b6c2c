// The compute op of one visit: the kernels of its segment's units (forward,
// or backward in reverse unit order), or of its whole layer for a
// recompute.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_COMPUTE_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_COMPUTE_H_

#include <vector>

#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

// Adds visit `v`'s compute op after `deps`; returns its id.
int ComputeOf(Step* step, int v, std::vector<int> deps);

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_COMPUTE_H_
