#include "sim/schedule/lower/activations.h"

namespace shardsim {
namespace lower {

ActivationsPass::ActivationsPass(Step* step) : step_(*step) {}

void ActivationsPass::BeforeCompute(int v, std::vector<int>* /*deps*/) {
  const Visit& visit = step_.visits[v];
  if (!visit.forward() || !step_.segments[visit.seg].first_of_layer) return;
  alloc_[{visit.layer, visit.mb}] =
      step_.Alloc(COMPUTE, FORWARD, visit.mb, visit.layer,
                  step_.layers()[visit.layer].activation_bytes, "activations");
}

void ActivationsPass::AfterCompute(int v, int op) {
  const Visit& visit = step_.visits[v];
  // The layer's last backward is its first segment's.
  if (!visit.backward() || !step_.segments[visit.seg].first_of_layer) return;
  const auto it = alloc_.find({visit.layer, visit.mb});
  if (it == alloc_.end()) return;  // no forward of this micro-batch here
  step_.Free(COMPUTE, BACKWARD, visit.mb, visit.layer, it->second, {op});
  alloc_.erase(it);
}

}  // namespace lower
}  // namespace shardsim
