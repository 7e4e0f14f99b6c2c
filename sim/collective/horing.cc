#include "sim/collective/algorithms.h"
namespace shardsim::internal {
absl::Status BuildHoring(const PlanRequest&, Plan*) { return absl::UnimplementedError("horing: placeholder"); }
}  // namespace shardsim::internal
