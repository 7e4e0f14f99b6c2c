// A sound lower bound on a step's simulated time, from the schedule alone:
// what `shardsim plan` prunes with. No simulated step may come in under it
// (tests/search_test.cc checks every candidate of two scenarios).
#ifndef SHARDSIM_SIM_SEARCH_BOUND_H_
#define SHARDSIM_SIM_SEARCH_BOUND_H_

#include "absl/status/statusor.h"
#include "sim/collective/group.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// The longest path through the schedule's ops, each taking its least
// time, an op starting after its dependencies and after the op before it
// on its stream:
// - a compute op: its kernels alone (sim/compute/kernel_time.h); the
//   engine only ever slows them (overlap with collectives);
// - a collective: its bytes through its busiest NVSwitch port or NIC at
//   full speed: the bytes its group sends (the plan's volume) over the
//   members, at the port's or NIC's bandwidth times the largest
//   efficiency and wire-protocol fraction, with no latency. The engine
//   adds latencies, contention and the protocol it picks;
// - a memory op: nothing.
// Errors: a call the plans refuse (plan_cache.h).
absl::StatusOr<double> StepLowerBound(const Schedule& schedule,
                                      const Mesh& mesh,
                                      const Platform& platform);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SEARCH_BOUND_H_
