// The update (sharding OS), once per step after the last reduction: the
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
  // (Step::reduced).
  void End() override;

 private:
  // The optimizer on layer `i`'s OS shard; returns the op.
  int Optimizer(int i);
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
