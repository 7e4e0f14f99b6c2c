// One builder per algorithm family; MakePlan (plan.cc) validates the request
// and dispatches here. Each builder fills plan->transfers and num_steps for
// a request whose op, shape, count and channels are already checked.
#ifndef SHARDSIM_SIM_COLLECTIVE_ALGORITHMS_H_
#define SHARDSIM_SIM_COLLECTIVE_ALGORITHMS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "sim/collective/chunks.h"
#include "sim/collective/plan.h"

namespace shardsim::internal {

absl::Status BuildRing(const PlanRequest& request, Plan* plan);    // ring.cc
absl::Status BuildDirect(const PlanRequest& request, Plan* plan);  // direct.cc
absl::Status BuildTree(const PlanRequest& request, Plan* plan);    // tree.cc
absl::Status BuildSharp(const PlanRequest& request, Plan* plan);   // sharp.cc
absl::Status BuildHring(const PlanRequest& request,
                        Plan* plan);  // hierarchical.cc
absl::Status BuildTorus2d(const PlanRequest& request,
                          Plan* plan);  // hierarchical.cc
absl::Status BuildHoring(const PlanRequest& request, Plan* plan);  // horing.cc

// ---- shared by the builders ------------------------------------------------

// The ops every builder lowers. A builder checks this before appending
// anything, so a refused request leaves the plan empty.
inline bool IsLoweredOp(CollectiveOp op) {
  return op == ALL_GATHER || op == REDUCE_SCATTER || op == ALL_REDUCE ||
         op == BROADCAST;
}

// The error of the flat builders for an op they do not lower.
inline absl::Status UnsupportedOp(absl::string_view algorithm,
                                  CollectiveOp op) {
  return absl::InvalidArgumentError(absl::StrCat(
      algorithm, ": op ", CollectiveOp_Name(op), " is not supported"));
}

// Appends one channel's transfers for request.op (a lowered op) and returns
// the steps they take; every channel of a request takes the same steps.
using ChannelSchedule = int (*)(const PlanRequest& request,
                                const ChannelGrid& grid, Plan* out);

// Runs `schedule` for channels 0..k-1. The channels share step numbers
// (each moves its own part of every range), so the plan takes as many steps
// as one channel.
inline void BuildChannels(const PlanRequest& request, ChannelSchedule schedule,
                          Plan* plan) {
  for (int c = 0; c < request.channels; ++c) {
    plan->num_steps = schedule(request, ChannelGrid(request, c), plan);
  }
}

// The frame of the hierarchical builders (HRING, TORUS2D, HORING; `name` is
// the one in errors): refuses an op they have no schedule for; with one node
// or one member per node there is no hierarchy and the plan is the flat
// ring; else BuildChannels. In hierarchical.cc.
absl::Status BuildHierarchical(const PlanRequest& request, const char* name,
                               ChannelSchedule schedule, Plan* plan);

}  // namespace shardsim::internal

#endif  // SHARDSIM_SIM_COLLECTIVE_ALGORITHMS_H_
