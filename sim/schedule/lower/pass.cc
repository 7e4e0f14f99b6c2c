#include "sim/schedule/lower/pass.h"

#include <utility>

#include "sim/schedule/lower/compute.h"

namespace shardsim {
namespace lower {

void RunPasses(const std::vector<Pass*>& passes, Step* step) {
  for (Pass* p : passes) p->Begin();
  for (int v = 0; v < static_cast<int>(step->visits.size()); ++v) {
    step->visit_begin = step->ops_size();
    std::vector<int> deps;
    for (Pass* p : passes) p->BeforeCompute(v, &deps);
    const int op = ComputeOf(step, v, std::move(deps));
    step->visit_ops.push_back(op);
    for (Pass* p : passes) p->AfterCompute(v, op);
  }
  for (Pass* p : passes) p->End();
}

}  // namespace lower
}  // namespace shardsim
