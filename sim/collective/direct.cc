#include "sim/collective/algorithms.h"
namespace shardsim::internal {
absl::Status BuildDirect(const PlanRequest&, Plan*) { return absl::UnimplementedError("direct: placeholder"); }
}  // namespace shardsim::internal
