// The update (sharding OS), once per step after the last reduction: the
// gradient norm where the framework computes one (Execution.grad_norm), the
// optimizer on the local OS shard, layer by layer, then the P shards the
// next step needs rebuilt from the updated OS shards, and DeepSpeed's
// persistent parameters gathered again whole.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_UPDATE_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_UPDATE_H_

#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

class UpdatePass : public Pass {
 public:
  explicit UpdatePass(Step* step);

  // Each layer's update waits for its gradients' last reduction
  // (Step::reduced), or for the gradient norm that waits for them all.
  void End() override;

 private:
  // The norm over the GPU's gradient shard once every reduction is done,
  // then one fp32 all-reduce over the group the shard is cut from; returns
  // the op the updates wait for, -1 if the framework computes no norm.
  int GradNorm();
  // The optimizer on layer `i`'s OS shard, after `norm` (its gradients
  // scaled first) when it is not -1; returns the op.
  int Optimizer(int i, int norm);
  // The layer's persistent parameters gathered again after `update`.
  void GatherPersistent(int layer, int update);

  Step& step_;
  // Lins' framework (InternEvo) rebuilds by broadcasts after the whole
  // update; the others all-gather, per layer where they overlap it.
  const bool broadcast_rebuild_;
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_UPDATE_H_
