#include "sim/collective/algorithms.h"
namespace shardsim::internal {
absl::Status BuildHring(const PlanRequest&, Plan*) { return absl::UnimplementedError("hring: placeholder"); }
absl::Status BuildTorus2d(const PlanRequest&, Plan*) { return absl::UnimplementedError("torus2d: placeholder"); }
}  // namespace shardsim::internal
