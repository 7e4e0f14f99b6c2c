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

// Per op, the op before it on its stream (its program's: each program has
// streams of its own), or -1.
std::vector<int> StreamPredecessors(const StepOps& s);

// Per op, the op its program's host issued before it, or -1; empty for a
// step of one program, where it is always the op listed before.
std::vector<int> HostPredecessors(const StepOps& s);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_STEP_ORDER_H_
