#include "sim/collective/algorithms.h"
namespace shardsim::internal {
absl::Status BuildRing(const PlanRequest&, Plan*) { return absl::UnimplementedError("ring: placeholder"); }
}  // namespace shardsim::internal
