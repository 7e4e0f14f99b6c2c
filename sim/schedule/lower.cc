#include "sim/schedule/lower.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Factor MakeFactor(int intra, int inter) {
  Factor f;
  f.set_intra(intra);
  f.set_inter(inter);
  return f;
}

// The GPUs that share one shard of factor `f`.
Group FactorGroup(const Factor& f) {
  return MakeGroup(f.intra(), 1, f.inter(), 1);
}

// Inside a `big` shard group, the GPUs holding the same `small` shard: the
// group that turns a small-factor shard into a big-factor one.
Group RatioGroup(const Factor& big, const Factor& small) {
  return MakeGroup(big.intra() / small.intra(), small.intra(),
                   big.inter() / small.inter(), small.inter());
}

class StepBuilder {
 public:
  StepBuilder(const std::vector<Layer>& layers, const Strategy& strategy,
              const Mesh& mesh, const Scenario& scenario, Schedule* out)
      : layers_(layers),
        st_(strategy),
        mesh_(mesh),
        sc_(scenario),
        out_(out),
        dp_(MakeFactor(mesh.gpus_per_node, mesh.nodes)),
        last_mb_(scenario.micro_batches() - 1),
        window_(1 + (scenario.has_prefetch_layers()
                         ? scenario.prefetch_layers()
                         : 1)),
        reduced_(layers.size(), -1) {}

  void Build() {
    for (int mb = 0; mb <= last_mb_; ++mb) {
      Forward(mb);
      Backward(mb);
    }
    Update();
  }

 private:
  bool ParamsSharded() const { return FactorSize(st_.p()) > 1; }
  bool Lins() const { return st_.lowering() == LINS; }

  Op* NewOp(Stream stream, Phase phase, int mb, int layer, std::string label,
            std::vector<int> deps) {
    Op* op = out_->add_ops();
    op->set_id(out_->ops_size() - 1);
    op->set_stream(stream);
    op->set_phase(phase);
    op->set_micro_batch(mb);
    op->set_layer(layer);
    op->set_label(std::move(label));
    for (int d : deps) {
      if (d >= 0) op->add_deps(d);
    }
    return op;
  }

  int Compute(Phase phase, int mb, int layer, const std::string& kind,
              double flops, double memory_bytes, std::vector<int> deps) {
    const std::string where =
        layer >= 0 ? layers_[layer].name : std::string("model");
    Op* op = NewOp(COMPUTE, phase, mb, layer, absl::StrCat(kind, " ", where),
                   std::move(deps));
    op->mutable_compute()->set_kind(kind);
    op->mutable_compute()->set_flops(flops);
    op->mutable_compute()->set_memory_bytes(memory_bytes);
    return op->id();
  }

  int Memory(Stream stream, Phase phase, int mb, int layer, int64_t delta,
             const std::string& buffer, std::vector<int> deps) {
    Op* op = NewOp(stream, phase, mb, layer,
                   absl::StrCat(delta > 0 ? "alloc " : "free ", buffer),
                   std::move(deps));
    op->mutable_memory()->set_delta_bytes(delta);
    op->mutable_memory()->set_buffer(buffer);
    return op->id();
  }

  // Groups that span nodes with several GPUs per node run the strategy's
  // algorithm; a node, or one GPU per node, is a plain ring.
  Algorithm AlgorithmFor(const Group& g) const {
    if (g.intra_size() > 1 && g.inter_size() > 1 &&
        st_.algorithm() != ALGORITHM_UNSPECIFIED) {
      return st_.algorithm();
    }
    return RING;
  }

  // Returns the op id, or `after` when the group is a single GPU.
  int Collective(Stream stream, Phase phase, int mb, int layer,
                 CollectiveOp kind, const Group& group, int64_t bytes,
                 DType dtype, Algorithm algorithm, const std::string& tensor,
                 std::vector<int> deps, int root = 0) {
    if (GroupSize(group) == 1) return deps.empty() ? -1 : deps.back();
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
    return op->id();
  }

  // Gathers `layer`'s parameters for `phase` and returns the gather's id.
  // At most window_ gathered layers are in flight: a gather waits until the
  // compute that used the buffer window_ gathers ago has finished.
  int GatherParams(Phase phase, int mb, int layer) {
    const bool backward = phase == BACKWARD;
    const bool hpz = backward && st_.secondary_params_intra() > 0;
    const bool qwz = !backward && st_.quantized_weights();
    const Group group = hpz ? MakeGroup(st_.secondary_params_intra(), 1, 1, 1)
                            : FactorGroup(st_.p());
    const int64_t params = layers_[layer].params;
    const int64_t full = 2 * params;
    std::vector<int> deps;
    const size_t k = gather_users_.size();
    if (k >= static_cast<size_t>(window_)) deps.push_back(gather_users_[k - window_]);
    Memory(GATHER, phase, mb, layer, full, "P full", deps);
    return Collective(GATHER, phase, mb, layer, ALL_GATHER, group,
                      qwz ? QuantizedBytes(params, 8) : full,
                      qwz ? INT8 : BF16, AlgorithmFor(group),
                      qwz ? "P int8" : "P", deps);
  }

  void Forward(int mb) {
    for (int i = 0; i < static_cast<int>(layers_.size()); ++i) {
      const int gather = ParamsSharded() ? GatherParams(FORWARD, mb, i) : -1;
      const int fwd = Compute(FORWARD, mb, i, "forward",
                              layers_[i].forward_flops, 0, {gather});
      if (ParamsSharded()) {
        gather_users_.push_back(fwd);
        if (!st_.keep_params_through_backward()) {
          Memory(COMPUTE, FORWARD, mb, i, -2 * layers_[i].params, "P full",
                 {fwd});
        }
      }
    }
  }

  void Backward(int mb) {
    std::vector<int> bucket;
    int64_t bucket_bytes = 0;
    for (int i = static_cast<int>(layers_.size()) - 1; i >= 0; --i) {
      int gather = -1;
      if (ParamsSharded() && !st_.keep_params_through_backward()) {
        gather = GatherParams(BACKWARD, mb, i);
      }
      int ready = gather;
      if (layers_[i].recompute_flops > 0) {
        ready = Compute(BACKWARD, mb, i, "recompute",
                        layers_[i].recompute_flops, 0, {gather});
      }
      const bool transient_grad = FactorSize(st_.g()) > 1 || ParamsSharded();
      if (transient_grad) {
        Memory(COMPUTE, BACKWARD, mb, i, 2 * layers_[i].params, "G full", {});
      }
      const int bwd = Compute(BACKWARD, mb, i, "backward",
                              layers_[i].backward_flops, 0, {ready});
      if (ParamsSharded()) {
        if (!st_.keep_params_through_backward()) gather_users_.push_back(bwd);
        Memory(COMPUTE, BACKWARD, mb, i, -2 * layers_[i].params, "P full",
               {bwd});
      }
      bucket.push_back(i);
      bucket_bytes += 2 * layers_[i].params;
      if (bucket_bytes >= sc_.bucket_bytes() || i == 0) {
        const int done = Lins() ? ReduceLins(mb, bucket, bwd)
                                : ReducePaRO(mb, bucket, bwd);
        if (transient_grad) {
          Memory(REDUCE, BACKWARD, mb, i, -bucket_bytes, "G full", {done});
        }
        for (int layer : bucket) reduced_[layer] = done;
        bucket.clear();
        bucket_bytes = 0;
      }
    }
  }

  int64_t BucketParams(const std::vector<int>& bucket) const {
    int64_t n = 0;
    for (int i : bucket) n += layers_[i].params;
    return n;
  }

  // PaRO: reduce-scatter G onto its shards every micro-batch; after the
  // last one, finish the reduction over the OS scope.
  int ReducePaRO(int mb, const std::vector<int>& bucket, int after) {
    const int layer = bucket.back();
    const int64_t params = BucketParams(bucket);
    int done = after;
    if (FactorSize(st_.g()) > 1) {
      if (st_.quantized_gradients()) {
        // qgZ: int4 all-to-all inside the node, then across nodes on the
        // node-reduced slice (full precision restored before each sum).
        const Group intra = MakeGroup(st_.g().intra(), 1, 1, 1);
        const Group inter = MakeGroup(1, 1, st_.g().inter(), 1);
        done = Collective(REDUCE, BACKWARD, mb, layer, REDUCE_SCATTER, intra,
                          QuantizedBytes(params, 4), INT4, DIRECT, "G int4",
                          {done});
        done = Collective(REDUCE, BACKWARD, mb, layer, REDUCE_SCATTER, inter,
                          QuantizedBytes(CeilDiv(params, st_.g().intra()), 4),
                          INT4, DIRECT, "G int4", {done});
      } else {
        const Group g = FactorGroup(st_.g());
        done = Collective(REDUCE, BACKWARD, mb, layer, REDUCE_SCATTER, g,
                          2 * params, BF16, AlgorithmFor(g), "G", {done});
      }
    }
    if (mb != last_mb_) return done;
    // Once per step: G shard -> OS shard -> summed over OS replicas.
    int64_t shard = CeilDiv(2 * params, FactorSize(st_.g()));
    if (FactorSize(st_.os()) > FactorSize(st_.g())) {
      const Group g = RatioGroup(st_.os(), st_.g());
      done = Collective(REDUCE, UPDATE, -1, layer, REDUCE_SCATTER, g, shard,
                        BF16, AlgorithmFor(g), "G shard", {done});
      shard = CeilDiv(shard, GroupSize(g));
    }
    if (FactorSize(dp_) > FactorSize(st_.os())) {
      const Group g = RatioGroup(dp_, st_.os());
      done = Collective(REDUCE, UPDATE, -1, layer, ALL_REDUCE, g, shard, BF16,
                        AlgorithmFor(g), "G shard", {done});
    }
    return done;
  }

  // Lins: reduce-scatter over the P group; while accumulating, all-reduce
  // over the GPUs sharing a P shard inside the G group and keep one's own
  // slice (select and drop); on the last micro-batch all-reduce over every
  // GPU sharing the P shard.
  int ReduceLins(int mb, const std::vector<int>& bucket, int after) {
    const int layer = bucket.back();
    const int64_t full = 2 * BucketParams(bucket);
    int done = after;
    const Group p = FactorGroup(st_.p());
    done = Collective(REDUCE, BACKWARD, mb, layer, REDUCE_SCATTER, p, full,
                      BF16, AlgorithmFor(p), "G", {done});
    const int64_t shard = CeilDiv(full, FactorSize(st_.p()));
    if (mb != last_mb_) {
      const Group g = RatioGroup(st_.g(), st_.p());
      return Collective(REDUCE, BACKWARD, mb, layer, ALL_REDUCE, g, shard,
                        BF16, AlgorithmFor(g), "G select-and-drop", {done});
    }
    const Group all = RatioGroup(dp_, st_.p());
    return Collective(REDUCE, UPDATE, -1, layer, ALL_REDUCE, all, shard, BF16,
                      AlgorithmFor(all), "G", {done});
  }

  // Optimizer on the local OS shard, layer by layer so that rebuilding P
  // overlaps the rest of the update.
  void Update() {
    const double k = sc_.optimizer_bytes_per_param();
    const int os = FactorSize(st_.os());
    const int p = FactorSize(st_.p());
    for (int i = 0; i < static_cast<int>(layers_.size()); ++i) {
      const int64_t shard = CeilDiv(layers_[i].params, os);
      // Adam reads and writes K bytes of state per parameter, reads the
      // gradient and writes the bf16 parameter: 2K + 4 bytes; ~10 FLOPs.
      const int update = Compute(UPDATE, -1, i, "optimizer", 10.0 * shard,
                                 (2 * k + 4) * shard, {reduced_[i]});
      if (os == p) continue;
      const Group g = RatioGroup(st_.os(), st_.p());
      const int64_t p_shard = CeilDiv(2 * layers_[i].params, p);
      if (!Lins()) {
        Collective(GATHER, UPDATE, -1, i, ALL_GATHER, g, p_shard, BF16,
                   AlgorithmFor(g), "P shard", {update});
        continue;
      }
      // Lins: every member of the OS subgroup broadcasts its updated slice.
      for (int root = 0; root < GroupSize(g); ++root) {
        Collective(GATHER, UPDATE, -1, i, BROADCAST, g, CeilDiv(p_shard, os / p),
                   BF16, AlgorithmFor(g), "P slice", {update}, root);
      }
    }
  }

  const std::vector<Layer>& layers_;
  const Strategy& st_;
  const Mesh mesh_;
  const Scenario& sc_;
  Schedule* out_;
  const Factor dp_;
  const int last_mb_;
  const int window_;               // gathered layers in flight
  std::vector<int> gather_users_;  // compute op using the k-th gather
  std::vector<int> reduced_;       // per layer: last op reducing its G
};

}  // namespace

int64_t QuantizedBytes(int64_t elements, int bits) {
  return CeilDiv(elements * bits, 8) +
         CeilDiv(elements, kQuantGroupElements) * kQuantScaleBytes;
}

absl::StatusOr<Schedule> LowerStep(const std::vector<Layer>& layers,
                                   const Strategy& strategy, const Mesh& mesh,
                                   const Scenario& scenario) {
  if (absl::Status s = ValidateStrategy(strategy, mesh); !s.ok()) return s;
  if (layers.empty()) return absl::InvalidArgumentError("model has no layers");
  Schedule schedule;
  schedule.set_strategy(strategy.name());
  schedule.set_gpus(mesh.gpus());
  schedule.set_gpus_per_node(mesh.gpus_per_node);
  schedule.set_tokens_per_step(int64_t{mesh.gpus()} *
                               scenario.micro_batch_size() * scenario.seq_len() *
                               scenario.micro_batches());
  StepBuilder(layers, strategy, mesh, scenario, &schedule).Build();
  return schedule;
}

std::string FormatSchedule(const Schedule& s) {
  std::string out = absl::StrFormat(
      "schedule of %s on %d GPUs (%d per node), %d ops, %d tokens per step\n",
      s.strategy(), s.gpus(), s.gpus_per_node(), s.ops_size(),
      s.tokens_per_step());
  absl::StrAppendFormat(&out, "%5s  %-7s %-8s %4s  %-34s %s\n", "id",
                        "stream", "phase", "mb", "op", "details");
  for (const Op& op : s.ops()) {
    std::string details;
    switch (op.body_case()) {
      case Op::kCompute:
        details = absl::StrFormat("%.3f GFLOP", op.compute().flops() / 1e9);
        if (op.compute().memory_bytes() > 0) {
          absl::StrAppendFormat(&details, ", %.1f MB HBM",
                                op.compute().memory_bytes() / 1e6);
        }
        break;
      case Op::kCollective: {
        const CollectiveCall& c = op.collective();
        details = absl::StrFormat("%s over %s, %s, %.3f MB %s",
                                  CollectiveOp_Name(c.op()),
                                  GroupName(c.group()),
                                  Algorithm_Name(c.algorithm()), c.bytes() / 1e6,
                                  DType_Name(c.dtype()));
        if (c.op() == BROADCAST) absl::StrAppend(&details, ", root ", c.root());
        break;
      }
      case Op::kMemory:
        details = absl::StrFormat("%+.3f MB", op.memory().delta_bytes() / 1e6);
        break;
      default:
        break;
    }
    if (op.deps_size() > 0) {
      absl::StrAppend(&details, "  after ", absl::StrJoin(op.deps(), ","));
    }
    absl::StrAppendFormat(
        &out, "%5d  %-7s %-8s %4s  %-34s %s\n", op.id(),
        absl::AsciiStrToLower(Stream_Name(op.stream())),
        absl::AsciiStrToLower(Phase_Name(op.phase())),
        op.micro_batch() >= 0 ? absl::StrCat(op.micro_batch()) : "-",
        op.label(), details);
  }
  return out;
}

}  // namespace shardsim
