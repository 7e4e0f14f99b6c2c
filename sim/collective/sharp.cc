#include "sim/collective/algorithms.h"
namespace shardsim::internal {
absl::Status BuildSharp(const PlanRequest&, Plan*) { return absl::UnimplementedError("sharp: placeholder"); }
}  // namespace shardsim::internal
