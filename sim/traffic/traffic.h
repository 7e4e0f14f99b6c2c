// Bytes on the wire for one step, counted from the lowered point-to-point
// plans of every collective in the schedule (not from closed formulas), and
// from its point-to-point sends between programs (schedule.proto).
#ifndef SHARDSIM_SIM_TRAFFIC_TRAFFIC_H_
#define SHARDSIM_SIM_TRAFFIC_TRAFFIC_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/results.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// One entry per kind of call (phase, op, group, algorithm, tensor, size,
// program), with bytes sent summed over all GPUs of the job; then one per
// kind of send (phase, tensor, size, the two programs; op OP_UNSPECIFIED),
// each pair's bytes counted inside a node or across nodes. Bytes a SHARP switch
// sends back are not counted: the switch is not a GPU. Every call is
// checked against the mesh and the platform as the engine checks it
// (plan_cache.h).
absl::StatusOr<std::vector<TrafficEntry>> CountTraffic(
    const StepOps& ops, const Mesh& mesh, const Platform& platform);
absl::StatusOr<std::vector<TrafficEntry>> CountTraffic(
    const Schedule& schedule, const Mesh& mesh, const Platform& platform);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_TRAFFIC_TRAFFIC_H_
