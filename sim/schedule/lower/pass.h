// A pass: one concern of the lowering (parameter fetch, gradient reduction,
// recomputation, ...) adding its ops around the walk's compute ops.
//
// RunPasses walks the visits in host order. At each visit it calls every
// pass's BeforeCompute, in the passes' order, then adds the visit's compute
// op (compute.h), then calls every pass's AfterCompute in the same order.
// What a pass adds at a hook is what the framework's host issues there, so
// the passes' order is part of the contract: a pass that must issue before
// another at the same hook comes first (LowerStep, lower.cc, lists them).
//
// A new concern (a parallel dimension's collectives inside a layer, say) is
// a new Pass in a file of its own, added to that list.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_PASS_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_PASS_H_

#include <vector>

#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

class Pass {
 public:
  virtual ~Pass() = default;

  // Before the first visit.
  virtual void Begin() {}

  // At visit `v`'s hook, before its compute op: the ops the host issues
  // there. Adds to `deps` the ops the compute op waits for.
  virtual void BeforeCompute(int /*v*/, std::vector<int>* /*deps*/) {}

  // After visit `v`'s compute op, `op` (also step.visit_ops[v]).
  virtual void AfterCompute(int /*v*/, int /*op*/) {}

  // After the last visit.
  virtual void End() {}
};

// Runs `passes`, in their order, over every visit of `step`.
void RunPasses(const std::vector<Pass*>& passes, Step* step);

// The lowering's passes over `step`, whose segments and visits are set
// (lower.cc lists them in order: recomputes inserted, then model states,
// sharding P, activations, recomputation, sharding G, sharding OS), and
// `last` after them unless null (a pipeline's sends).
void RunLoweringPasses(Step* step, Pass* last);

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_PASS_H_
