#include "sim/schedule/lower/activations.h"

namespace shardsim {
namespace lower {

ActivationsPass::ActivationsPass(Step* step)
    : step_(*step), alloc_(step->layers().size(), -1) {}

void ActivationsPass::BeforeCompute(int v, std::vector<int>* /*deps*/) {
  const Visit& visit = step_.visits[v];
  if (!visit.forward() || !step_.segments[visit.seg].first_of_layer) return;
  alloc_[visit.layer] =
      step_.Alloc(COMPUTE, FORWARD, visit.mb, visit.layer,
                  step_.layers()[visit.layer].activation_bytes, "activations");
}

void ActivationsPass::AfterCompute(int v, int op) {
  const Visit& visit = step_.visits[v];
  // The layer's last backward is its first segment's.
  if (!visit.backward() || !step_.segments[visit.seg].first_of_layer) return;
  step_.Free(COMPUTE, BACKWARD, visit.mb, visit.layer, alloc_[visit.layer],
             {op});
  alloc_[visit.layer] = -1;
}

}  // namespace lower
}  // namespace shardsim
