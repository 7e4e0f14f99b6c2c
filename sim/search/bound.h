// A sound lower bound on a step's simulated time, from the schedule alone:
// what `shardsim plan` prunes with. No simulated step may come in under it
// (tests/search_test.cc checks every candidate of two scenarios).
#ifndef SHARDSIM_SIM_SEARCH_BOUND_H_
#define SHARDSIM_SIM_SEARCH_BOUND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sim/base/group.h"
#include "sim/collective/plan.h"
#include "sim/engine/prepared_calls.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

// The least time of the replay's own constraints (sim/engine/replay.h),
// walked in issue order: the host issues ops one after another, each after
// its host_waits and its launch cost (sim/schedule/host_cost.h); an op
// starts once issued, after its dependencies and after the op before it on
// its stream, and takes its least time:
// - a compute op: its kernels alone (sim/compute/kernel_time.h), and not
//   before the host has launched them; the engine only ever slows kernels
//   (overlap with collectives);
// - a collective: the longer of its bytes through its busiest NVSwitch
//   port or NIC at full speed (the bytes its group sends, over the
//   members, at the largest efficiency and wire-protocol fraction; through
//   a NIC, times the GPUs that share it, as every group of the call's
//   shape runs at once) and its least alpha-beta estimate over the
//   protocols (sim/collective/estimate.h, each step's floor at its busiest
//   NIC with every group's GPUs on it, as the engine's own estimate counts
//   it: never above the engine's), which adds latencies, less 1e-4 for
//   SimGrid's solver precision (bound.cc). The engine adds contention and
//   slower NVSwitch ports under compute;
// - a memory op: nothing.
// Beside that walk, compute and collectives slow each other: a compute op
// runs slower while a collective holds SMs (ComputeSlowdown), NVLink runs
// slower while compute runs (nvlink_under_compute). The compute stream
// runs one op at a time, and one stream's collectives one after another;
// the step lasts at least the compute and those collectives, less the
// overlap they can best have (bound.cc).
// Errors: a call the plans refuse (plan_cache.h).
absl::StatusOr<double> StepLowerBound(const Schedule& schedule,
                                      const Mesh& mesh,
                                      const Platform& platform);

// StepLowerBound for many schedules on one mesh and platform (a strategy's
// algorithm variants): each call's least time is worked out once. Bound is
// safe to call from several threads at once: they share the least times.
class StepBounder {
 public:
  // With calls of its own.
  StepBounder(const Mesh& mesh, const Platform& platform);
  // Reads `calls`, made with volumes (PreparedCalls), which must outlive
  // it: the plan search's, shared with its simulations.
  explicit StepBounder(PreparedCalls* calls);
  StepBounder(const StepBounder&) = delete;
  StepBounder& operator=(const StepBounder&) = delete;

  absl::StatusOr<double> Bound(const Schedule& schedule);
  // The step `ops` stands for, folded or whole: the same bound as of its
  // Unfold, each base op's least time worked out once.
  absl::StatusOr<double> Bound(const StepOps& ops);

  // Past `deadline`, Bound prepares no further call: it returns
  // DeadlineExceeded where it would (a large group's plan takes seconds).
  void set_deadline(absl::Time deadline) { deadline_ = deadline; }

 private:
  struct LeastTime {
    double seconds = 0;  // the call's least time
    // Its busiest NVSwitch port's bytes at full speed: NVLink runs slower
    // while compute runs (nvlink_under_compute).
    double nvlink_s = 0;
  };
  StepBounder(std::unique_ptr<PreparedCalls> own, PreparedCalls* calls);
  LeastTime LeastCallTime(const CollectiveCall& call,
                          const PreparedCall& prepared) const;

  std::unique_ptr<PreparedCalls> own_;  // null: the caller's
  PreparedCalls* calls_;
  double gpus_per_nic_ = 1;  // GPUs of a node that share a NIC in use
  absl::Time deadline_ = absl::InfiniteFuture();
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SEARCH_BOUND_H_
