// The replay's order constraints (sim/engine/replay.h) walked in issue
// order with given op times, no engine: what plan's lower bound
// (sim/search/bound.h, with least times) and the estimate tier
// (sim/estimate/estimate.h, with expected times) both compute.
#ifndef SHARDSIM_SIM_SCHEDULE_ISSUE_ORDER_H_
#define SHARDSIM_SIM_SCHEDULE_ISSUE_ORDER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct Walk {
  std::vector<double> start;  // by op id
  std::vector<double> end;
  // What held each op back last: the op whose end its start waited for
  // (the op before it on its stream, a dependency or, through the host, a
  // host wait), or -1 where the host's issuing it did (launch costs).
  std::vector<int> held_by;
};

// Each program (a pipeline stage; one if the schedule names none) has one
// host and its own streams. Its host issues the program's ops one after
// another, each once its host_waits are done, spending host_cost[id]; an op
// starts once issued (a compute op as the host begins launching it,
// anything else once launched), after its dependencies and after the op
// before it on its stream, and runs seconds[id]; a compute op ends no
// earlier than the host has launched it. Errors (InvalidArgument): ids
// not 0..n-1, an op of no program or on no stream, a dependency or host wait
// that does not come before its op.
absl::StatusOr<Walk> WalkSchedule(const Schedule& schedule,
                                  const std::vector<double>& host_cost,
                                  const std::vector<double>& seconds);

// The same walk of the step `ops` stands for, folded or whole, op by op
// (as of its Unfold; a folded step's base ops keep the base's ids).
absl::StatusOr<Walk> WalkSchedule(const StepOps& ops,
                                  const std::vector<double>& host_cost,
                                  const std::vector<double>& seconds);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_ISSUE_ORDER_H_
