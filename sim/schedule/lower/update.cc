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
  const Shard shard = GradientShard();
  const int checked = OverflowCheck(shard);
  const int norm =
      GradNorm(shard, checked >= 0 ? std::vector<int>{checked} : shard.ready);
  const int before = norm >= 0 ? norm : checked;
  const int offloaded =
      step_.ex().offload_optimizer() ? OffloadedUpdate(&step_, before) : -1;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    const int update =
        offloaded >= 0 ? offloaded : Optimizer(i, before, norm >= 0);
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

UpdatePass::Shard UpdatePass::GradientShard() const {
  const int os = FactorSize(step_.strategy().os());
  Shard s;
  for (int i = 0; i < static_cast<int>(step_.layers().size()); ++i) {
    const Layer& layer = step_.layers()[i];
    s.elements += CeilDiv(layer.params, os);
    for (const Unit& u : layer.units) {
      int64_t vectors = 0;
      for (int64_t v : u.vectors) vectors += v;
      s.tensors += (u.params > vectors ? 1 : 0) + u.vectors.size();
    }
    if (step_.reduced[i] >= 0) s.ready.push_back(step_.reduced[i]);
  }
  // ZeRO-3 cuts every tensor across the group, so each GPU holds a piece
  // of each; ZeRO-1/2 cut one flat buffer, so each holds 1/os of them.
  if (!step_.ParamsSharded()) s.tensors = CeilDiv(s.tensors, os);
  return s;
}

int UpdatePass::AllReduceOverShard(int64_t bytes, DType dtype,
                                   const std::string& what,
                                   std::vector<int> deps) {
  int last = -1;
  const Group g = FactorGroup(step_.strategy().os());
  // On the compute stream: the host blocks on the result (c10d's default
  // stream, then .item() or the coefficient every update needs). One
  // value, counted as one per rank of the group so that every rank's chunk
  // of the ring holds one and every node's flows are alike (the engine
  // replays one node for all); a call of a few bytes costs its latency
  // either way.
  if (GroupSize(g) > 1) {
    last = step_.Collective(COMPUTE, UPDATE, -1, -1, ALL_REDUCE, g,
                            bytes * GroupSize(g), dtype, step_.AlgorithmFor(g),
                            what, std::move(deps));
    deps = {last};
  }
  // Tensor-parallel ranks hold other pieces of the parameters: the value
  // is all-reduced over them too (Megatron-LM's get_grad_norm_fp32 over
  // the model-parallel group, DeepSpeed's _model_parallel_all_reduce,
  // torchtitan's DTensor norm). Pipeline stages do the same over theirs;
  // a collective does not span stage programs here, so that one is left
  // out (one small call's latency).
  if (step_.layout().tp() > 1) {
    last = step_.DimCollective(COMPUTE, UPDATE, -1, -1, Dim::kTp, ALL_REDUCE,
                               bytes * step_.layout().tp(), dtype, what,
                               std::move(deps));
  }
  return last;
}

// DeepSpeed's _has_inf_or_nan per tensor of the partition (stage_1_and_2.py
// has_overflow_partitioned_grads_serial): x.float() (2 bytes read, 4
// written), isnan and isinf (4 read, 1 written each), logical_or (2 read, 1
// written), .float() (1 read, 4 written), max (4 read): 28 bytes an element
// in six kernels, and the count's += a seventh. With ZeRO-Offload the host
// has the flag already (local_overflow, set while copying): only the
// all-reduce runs.
int UpdatePass::OverflowCheck(const Shard& shard) {
  if (!step_.ex().overflow_check()) return -1;
  if (step_.ex().offload_optimizer()) {
    return AllReduceOverShard(1, INT8, "overflow", shard.ready);
  }
  const int list =
      step_.KernelListOf({"overflow check", -1, false, 0}, [&](KernelList* l) {
        *l->add_kernels() = OverflowCheckKernel(
            shard.elements, static_cast<int>(7 * shard.tensors));
      });
  const int check = step_.Compute(UPDATE, -1, -1, "overflow check", "shard",
                                  list, shard.ready);
  const int all = AllReduceOverShard(1, INT8, "overflow", {check});
  return all >= 0 ? all : check;
}

// Bytes per gradient element and kernels per tensor of each way to take
// the norm. PyTorch's clip_grad_norm_ (torch/nn/utils/clip_grad.py:
// _foreach_norm, then _foreach_mul_ by the clamped coefficient, always) and
// Megatron-LM's clip_grads.py (multi_tensor_l2norm, multi_tensor_scale) read
// the fp32 gradient shard (FSDP's sharded parameters and Megatron's main
// gradients are fp32) in a few grouped kernels: counted as one per layer.
// DeepSpeed (stage_1_and_2.py get_grad_norm_direct, stage3.py the same)
// runs vector_norm(g.double()) per tensor from Python: the bf16 gradient
// read, its fp64 copy written and read again, two kernels per tensor.
int UpdatePass::GradNorm(const Shard& shard, std::vector<int> deps) {
  const shardsim::GradNorm mode = step_.ex().grad_norm();
  if (mode != FOREACH_NORM && mode != PER_TENSOR_FP64_NORM) return -1;
  const bool foreach = mode == FOREACH_NORM;
  const int launches =
      static_cast<int>(foreach ? step_.layers().size() : 2 * shard.tensors);
  const int list =
      step_.KernelListOf({"gradient norm", -1, false, 0}, [&](KernelList* l) {
        *l->add_kernels() =
            GradNormKernel(shard.elements, foreach ? 4 : 2 + 8 + 8, launches);
      });
  const int norm = step_.Compute(UPDATE, -1, -1, "gradient norm", "shard", list,
                                 std::move(deps));
  const int all = AllReduceOverShard(4, FP32, "grad norm", {norm});
  return all >= 0 ? all : norm;
}

int UpdatePass::Optimizer(int i, int after, bool scaled) {
  const Layer& layer = step_.layers()[i];
  const int64_t shard =
      CeilDiv(layer.params, FactorSize(step_.strategy().os()));
  const int list =
      step_.KernelListOf({"optimizer", i, false, 0}, [&](KernelList* l) {
        std::vector<Kernel> kernels =
            OptimizerKernels(shard, step_.ex().grad_fp32());
        // The gradients scaled by the norm's coefficient once in fp32.
        // Just before Adam (the last two kernels are Adam and the bf16
        // copy-back), after the gradients' cast where there is one.
        if (scaled) {
          kernels.insert(kernels.end() - 2, GradScaleKernel(shard));
        }
        for (const Kernel& k : kernels) *l->add_kernels() = k;
      });
  return step_.Compute(UPDATE, -1, i, "optimizer", layer.name, list,
                       {after >= 0 ? after : step_.reduced[i]});
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
