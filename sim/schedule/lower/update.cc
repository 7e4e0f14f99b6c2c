#include "sim/schedule/lower/update.h"

#include <cstdint>

#include "sim/model/kernels.h"
#include "sim/schedule/lower/offload.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {

UpdatePass::UpdatePass(Step* step)
    : step_(*step), broadcast_rebuild_(step->strategy().lowering() == LINS) {}

// The P shards are rebuilt per layer (overlapping the rest of the update)
// or in one call after it. Lins' framework (InternEvo) broadcasts after the
// whole update: each OS-subgroup member its flat shard of every layer, one
// call per member (hybrid_zero_optim.py broadcast_params, after a device
// synchronize; configs/7B_sft.py overlap_sync_param=False, at InternEvo
// c628a8c), as Lins' T_os1 = (s_os/s_p) t(BC, 2Φ/s_os) counts.
void UpdatePass::End() {
  const Strategy& strategy = step_.strategy();
  const std::vector<Layer>& layers = step_.layers();
  const int os = FactorSize(strategy.os());
  const int p = FactorSize(strategy.p());
  const Group g = RatioGroup(strategy.os(), strategy.p());
  int64_t rebuild = 0;
  int last_update = -1;
  // ZeRO-Offload updates the whole shard on the host: every layer's
  // rebuild waits for its copy back.
  const int offloaded =
      step_.ex().offload_optimizer() ? OffloadedUpdate(&step_) : -1;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    const int update = offloaded >= 0 ? offloaded : Optimizer(i);
    last_update = update;
    GatherPersistent(i, update);
    if (os == p) continue;
    const int64_t p_shard = CeilDiv(2 * layers[i].params, p);
    if (!broadcast_rebuild_ && step_.ex().rebuild_per_layer()) {
      step_.Collective(GATHER, UPDATE, -1, i, ALL_GATHER, g, p_shard, BF16,
                       step_.AlgorithmFor(g), "P shard", {update});
    } else {
      rebuild += p_shard;
    }
  }
  if (rebuild == 0) return;
  if (!broadcast_rebuild_) {
    step_.Collective(GATHER, UPDATE, -1, -1, ALL_GATHER, g, rebuild, BF16,
                     step_.AlgorithmFor(g), "P shard", {last_update});
    return;
  }
  for (int root = 0; root < GroupSize(g); ++root) {
    step_.Collective(GATHER, UPDATE, -1, -1, BROADCAST, g,
                     CeilDiv(rebuild, os / p), BF16, step_.AlgorithmFor(g),
                     "P slice", {last_update}, root);
  }
}

int UpdatePass::Optimizer(int i) {
  const Layer& layer = step_.layers()[i];
  const int64_t shard =
      CeilDiv(layer.params, FactorSize(step_.strategy().os()));
  const int list =
      step_.KernelListOf({"optimizer", i, false, 0}, [&](KernelList* l) {
        for (const Kernel& k : OptimizerKernels(shard)) {
          *l->add_kernels() = k;
        }
      });
  return step_.Compute(UPDATE, -1, i, "optimizer", layer.name, list,
                       {step_.reduced[i]});
}

// DeepSpeed keeps parameters at or under its persistence threshold whole
// on every GPU (never gathered in the step): each is gathered again whole
// from the updated shards.
void UpdatePass::GatherPersistent(int layer, int update) {
  if (!step_.ParamsSharded()) return;
  const Group g = FactorGroup(step_.strategy().p());
  for (const Unit& u : step_.layers()[layer].units) {
    if (u.params > 0 && u.params <= step_.ex().persistence_threshold()) {
      step_.Collective(GATHER, UPDATE, -1, layer, ALL_GATHER, g, 2 * u.params,
                       BF16, step_.AlgorithmFor(g), "P persistent", {update});
    }
  }
}

}  // namespace lower
}  // namespace shardsim
