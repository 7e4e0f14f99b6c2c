// Step replay: the schedule IR on the fabric. Every GPU runs the same
// program, so one op stands for all GPUs: a compute op sleeps for its
// duration, a collective runs every group of its shape at once. An op
// starts when its dependencies and the op before it on its stream are done;
// streams run concurrently, so communication overlaps compute where the
// IR's dependencies allow it.
#ifndef SHARDSIM_SIM_ENGINE_REPLAY_H_
#define SHARDSIM_SIM_ENGINE_REPLAY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/engine/collective_engine.h"
#include "sim/engine/fabric.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct OpTime {
  double start = 0;
  double end = 0;
};

struct StepTiming {
  double step_time_s = 0;
  double compute_busy_s = 0;  // time the compute stream is busy
  std::vector<OpTime> ops;    // by op id
};

// Seconds a compute op takes: FLOPs at the reachable share of peak for its
// kind, or its HBM traffic at the reachable HBM bandwidth, whichever is
// longer (a roofline).
double ComputeSeconds(const ComputeOp& op, const Platform& platform);

// Runs the SimGrid engine until the step is done. Call once per process,
// after Fabric::Build.
absl::StatusOr<StepTiming> ReplayStep(const Schedule& schedule,
                                      const Fabric& fabric,
                                      CollectiveEngine* collectives);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_REPLAY_H_
