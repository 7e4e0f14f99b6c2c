#include "sim/schedule/lower/recompute.h"

#include <utility>

namespace shardsim {
namespace lower {

void InsertRecomputes(Step* step) {
  const std::vector<Segment>& segments = step->segments;
  std::vector<Visit> visits;
  visits.reserve(step->visits.size());
  for (const Visit& visit : step->visits) {
    if (visit.backward()) {
      // A layer's backward starts at its last segment (forward order).
      const int q = visit.seg;
      const bool first = q + 1 == static_cast<int>(segments.size()) ||
                         segments[q + 1].layer != visit.layer;
      if (first && step->layers()[visit.layer].recompute_flops > 0) {
        visits.push_back({BACKWARD, visit.mb, -1, visit.layer});
      }
    }
    visits.push_back(visit);
  }
  step->visits = std::move(visits);
}

RecomputePass::RecomputePass(Step* step)
    : step_(*step),
      recompute_op_(step->layers().size(), -1),
      working_(step->layers().size(), -1) {}

void RecomputePass::BeforeCompute(int v, std::vector<int>* deps) {
  const Visit& visit = step_.visits[v];
  if (visit.recompute()) {
    // What the layer's backward needs, rebuilt.
    working_[visit.layer] = step_.Alloc(
        COMPUTE, BACKWARD, visit.mb, visit.layer,
        step_.layers()[visit.layer].backward_working_bytes, "recompute");
  } else if (visit.backward() && recompute_op_[visit.layer] >= 0) {
    deps->push_back(recompute_op_[visit.layer]);
  }
}

void RecomputePass::AfterCompute(int v, int op) {
  const Visit& visit = step_.visits[v];
  if (visit.recompute()) {
    recompute_op_[visit.layer] = op;
  } else if (visit.backward() && step_.segments[visit.seg].first_of_layer) {
    // The layer's last backward (its first segment) is done with it.
    step_.Free(COMPUTE, BACKWARD, visit.mb, visit.layer, working_[visit.layer],
               {op});
    working_[visit.layer] = -1;
  }
}

}  // namespace lower
}  // namespace shardsim
