#include "sim/schedule/lower/step.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/model/kernels.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace lower {
namespace {

Factor MakeFactor(int intra, int inter) {
  Factor f;
  f.set_intra(intra);
  f.set_inter(inter);
  return f;
}

}  // namespace

Group FactorGroup(const Factor& f) {
  return MakeGroup(f.intra(), 1, f.inter(), 1);
}

Group RatioGroup(const Factor& big, const Factor& small) {
  return MakeGroup(big.intra() / small.intra(), small.intra(),
                   big.inter() / small.inter(), small.inter());
}

Step::Step(const std::vector<Layer>& layers, const Strategy& strategy,
           const Layout& layout, const Scenario& scenario, Schedule* out)
    : reduced(layers.size(), -1),
      layers_(layers),
      strategy_(strategy),
      ex_(strategy.execution()),
      layout_(layout),
      out_(out),
      dp_(MakeFactor(layout.DpMesh().gpus_per_node, layout.DpMesh().nodes)),
      last_mb_(scenario.micro_batches() - 1),
      optimizer_bytes_per_param_(scenario.optimizer_bytes_per_param()) {}

bool Step::ParamsSharded() const { return FactorSize(strategy_.p()) > 1; }

Algorithm Step::AlgorithmFor(const Group& g) const {
  return shardsim::AlgorithmFor(strategy_, g);
}

Op* Step::NewOp(Stream stream, Phase phase, int mb, int layer,
                std::string label, std::vector<int> deps) {
  Op* op = out_->add_ops();
  op->set_id(out_->ops_size() - 1);
  op->set_stream(stream);
  op->set_phase(phase);
  op->set_micro_batch(mb);
  op->set_layer(layer);
  op->set_label(std::move(label));
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  for (int d : deps) {
    if (d >= 0) op->add_deps(d);
  }
  return op;
}

void Step::AddListFlops(const KernelList& list) {
  double flops = 0;
  for (const Kernel& k : list.kernels()) flops += KernelFlops(k);
  list_flops_.push_back(flops);
}

int Step::Compute(Phase phase, int mb, int layer, const std::string& kind,
                  const std::string& where, int list, std::vector<int> deps) {
  Op* op = NewOp(COMPUTE, phase, mb, layer, absl::StrCat(kind, " ", where),
                 std::move(deps));
  ComputeOp* c = op->mutable_compute();
  c->set_kind(kind);
  c->set_kernel_list(list);
  c->set_flops(list_flops_[list]);
  return op->id();
}

int Step::Alloc(Stream stream, Phase phase, int mb, int layer, int64_t bytes,
                const std::string& buffer) {
  if (bytes <= 0) return -1;
  Op* op = NewOp(stream, phase, mb, layer, absl::StrCat("alloc ", buffer), {});
  op->mutable_memory()->set_delta_bytes(bytes);
  op->mutable_memory()->set_buffer(buffer);
  return op->id();
}

void Step::Free(Stream stream, Phase phase, int mb, int layer, int alloc,
                std::vector<int> deps) {
  if (alloc < 0) return;
  const MemoryOp& a = out_->ops(alloc).memory();
  const std::string buffer = a.buffer();
  const int64_t bytes = a.delta_bytes();
  Op* op = NewOp(stream, phase, mb, layer, absl::StrCat("free ", buffer),
                 std::move(deps));
  op->mutable_memory()->set_delta_bytes(-bytes);
  op->mutable_memory()->set_buffer(buffer);
  op->mutable_memory()->set_frees(alloc);
}

int Step::Collective(Stream stream, Phase phase, int mb, int layer,
                     CollectiveOp kind, const Group& group, int64_t bytes,
                     DType dtype, Algorithm algorithm,
                     const std::string& tensor, std::vector<int> deps, int root,
                     double extra_host_s) {
  // Embedding keeps a group within or across nodes as it was (layout.h),
  // so the algorithm chosen on the dp mesh's group stands.
  return MeshCollective(stream, phase, mb, layer, kind, layout_.EmbedDp(group),
                        bytes, dtype, algorithm, tensor, std::move(deps), root,
                        extra_host_s);
}

int Step::MeshCollective(Stream stream, Phase phase, int mb, int layer,
                         CollectiveOp kind, const Group& group, int64_t bytes,
                         DType dtype, Algorithm algorithm,
                         const std::string& tensor, std::vector<int> deps,
                         int root, double extra_host_s) {
  if (GroupSize(group) == 1) return deps.empty() ? -1 : deps.back();
  if (kind == ALL_GATHER || kind == REDUCE_SCATTER) {
    // One equal block of whole values per member: NCCL's all-gather and
    // reduce-scatter take one count per rank, so FSDP pads its flat
    // parameter to a multiple of the group and DeepSpeed gives each rank
    // ceil(numel / world) of a tensor (ds_tensor, partition_parameters.py).
    // Uneven blocks would also make node n's flows differ from node
    // n + 1's by a byte, and network symmetry fail (collective_engine.h).
    const int64_t value = dtype == BF16 ? 2 : dtype == FP32 ? 4 : 1;
    const int64_t block = GroupSize(group) * value;
    bytes = CeilDiv(bytes, block) * block;
  }
  const std::string where =
      layer >= 0 ? layers_[layer].name : std::string("model");
  static const char* kShort[] = {"?", "AG", "RS", "AR", "BC"};
  Op* op = NewOp(stream, phase, mb, layer,
                 absl::StrCat(kShort[kind], " ", tensor, " ", where),
                 std::move(deps));
  CollectiveCall* c = op->mutable_collective();
  c->set_op(kind);
  *c->mutable_group() = group;
  c->set_bytes(bytes);
  c->set_dtype(dtype);
  c->set_algorithm(algorithm);
  c->set_tensor(tensor);
  c->set_root(root);
  c->set_launch_overhead_s(ex_.launch_overhead_s() + extra_host_s);
  return op->id();
}

int Step::DimCollective(Stream stream, Phase phase, int mb, int layer, Dim dim,
                        CollectiveOp kind, int64_t bytes, DType dtype,
                        const std::string& tensor, std::vector<int> deps) {
  const Group group = layout_.GroupOf(dim);
  if (GroupSize(group) == 1) return deps.empty() ? -1 : deps.back();
  const int id =
      MeshCollective(stream, phase, mb, layer, kind, group, bytes, dtype,
                     AlgorithmFor(group), tensor, std::move(deps));
  out_->mutable_ops(id)->mutable_collective()->set_dimension(DimName(dim));
  return id;
}

}  // namespace lower
}  // namespace shardsim
