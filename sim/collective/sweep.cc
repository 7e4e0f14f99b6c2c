#include "sim/collective/sweep.h"

#include <cmath>

namespace shardsim {

std::vector<CollectiveCall> SweepCalls(const SweepSpec& spec, const Mesh& mesh) {
  std::vector<CollectiveCall> calls;
  // The small slack keeps max_bytes in when repeated multiplication lands
  // a hair above it.
  for (double size = spec.min_bytes; size <= spec.max_bytes * (1 + 1e-9);
       size *= spec.step_factor) {
    CollectiveCall c;
    c.set_op(spec.op);
    *c.mutable_group() = GlobalGroup(mesh);
    c.set_bytes(static_cast<int64_t>(std::llround(size)));
    c.set_dtype(FP32);  // nccl-tests' default type
    c.set_algorithm(spec.algorithm);
    c.set_root(spec.root);
    calls.push_back(c);
  }
  return calls;
}

}  // namespace shardsim
