// The update (sharding OS), once per step after the last reduction: the
// overflow check and the gradient norm where the framework runs them
// (Execution.overflow_check, grad_norm), the optimizer on the local OS shard,
// layer by layer, then the P shards the next step needs rebuilt from the
// updated OS shards, and DeepSpeed's persistent parameters gathered again
// whole.
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
  // (Step::reduced), or for the check and the norm that wait for them all.
  void End() override;

 private:
  // What the GPU holds of the gradients after the last reduction.
  struct Shard {
    int64_t elements = 0;
    int64_t tensors = 0;     // gradient tensors it holds a piece of
    std::vector<int> ready;  // every layer's last reduction
  };
  Shard GradientShard() const;
  // The check of the shard for inf and NaN once every reduction is done,
  // then one byte all-reduced over the group the shard is cut from;
  // returns its last op, or -1 if the framework runs none.
  int OverflowCheck(const Shard& shard);
  // The norm over the shard after `deps`, then one fp32 all-reduce over
  // the same group; returns its last op, -1 if the framework takes none.
  int GradNorm(const Shard& shard, std::vector<int> deps);
  // The optimizer on layer `i`'s OS shard after `after` (the layer's last
  // reduction when -1), its gradients scaled by the norm first when
  // `scaled`; returns the op.
  int Optimizer(int i, int after, bool scaled);
  // One value (`bytes`) all-reduced over the group the shard is cut from,
  // then over the tensor-parallel group, on the compute stream, after
  // `deps`; returns the last all-reduce, or -1 when both are one GPU.
  int AllReduceOverShard(int64_t bytes, DType dtype, const std::string& what,
                         std::vector<int> deps);
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
