// What the host spends issuing each op of a schedule: the replay's host
// actor (sim/engine/replay.h) and plan's lower bound (sim/search/bound.h)
// charge the same.
#ifndef SHARDSIM_SIM_SCHEDULE_HOST_COST_H_
#define SHARDSIM_SIM_SCHEDULE_HOST_COST_H_

#include <vector>

#include "sim/schedule/periodic.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// Host seconds per op, by op id: a compute op's kernel launches
// (KernelModel.host_launch_s each; a memory kernel counts its launches), a
// collective's launch_overhead_s, nothing for a memory op.
std::vector<double> HostCosts(const StepOps& ops, const Platform& platform);
std::vector<double> HostCosts(const Schedule& schedule,
                              const Platform& platform);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_HOST_COST_H_
