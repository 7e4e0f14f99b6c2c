// The state every pass of the lowering shares (sim/schedule/lower.h,
// LowerStep): the inputs, the walk over the model (walk.h), and the
// schedule being written, with the helpers that add its ops.
//
// Ops are numbered in the order they are added, which is the framework
// host's issue order: a pass adds its ops only from its hooks (pass.h), so
// the passes' order decides the numbering, and with it every result.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_STEP_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_STEP_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sim/base/group.h"
#include "sim/base/layout.h"
#include "sim/model/model.h"
#include "sim/schema/scenario.pb.h"
#include "sim/schema/schedule.pb.h"
#include "sim/schema/strategy.pb.h"
#include "sim/strategy/model_states.h"

namespace shardsim {
namespace lower {

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The GPUs that share one shard of factor `f`.
Group FactorGroup(const Factor& f);

// Inside a `big` shard group, the GPUs holding the same `small` shard: the
// group that turns a small-factor shard into a big-factor one.
Group RatioGroup(const Factor& big, const Factor& small);

// What one compute op of a layer runs, with the one gather (if any) that
// brings its parameters: a layer (FSDP, PaRO), or a module with parameters
// above the persistence threshold plus the small ones before it (DeepSpeed).
struct Segment {
  int layer = 0;
  std::string name;
  std::vector<const Unit*> units;  // forward order
  int64_t gathered = 0;            // parameters its gather brings
  // Their bytes: 2 each, 1 for those gathered as float8 (Unit.fp8_params).
  int64_t gathered_bytes = 0;
  int64_t params = 0;           // parameters of its units (gradients)
  bool first_of_layer = false;  // forward order
};

// One compute op of the step in host order: a segment's forward, its
// backward, or a checkpointed layer's recompute (recompute.h).
struct Visit {
  Phase phase = FORWARD;
  int mb = 0;
  int seg = -1;  // -1: the recompute of `layer`
  int layer = 0;

  bool recompute() const { return seg < 0; }
  bool forward() const { return phase == FORWARD && seg >= 0; }
  bool backward() const { return phase == BACKWARD && seg >= 0; }
};

class Step {
 public:
  // `layers`, `strategy`, `layout` and `out` must outlive the Step. The
  // strategy shards over layout.DpMesh().
  Step(const std::vector<Layer>& layers, const Strategy& strategy,
       const Layout& layout, const Scenario& scenario, Schedule* out);

  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;

  // ---- inputs ----
  const std::vector<Layer>& layers() const { return layers_; }
  const Strategy& strategy() const { return strategy_; }
  const Execution& ex() const { return ex_; }
  const Layout& layout() const { return layout_; }
  const Factor& dp() const { return dp_; }  // every dp rank of the job
  int last_mb() const { return last_mb_; }
  double optimizer_bytes_per_param() const {
    return optimizer_bytes_per_param_;
  }
  bool ParamsSharded() const;
  // P stays gathered from forward through backward (SHARD_GRAD_OP).
  bool KeepsParams() const { return strategy_.keep_params_through_backward(); }
  // P gathered once a step and kept to its last backward
  // (Execution.hold_params_through_step).
  bool HoldsParams() const { return ex_.hold_params_through_step(); }
  // Where gradient reductions run: their own stream when they overlap.
  Stream ReduceStream() const { return ex_.overlap_comm() ? REDUCE : COMPUTE; }
  Algorithm AlgorithmFor(const Group& g) const;
  // A gradient element: bf16's 2 bytes, or fp32's 4 (Execution.grad_fp32,
  // Megatron's main_grad buffer), in memory and on the wire.
  int64_t grad_bytes() const { return GradBytes(ex_); }
  DType grad_dtype() const { return ex_.grad_fp32() ? FP32 : BF16; }

  // ---- the walk (walk.h, recompute.h), fixed before any op is added ----
  std::vector<Segment> segments;  // forward order over the model
  std::vector<Visit> visits;      // the step's compute ops, host order
  // Per visit emitted so far: its compute op (RunPasses fills it).
  std::vector<int> visit_ops;
  // The first op added for the visit being walked, its hook's first
  // (RunPasses sets it).
  int visit_begin = 0;
  // Per layer: the last op reducing its gradients (the update waits).
  std::vector<int> reduced;

  // ---- the schedule ----
  int ops_size() const { return out_->ops_size(); }
  const Op& op(int id) const { return out_->ops(id); }
  Op* mutable_op(int id) { return out_->mutable_ops(id); }
  // Host memory each rank pins (Schedule.host_bytes_per_gpu).
  void set_host_bytes_per_gpu(int64_t bytes) {
    out_->set_host_bytes_per_gpu(bytes);
  }

  // A new op at the end; `deps` may hold -1s (none) and repeats.
  Op* NewOp(Stream stream, Phase phase, int mb, int layer, std::string label,
            std::vector<int> deps);

  // What makes a kernel list: its kind and the segment or layer it is of,
  // whether a gradient accumulation ends it, and which part of the visit's
  // kernels it is (a visit's kernels split at its tensor-parallel
  // collectives, compute.h; 0 when there are none).
  using ListKey = std::tuple<std::string, int, bool, int>;

  // The index of list `key` in the schedule; `fill` adds its kernels the
  // first time the key is seen, and never again.
  template <typename Fill>
  int KernelListOf(const ListKey& key, Fill fill) {
    auto [it, added] = lists_.try_emplace(key, out_->kernel_lists_size());
    if (added) {
      KernelList* list = out_->add_kernel_lists();
      fill(list);
      AddListFlops(*list);
    }
    return it->second;
  }

  // A compute op running kernel list `list`; returns its id.
  int Compute(Phase phase, int mb, int layer, const std::string& kind,
              const std::string& where, int list, std::vector<int> deps);

  // An allocation of `bytes` (none when 0: returns -1).
  int Alloc(Stream stream, Phase phase, int mb, int layer, int64_t bytes,
            const std::string& buffer);

  // Gives back allocation `alloc` (nothing when it is -1) once `deps` are
  // done.
  void Free(Stream stream, Phase phase, int mb, int layer, int alloc,
            std::vector<int> deps);

  // A collective call of `bytes` over `group`, a group of the dp mesh the
  // strategy shards over (placed on the job's mesh by layout().EmbedDp),
  // blocks padded as NCCL needs them; `layer` -1 is the whole model.
  // Returns the op id, or the last dependency when the group is one GPU
  // (nothing to do).
  int Collective(Stream stream, Phase phase, int mb, int layer,
                 CollectiveOp kind, const Group& group, int64_t bytes,
                 DType dtype, Algorithm algorithm, const std::string& tensor,
                 std::vector<int> deps, int root = 0, double extra_host_s = 0);

  // The same over `group`, a group of the job's mesh itself (a tensor or
  // context parallel group: layout().GroupOf).
  int MeshCollective(Stream stream, Phase phase, int mb, int layer,
                     CollectiveOp kind, const Group& group, int64_t bytes,
                     DType dtype, Algorithm algorithm,
                     const std::string& tensor, std::vector<int> deps,
                     int root = 0, double extra_host_s = 0);

  // The same over the group of dimension `dim` of the job's mesh (a tensor
  // or context parallel group), its algorithm what the platform's NCCL
  // picks for that group, the call marked with its dimension.
  int DimCollective(Stream stream, Phase phase, int mb, int layer, Dim dim,
                    CollectiveOp kind, int64_t bytes, DType dtype,
                    const std::string& tensor, std::vector<int> deps);

 private:
  void AddListFlops(const KernelList& list);

  const std::vector<Layer>& layers_;
  const Strategy& strategy_;
  const Execution& ex_;
  const Layout& layout_;
  Schedule* out_;
  const Factor dp_;
  const int last_mb_;
  const double optimizer_bytes_per_param_;
  std::map<ListKey, int> lists_;    // kernel lists made so far, by key
  std::vector<double> list_flops_;  // per kernel list: its model FLOPs
};

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_STEP_H_
