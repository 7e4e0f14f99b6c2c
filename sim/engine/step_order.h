// How a step's ops follow one another: on a stream, and on the host that
// issues them. The replay's actors, the critical path and the collapse's
// checks all read the same order.
#ifndef SHARDSIM_SIM_ENGINE_STEP_ORDER_H_
#define SHARDSIM_SIM_ENGINE_STEP_ORDER_H_

#include <vector>

#include "sim/schedule/periodic.h"

namespace shardsim {

// Times closer than this are the same instant (floating-point sums).
constexpr double kEps = 1e-12;

// Per op, the op before it on its stream, or -1.
std::vector<int> StreamPredecessors(const StepOps& s);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_STEP_ORDER_H_
