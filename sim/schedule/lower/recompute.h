// Activation recomputation: a checkpointed layer keeps only its input in
// forward and runs its forward again just before its backward, into a
// working buffer its backward frees. Selective recomputation is the same
// with less: the layer keeps all but its core attention's activations and
// runs only those kernels again (Layer::recompute_kernels); torchtitan's
// selective layer mode checkpoints every K-th block in full
// (sim/model/model.cc, Block).
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_RECOMPUTE_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_RECOMPUTE_H_

#include <vector>

#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

// Puts a recompute visit before the first backward visit of every layer
// that recomputes (Layer::recompute_flops > 0) in `step->visits`. Runs
// before the passes plan over the visits.
void InsertRecomputes(Step* step);

// The recompute's working buffer, and its backward's wait on it.
class RecomputePass : public Pass {
 public:
  explicit RecomputePass(Step* step);

  void BeforeCompute(int v, std::vector<int>* deps) override;
  void AfterCompute(int v, int op) override;

 private:
  Step& step_;
  std::vector<int> recompute_op_;  // per layer: its latest recompute
  std::vector<int> working_;       // per layer: its live recompute's alloc
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_RECOMPUTE_H_
