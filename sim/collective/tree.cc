#include "sim/collective/algorithms.h"
namespace shardsim::internal {
absl::Status BuildTree(const PlanRequest&, Plan*) { return absl::UnimplementedError("tree: placeholder"); }
}  // namespace shardsim::internal
