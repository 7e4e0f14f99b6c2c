// One builder per algorithm family; MakePlan (plan.cc) validates the request
// and dispatches here. Each builder fills plan->transfers and num_steps for
// a request whose op, shape, count and channels are already checked.
#ifndef SHARDSIM_SIM_COLLECTIVE_ALGORITHMS_H_
#define SHARDSIM_SIM_COLLECTIVE_ALGORITHMS_H_

#include "absl/status/status.h"
#include "sim/collective/plan.h"

namespace shardsim::internal {

absl::Status BuildRing(const PlanRequest& request, Plan* plan);       // ring.cc
absl::Status BuildDirect(const PlanRequest& request, Plan* plan);     // direct.cc
absl::Status BuildTree(const PlanRequest& request, Plan* plan);       // tree.cc
absl::Status BuildSharp(const PlanRequest& request, Plan* plan);      // sharp.cc
absl::Status BuildHring(const PlanRequest& request, Plan* plan);      // hierarchical.cc
absl::Status BuildTorus2d(const PlanRequest& request, Plan* plan);    // hierarchical.cc
absl::Status BuildHoring(const PlanRequest& request, Plan* plan);     // horing.cc

}  // namespace shardsim::internal

#endif  // SHARDSIM_SIM_COLLECTIVE_ALGORITHMS_H_
