#include "sim/schedule/lower.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/strategy/model_states.h"
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

// What one compute op of a layer runs, with the one gather (if any) that
// brings its parameters: a layer (FSDP, PaRO), or a module with parameters
// above the persistence threshold plus the small ones before it (DeepSpeed).
struct Segment {
  int layer = 0;
  std::string name;
  std::vector<const Unit*> units;  // forward order
  int64_t gathered = 0;            // parameters its gather brings
  int64_t params = 0;              // parameters of its units (gradients)
  bool first_of_layer = false;     // forward order
};

class StepBuilder {
 public:
  StepBuilder(const std::vector<Layer>& layers, const Strategy& strategy,
              const Mesh& mesh, const Scenario& scenario, Schedule* out)
      : layers_(layers),
        strategy_(strategy),
        ex_(strategy.execution()),
        out_(out),
        dp_(MakeFactor(mesh.gpus_per_node, mesh.nodes)),
        last_mb_(scenario.micro_batches() - 1),
        optimizer_bytes_per_param_(scenario.optimizer_bytes_per_param()),
        reduced_(layers.size(), -1),
        activations_(layers.size(), -1),
        working_(layers.size(), -1) {
    BuildSegments();
  }

  void Build() {
    Resident();
    PlanVisits();
    EmitVisits();
    Update();
  }

 private:
  bool ParamsSharded() const { return FactorSize(strategy_.p()) > 1; }
  bool Lins() const { return strategy_.lowering() == LINS; }
  bool Keep() const { return strategy_.keep_params_through_backward(); }
  Stream ReduceStream() const { return ex_.overlap_comm() ? REDUCE : COMPUTE; }

  void BuildSegments() {
    const bool per_module = ex_.gather_unit() == SUBMODULE;
    for (int i = 0; i < static_cast<int>(layers_.size()); ++i) {
      std::vector<Segment> mine;
      Segment pending;
      pending.layer = i;
      for (const Unit& u : layers_[i].units) {
        pending.units.push_back(&u);
        pending.params += u.params;
        if (u.params > ex_.persistence_threshold() && ParamsSharded()) {
          pending.gathered += u.params;
        }
        const bool closes =
            per_module ? u.params > ex_.persistence_threshold() : false;
        if (closes) {
          pending.name = absl::StrCat(layers_[i].name, " ", u.name);
          mine.push_back(std::move(pending));
          pending = Segment();
          pending.layer = i;
        }
      }
      if (!pending.units.empty()) {
        if (mine.empty()) {
          pending.name = layers_[i].name;
          mine.push_back(std::move(pending));
        } else {
          // Trailing small modules run with the last gathered one.
          Segment& last = mine.back();
          for (const Unit* u : pending.units) last.units.push_back(u);
          last.params += pending.params;
          last.gathered += pending.gathered;
        }
      }
      mine.front().first_of_layer = true;
      for (Segment& s : mine) segments_.push_back(std::move(s));
    }
  }

  Op* NewOp(Stream stream, Phase phase, int mb, int layer, std::string label,
            std::vector<int> deps) {
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

  // What makes a kernel list: its kind and the segment or layer it is of,
  // and whether a gradient accumulation ends it.
  using ListKey = std::tuple<std::string, int, bool>;

  // The index of list `key` in the schedule; `fill` adds its kernels the
  // first time the key is seen, and never again.
  template <typename Fill>
  int KernelListOf(const ListKey& key, Fill fill) {
    auto [it, added] = lists_.try_emplace(key, out_->kernel_lists_size());
    if (added) {
      KernelList* list = out_->add_kernel_lists();
      fill(list);
      double flops = 0;
      for (const Kernel& k : list->kernels()) flops += KernelFlops(k);
      list_flops_.push_back(flops);
    }
    return it->second;
  }

  int Compute(Phase phase, int mb, int layer, const std::string& kind,
              const std::string& where, int list, std::vector<int> deps) {
    Op* op = NewOp(COMPUTE, phase, mb, layer, absl::StrCat(kind, " ", where),
                   std::move(deps));
    ComputeOp* c = op->mutable_compute();
    c->set_kind(kind);
    c->set_kernel_list(list);
    c->set_flops(list_flops_[list]);
    return op->id();
  }

  // An allocation of `bytes` (none when 0: returns -1).
  int Alloc(Stream stream, Phase phase, int mb, int layer, int64_t bytes,
            const std::string& buffer) {
    if (bytes <= 0) return -1;
    Op* op =
        NewOp(stream, phase, mb, layer, absl::StrCat("alloc ", buffer), {});
    op->mutable_memory()->set_delta_bytes(bytes);
    op->mutable_memory()->set_buffer(buffer);
    return op->id();
  }

  // Gives back allocation `alloc` (nothing when it is -1) once `deps` are
  // done.
  void Free(Stream stream, Phase phase, int mb, int layer, int alloc,
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

  // The model states this GPU keeps all step (sim/strategy/model_states.h):
  // allocated before the step, never given back.
  void Resident() {
    int64_t psi = 0;
    for (const Layer& l : layers_) psi += l.params;
    const ModelStates st =
        ModelStateBytes(psi, optimizer_bytes_per_param_, strategy_);
    Alloc(COMPUTE, FORWARD, -1, -1, st.params - st.secondary, "P shard");
    Alloc(COMPUTE, FORWARD, -1, -1, st.secondary, "P secondary");
    Alloc(COMPUTE, FORWARD, -1, -1, st.grads, "G shard");
    Alloc(COMPUTE, FORWARD, -1, -1, st.optimizer, "OS shard");
  }

  Algorithm AlgorithmFor(const Group& g) const {
    return shardsim::AlgorithmFor(strategy_, g);
  }

  // Returns the op id, or the last dependency when the group is one GPU.
  int Collective(Stream stream, Phase phase, int mb, int layer,
                 CollectiveOp kind, const Group& group, int64_t bytes,
                 DType dtype, Algorithm algorithm, const std::string& tensor,
                 std::vector<int> deps, int root = 0, double extra_host_s = 0) {
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

  // ---- visits and parameter gathers ----
  //
  // A visit is one compute op of the step in host order: a segment's
  // forward, its backward, or a checkpointed layer's recompute. A fetch is
  // one gather of a segment's parameters and the visit that first needs
  // it. At each visit's hook the framework issues the visit's own fetches
  // not yet issued, then prefetches later ones: DeepSpeed while the
  // parameters ahead stay under its bucket (and its live budget), FSDP and
  // PaRO a number of units ahead. Ops are emitted in that host order.

  struct Visit {
    Phase phase;
    int mb;
    int seg;  // -1: the recompute of `layer`
    int layer;
    std::vector<int> fetches;  // its fetches (indices into fetches_)
  };
  struct Fetch {
    int seg = 0;
    int visit = 0;  // first needed by
    int user = 0;   // the visit after which it is freed
    Phase phase = FORWARD;
    int mb = 0;
    int op = -1;                   // the gather, once emitted
    int alloc = -1;                // its full-size buffer
    Limit limit = PREFETCH_LIMIT;  // why, if issued at its own hook
  };
  struct Bucket {
    int64_t params = 0;
    std::vector<int> segments;  // in backward order
    std::vector<int> allocs;    // their full-size gradients
    int after = -1;             // the compute op that produced the last grads
  };

  void PlanVisits() {
    last_fetch_.assign(segments_.size(), {});
    for (int mb = 0; mb <= last_mb_; ++mb) {
      for (int q = 0; q < static_cast<int>(segments_.size()); ++q) {
        visits_.push_back({FORWARD, mb, q, segments_[q].layer, {}});
        if (segments_[q].gathered > 0) AddFetch(q, FORWARD, mb);
      }
      for (int q = static_cast<int>(segments_.size()) - 1; q >= 0; --q) {
        const Segment& seg = segments_[q];
        const bool first = q + 1 == static_cast<int>(segments_.size()) ||
                           segments_[q + 1].layer != seg.layer;
        const bool recompute = layers_[seg.layer].recompute_flops > 0;
        if (first && recompute) {
          visits_.push_back({BACKWARD, mb, -1, seg.layer, {}});
          for (int r = q; r >= 0 && segments_[r].layer == seg.layer; --r) {
            if (segments_[r].gathered > 0 && !Keep()) AddFetch(r, BACKWARD, mb);
          }
        }
        visits_.push_back({BACKWARD, mb, q, seg.layer, {}});
        if (seg.gathered > 0 && !Keep() && !recompute)
          AddFetch(q, BACKWARD, mb);
        // Backward frees what this segment used: its own fetch, a
        // recompute's, or (SHARD_GRAD_OP) the one kept since forward.
        const int here = static_cast<int>(visits_.size()) - 1;
        for (int f : last_fetch_[q]) fetches_[f].user = here;
        last_fetch_[q].clear();
      }
    }
    users_.assign(visits_.size(), {});
    for (int f = 0; f < static_cast<int>(fetches_.size()); ++f) {
      users_[fetches_[f].user].push_back(f);
    }
  }

  void AddFetch(int seg, Phase phase, int mb) {
    Fetch f;
    f.seg = seg;
    f.visit = static_cast<int>(visits_.size()) - 1;
    f.user = f.visit;
    f.phase = phase;
    f.mb = mb;
    const int id = static_cast<int>(fetches_.size());
    visits_.back().fetches.push_back(id);
    // A backward fetch, or a forward one kept through backward, is freed by
    // its segment's backward.
    if (phase == BACKWARD || Keep()) last_fetch_[seg].push_back(id);
    fetches_.push_back(f);
  }

  // At visit `v`'s hook: its own fetches not yet in flight (one call), then
  // the prefetch. DeepSpeed pops its trace queue from where the last hook
  // stopped and issues new fetches until they hold the prefetch bucket (or
  // what the live budget leaves), all in one call: the depth it runs ahead
  // grows hook by hook until the live budget stops it
  // (partitioned_param_coordinator.py, fetch_sub_module). FSDP and PaRO
  // gather a fixed number of units ahead, one call each.
  void Hook(int v) {
    const Visit& visit = visits_[v];
    std::vector<int> own;
    for (int f : visit.fetches) {
      if (fetches_[f].op < 0) own.push_back(f);
    }
    if (!own.empty()) EmitCall(own, fetches_[own[0]].limit);
    const bool prefetching = visit.phase == BACKWARD || ex_.forward_prefetch();
    if (!prefetching) return;
    const int next = FirstFetchAfter(v);
    if (ex_.prefetch_bucket_elements() > 0) {
      const int64_t room = ex_.max_live_elements() > 0
                               ? ex_.max_live_elements() - live_
                               : ex_.prefetch_bucket_elements();
      const int64_t budget = std::min(room, ex_.prefetch_bucket_elements());
      std::vector<int> ahead;
      int64_t numel = 0;
      int f = std::max(frontier_, next);
      for (; f < static_cast<int>(fetches_.size()) && numel < budget; ++f) {
        if (fetches_[f].op >= 0) continue;
        ahead.push_back(f);
        numel += segments_[fetches_[f].seg].gathered;
      }
      // The bucket would have gone on; the live budget stopped it.
      if (budget < ex_.prefetch_bucket_elements() &&
          f < static_cast<int>(fetches_.size()) && fetches_[f].op < 0) {
        fetches_[f].limit = MEMORY_LIMIT;
      }
      frontier_ = f;
      // One call per kind of gather (hpZ's backward ones use their group).
      std::vector<int> forward, backward;
      for (int g : ahead) {
        (fetches_[g].phase == BACKWARD ? backward : forward).push_back(g);
      }
      if (!forward.empty()) EmitCall(forward, NO_LIMIT);
      if (!backward.empty()) EmitCall(backward, NO_LIMIT);
    } else {
      for (int f = next; f < static_cast<int>(fetches_.size()) &&
                         f < next + ex_.prefetch_units();
           ++f) {
        if (fetches_[f].op < 0) EmitCall({f}, NO_LIMIT);
      }
    }
  }

  // Fetches are listed in visit order.
  int FirstFetchAfter(int v) const {
    return static_cast<int>(
        std::upper_bound(
            fetches_.begin(), fetches_.end(), v,
            [](int visit, const Fetch& f) { return visit < f.visit; }) -
        fetches_.begin());
  }

  // One all-gather call bringing the parameters of `fetches` (all of one
  // phase). The host first blocks until older gathered units are freed
  // (FSDP's rate limiter) or older calls are done (DeepSpeed's
  // back-pressure).
  void EmitCall(const std::vector<int>& fetches, Limit limit) {
    const Fetch& first = fetches_[fetches[0]];
    const bool backward = first.phase == BACKWARD;
    const bool hpz = backward && strategy_.secondary_params_intra() > 0;
    const bool qwz = !backward && strategy_.quantized_weights();
    const Group group =
        hpz ? MakeGroup(strategy_.secondary_params_intra(), 1, 1, 1)
            : FactorGroup(strategy_.p());
    int64_t params = 0;
    for (int f : fetches) params += segments_[fetches_[f].seg].gathered;
    std::vector<int> waits;
    Limit why = limit;
    const int k = static_cast<int>(calls_.size());
    if (!Keep() && ex_.max_gathered_units() > 0 &&
        k >= ex_.max_gathered_units()) {
      const Fetch& old = fetches_[calls_[k - ex_.max_gathered_units()]];
      if (old.user < static_cast<int>(visit_ops_.size())) {
        waits.push_back(visit_ops_[old.user]);
        why = MEMORY_LIMIT;
      }
    }
    if (ex_.max_inflight_fetches() > 0 && k >= ex_.max_inflight_fetches()) {
      waits.push_back(fetches_[calls_[k - ex_.max_inflight_fetches()]].op);
      if (why == NO_LIMIT) why = PREFETCH_LIMIT;
    }
    const int layer = segments_[first.seg].layer;
    for (int f : fetches) {
      fetches_[f].alloc =
          Alloc(GATHER, first.phase, first.mb, layer,
                2 * segments_[fetches_[f].seg].gathered, "P full");
    }
    const int id =
        Collective(GATHER, first.phase, first.mb, layer, ALL_GATHER, group,
                   qwz ? QuantizedBytes(params, 8) : 2 * params,
                   qwz ? INT8 : BF16, AlgorithmFor(group), qwz ? "P int8" : "P",
                   {}, 0, ex_.fetch_overhead_s());
    Op* op = out_->mutable_ops(id);
    for (int w : waits) op->add_host_waits(w);
    op->set_limited_by(why);
    for (int f : fetches) fetches_[f].op = id;
    calls_.push_back(fetches[0]);
    live_ += params;
  }

  static void AddForwardKernels(const Segment& seg, KernelList* list) {
    for (const Unit* u : seg.units) {
      for (const Kernel& k : u->forward) *list->add_kernels() = k;
    }
  }

  // Frees the fetches whose last user is visit `v` (op `id`).
  void Release(int v, int id) {
    for (int i : users_[v]) {
      const Fetch& f = fetches_[i];
      if (f.op < 0) continue;
      const Segment& seg = segments_[f.seg];
      Free(COMPUTE, visits_[v].phase, visits_[v].mb, seg.layer, f.alloc, {id});
      live_ -= seg.gathered;
    }
  }

  // Emits the whole step, visit by visit, in host order.
  void EmitVisits() {
    Bucket bucket;
    for (int v = 0; v < static_cast<int>(visits_.size()); ++v) {
      const Visit& visit = visits_[v];
      const int first_op = out_->ops_size();
      Hook(v);
      std::vector<int> deps;
      for (int f : visit.fetches) deps.push_back(fetches_[f].op);
      int id;
      if (visit.seg < 0) {
        // Recomputation rebuilds the layer's activations for its backward.
        working_[visit.layer] =
            Alloc(COMPUTE, BACKWARD, visit.mb, visit.layer,
                  layers_[visit.layer].backward_working_bytes, "recompute");
        const int layer = visit.layer;
        const int list =
            KernelListOf({"recompute", layer, false}, [&](KernelList* l) {
              for (const Segment& s : segments_) {
                if (s.layer == layer) AddForwardKernels(s, l);
              }
            });
        id = Compute(BACKWARD, visit.mb, layer, "recompute",
                     layers_[layer].name, list, deps);
      } else if (visit.phase == FORWARD) {
        const Segment& seg = segments_[visit.seg];
        // What the layer keeps for its backward (only its input when it
        // recomputes), from its first forward kernel on.
        if (seg.first_of_layer) {
          activations_[seg.layer] =
              Alloc(COMPUTE, FORWARD, visit.mb, seg.layer,
                    layers_[seg.layer].activation_bytes, "activations");
        }
        const int list =
            KernelListOf({"forward", visit.seg, false},
                         [&](KernelList* l) { AddForwardKernels(seg, l); });
        id = Compute(FORWARD, visit.mb, seg.layer, "forward", seg.name, list,
                     deps);
      } else {
        id = BackwardOp(v, deps);
      }
      // DeepSpeed ZeRO-3 synchronizes its reduce stream at the end of each
      // backward: the host issues nothing more until the reductions are done.
      if (sync_pending_ >= 0) {
        for (int o = first_op; o < out_->ops_size(); ++o) {
          out_->mutable_ops(o)->add_host_waits(sync_pending_);
        }
        sync_pending_ = -1;
      }
      visit_ops_.push_back(id);
      Release(v, id);
      // The layer's last backward (its first segment) ends its activations.
      if (visit.phase == BACKWARD && visit.seg >= 0 &&
          segments_[visit.seg].first_of_layer) {
        Free(COMPUTE, BACKWARD, visit.mb, visit.layer,
             activations_[visit.layer], {id});
        Free(COMPUTE, BACKWARD, visit.mb, visit.layer, working_[visit.layer],
             {id});
        activations_[visit.layer] = working_[visit.layer] = -1;
      }
      if (visit.phase == BACKWARD && visit.seg >= 0)
        ReduceAfter(v, id, &bucket);
    }
  }

  int BackwardOp(int v, std::vector<int> deps) {
    const Visit& visit = visits_[v];
    const Segment& seg = segments_[visit.seg];
    if (layers_[seg.layer].recompute_flops > 0) {
      // The layer's recompute, emitted just before its first segment.
      for (int r = v - 1; r >= 0; --r) {
        if (visits_[r].seg < 0 && visits_[r].layer == visit.layer) {
          deps.push_back(visit_ops_[r]);
          break;
        }
      }
    }
    if (TransientGrad()) {
      grad_alloc_[visit.seg] = Alloc(COMPUTE, BACKWARD, visit.mb, seg.layer,
                                     2 * seg.params, "G full");
    }
    // Whole gradients kept across micro-batches: autograd adds each new one
    // into .grad.
    const bool accumulates =
        visit.mb > 0 && !ex_.reduce_every_micro_batch() && seg.params > 0;
    const int list =
        KernelListOf({"backward", visit.seg, accumulates}, [&](KernelList* l) {
          for (auto u = seg.units.rbegin(); u != seg.units.rend(); ++u) {
            for (const Kernel& k : (*u)->backward) *l->add_kernels() = k;
          }
          if (accumulates) *l->add_kernels() = AccumulateKernel(seg.params);
        });
    return Compute(BACKWARD, visit.mb, seg.layer, "backward", seg.name, list,
                   deps);
  }

  bool TransientGrad() const {
    return FactorSize(strategy_.g()) > 1 || ParamsSharded();
  }
  bool ReducesNow(int mb) const {
    return ex_.reduce_every_micro_batch() || mb == last_mb_;
  }

  // Gradients into the bucket; a full bucket (or, without a bucket size,
  // the end of a layer, or the end of backward) is reduced.
  void ReduceAfter(int v, int id, Bucket* bucket) {
    const Visit& visit = visits_[v];
    const int q = visit.seg;
    const Segment& seg = segments_[q];
    const bool last_of_layer = q == 0 || segments_[q - 1].layer != seg.layer;
    if (!ReducesNow(visit.mb)) return;
    const int64_t cap = ex_.reduce_bucket_elements();
    if (cap > 0 && bucket->params > 0 && bucket->params + seg.params > cap) {
      Flush(visit.mb, bucket);
    }
    bucket->params += seg.params;
    bucket->segments.push_back(q);
    bucket->allocs.push_back(grad_alloc_[q]);
    grad_alloc_[q] = -1;
    bucket->after = id;
    if ((cap == 0 && last_of_layer) || q == 0) Flush(visit.mb, bucket);
    if (q == 0 && ex_.sync_after_backward() && visit.mb < last_mb_) {
      sync_pending_ = last_reduce_;
    }
  }

  void Flush(int mb, Bucket* bucket) {
    const bool transient_grad = TransientGrad();
    if (bucket->params == 0) {
      bucket->segments.clear();
      return;
    }
    const int done = Lins() ? ReduceLins(mb, *bucket) : ReducePaRO(mb, *bucket);
    const int layer = segments_[bucket->segments.back()].layer;
    if (transient_grad) {
      for (int alloc : bucket->allocs) {
        Free(ReduceStream(), BACKWARD, mb, layer, alloc, {done});
      }
    }
    for (int q : bucket->segments) reduced_[segments_[q].layer] = done;
    last_reduce_ = done;
    *bucket = Bucket();
  }

  // qgZ, tensor by tensor (DeepSpeed's all_to_all_quant_reduce,
  // runtime/comm/coalesced_collectives.py): a matrix whose elements divide
  // by 2 x the G group goes int4 all-to-all inside the node, then across
  // nodes on the node-reduced slice (data and scales in one call per level
  // here; DeepSpeed makes two, the scales' latency is left out). Every 1-D
  // tensor, and a matrix that does not divide, is reduce-scattered in bf16
  // over the G group instead, padded to a multiple of it
  // (reduce_scatter_coalesced of that one tensor). Returns the last call.
  int ReduceQgZ(int mb, const Bucket& bucket, int done) {
    const int layer = segments_[bucket.segments.back()].layer;
    const Stream stream = ReduceStream();
    const Group g = FactorGroup(strategy_.g());
    const int64_t world = FactorSize(strategy_.g());
    const Group intra = MakeGroup(strategy_.g().intra(), 1, 1, 1);
    const Group inter = MakeGroup(1, 1, strategy_.g().inter(), 1);
    auto reduce_scatter = [&](int64_t elements) {
      done = Collective(stream, BACKWARD, mb, layer, REDUCE_SCATTER, g,
                        2 * elements, BF16, AlgorithmFor(g), "G", {done});
    };
    for (int q : bucket.segments) {
      for (const Unit* u : segments_[q].units) {
        if (u->params == 0) continue;
        int64_t matrix = u->params;
        for (int64_t v : u->vectors) matrix -= v;
        if (matrix > 0 && matrix % (2 * world) == 0) {
          done = Collective(stream, BACKWARD, mb, layer, REDUCE_SCATTER, intra,
                            QuantizedBytes(matrix, 4), INT4, DIRECT, "G int4",
                            {done}, 0, ex_.launch_overhead_s());
          done = Collective(
              stream, BACKWARD, mb, layer, REDUCE_SCATTER, inter,
              QuantizedBytes(CeilDiv(matrix, strategy_.g().intra()), 4), INT4,
              DIRECT, "G int4", {done}, 0, ex_.launch_overhead_s());
        } else if (matrix > 0) {
          reduce_scatter(matrix);
        }
        for (int64_t v : u->vectors) reduce_scatter(v);
      }
    }
    return done;
  }

  // PaRO's factors: reduce G onto its shards every micro-batch (or once);
  // after the last one, finish the reduction over the OS scope. DeepSpeed
  // ZeRO-1/2 all-reduce their buckets whole instead of reduce-scattering.
  int ReducePaRO(int mb, const Bucket& bucket) {
    const int layer = segments_[bucket.segments.back()].layer;
    const int64_t params = bucket.params;
    const Stream stream = ReduceStream();
    int done = bucket.after;
    if (FactorSize(strategy_.g()) > 1) {
      if (strategy_.quantized_gradients()) {
        done = ReduceQgZ(mb, bucket, done);
      } else {
        const Group g = FactorGroup(strategy_.g());
        done =
            Collective(stream, BACKWARD, mb, layer,
                       ex_.all_reduce_buckets() ? ALL_REDUCE : REDUCE_SCATTER,
                       g, 2 * params, BF16, AlgorithmFor(g), "G", {done});
      }
    }
    if (mb != last_mb_) return done;
    // Once per step: G shard -> OS shard -> summed over OS replicas.
    int64_t shard = CeilDiv(2 * params, FactorSize(strategy_.g()));
    if (FactorSize(strategy_.os()) > FactorSize(strategy_.g())) {
      const Group g = RatioGroup(strategy_.os(), strategy_.g());
      done =
          Collective(stream, UPDATE, -1, layer,
                     ex_.all_reduce_buckets() ? ALL_REDUCE : REDUCE_SCATTER, g,
                     shard, BF16, AlgorithmFor(g),
                     FactorSize(strategy_.g()) > 1 ? "G shard" : "G", {done});
      shard = CeilDiv(shard, GroupSize(g));
    }
    if (FactorSize(dp_) > FactorSize(strategy_.os())) {
      const Group g = RatioGroup(dp_, strategy_.os());
      done =
          Collective(stream, UPDATE, -1, layer, ALL_REDUCE, g, shard, BF16,
                     AlgorithmFor(g),
                     FactorSize(strategy_.os()) > 1 ? "G shard" : "G", {done});
    }
    return done;
  }

  // Lins: reduce-scatter over the P group; while accumulating, all-reduce
  // over the GPUs sharing a P shard inside the G group and keep one's own
  // slice (select and drop); on the last micro-batch all-reduce over every
  // GPU sharing the P shard.
  int ReduceLins(int mb, const Bucket& bucket) {
    const int layer = segments_[bucket.segments.back()].layer;
    const int64_t full = 2 * bucket.params;
    const Stream stream = ReduceStream();
    int done = bucket.after;
    const Group p = FactorGroup(strategy_.p());
    done = Collective(stream, BACKWARD, mb, layer, REDUCE_SCATTER, p, full,
                      BF16, AlgorithmFor(p), "G", {done});
    const int64_t shard = CeilDiv(full, FactorSize(strategy_.p()));
    if (mb != last_mb_) {
      const Group g = RatioGroup(strategy_.g(), strategy_.p());
      return Collective(stream, BACKWARD, mb, layer, ALL_REDUCE, g, shard, BF16,
                        AlgorithmFor(g), "G select-and-drop", {done});
    }
    const Group all = RatioGroup(dp_, strategy_.p());
    return Collective(stream, UPDATE, -1, layer, ALL_REDUCE, all, shard, BF16,
                      AlgorithmFor(all), "G", {done});
  }

  // Optimizer on the local OS shard, layer by layer, then rebuild the P
  // shards the next step needs: per layer (overlapping the rest of the
  // update) or in one call after it; DeepSpeed's persistent parameters are
  // gathered again whole. Lins' framework (InternEvo) broadcasts after the
  // whole update: each OS-subgroup member its flat shard of every layer,
  // one call per member (hybrid_zero_optim.py broadcast_params, after a
  // device synchronize; configs/7B_sft.py overlap_sync_param=False, at
  // InternEvo c628a8c), as Lins' T_os1 = (s_os/s_p) t(BC, 2Φ/s_os) counts.
  void Update() {
    const int os = FactorSize(strategy_.os());
    const int p = FactorSize(strategy_.p());
    const Group g = RatioGroup(strategy_.os(), strategy_.p());
    int64_t rebuild = 0;
    int last_update = -1;
    for (int i = 0; i < static_cast<int>(layers_.size()); ++i) {
      const int64_t shard = CeilDiv(layers_[i].params, os);
      const int list =
          KernelListOf({"optimizer", i, false}, [&](KernelList* l) {
            for (const Kernel& k : OptimizerKernels(shard)) {
              *l->add_kernels() = k;
            }
          });
      const int update = Compute(UPDATE, -1, i, "optimizer", layers_[i].name,
                                 list, {reduced_[i]});
      last_update = update;
      for (const Unit& u : layers_[i].units) {
        if (ParamsSharded() && u.params > 0 &&
            u.params <= ex_.persistence_threshold()) {
          Collective(GATHER, UPDATE, -1, i, ALL_GATHER,
                     FactorGroup(strategy_.p()), 2 * u.params, BF16,
                     AlgorithmFor(FactorGroup(strategy_.p())), "P persistent",
                     {update});
        }
      }
      if (os == p) continue;
      const int64_t p_shard = CeilDiv(2 * layers_[i].params, p);
      if (!Lins() && ex_.rebuild_per_layer()) {
        Collective(GATHER, UPDATE, -1, i, ALL_GATHER, g, p_shard, BF16,
                   AlgorithmFor(g), "P shard", {update});
      } else {
        rebuild += p_shard;
      }
    }
    if (rebuild == 0) return;
    if (!Lins()) {
      Collective(GATHER, UPDATE, -1, -1, ALL_GATHER, g, rebuild, BF16,
                 AlgorithmFor(g), "P shard", {last_update});
      return;
    }
    for (int root = 0; root < GroupSize(g); ++root) {
      Collective(GATHER, UPDATE, -1, -1, BROADCAST, g, CeilDiv(rebuild, os / p),
                 BF16, AlgorithmFor(g), "P slice", {last_update}, root);
    }
  }

  const std::vector<Layer>& layers_;
  const Strategy& strategy_;
  const Execution& ex_;
  Schedule* out_;
  const Factor dp_;
  const int last_mb_;
  std::vector<Segment> segments_;        // forward order over the model
  std::vector<Visit> visits_;            // the step's compute ops, host order
  std::vector<int> visit_ops_;           // their op ids, as emitted
  std::vector<Fetch> fetches_;           // the step's gathers, by first need
  std::vector<std::vector<int>> users_;  // per visit: fetches it frees
  // Per segment: its fetches still to be freed by its next backward.
  std::vector<std::vector<int>> last_fetch_;
  std::vector<int> calls_;  // gather calls in issue order (first fetch)
  int frontier_ = 0;        // where DeepSpeed's prefetch resumes
  int64_t live_ = 0;        // gathered parameters not yet freed
  const double optimizer_bytes_per_param_;
  std::vector<int> reduced_;       // per layer: last op reducing its G
  std::vector<int> activations_;   // per layer: its live activations' alloc
  std::vector<int> working_;       // per layer: its live recompute's alloc
  std::map<int, int> grad_alloc_;  // per segment: its unreduced gradients
  int last_reduce_ = -1;
  int sync_pending_ = -1;           // the next host op waits for this reduction
  std::map<ListKey, int> lists_;    // kernel lists made so far, by key
  std::vector<double> list_flops_;  // per kernel list: its model FLOPs
};

}  // namespace

int64_t QuantizedBytes(int64_t elements, int bits) {
  return CeilDiv(elements * bits, 8) +
         CeilDiv(elements, kQuantGroupElements) * kQuantScaleBytes;
}

absl::StatusOr<OwnedSchedule> LowerStep(const std::vector<Layer>& layers,
                                        const Strategy& strategy,
                                        const Mesh& mesh,
                                        const Scenario& scenario) {
  if (absl::Status s = ValidateStrategy(strategy, mesh); !s.ok()) return s;
  if (layers.empty()) return absl::InvalidArgumentError("model has no layers");
  if (strategy.execution().gather_unit() == GATHER_UNIT_UNSPECIFIED) {
    return absl::InternalError(
        absl::StrCat("strategy \"", strategy.name(),
                     "\": execution profile not resolved (ResolveExecution)"));
  }
  OwnedSchedule owned;
  Schedule& schedule = *owned.mutable_schedule();
  schedule.set_strategy(strategy.name());
  schedule.set_gpus(mesh.gpus());
  schedule.set_gpus_per_node(mesh.gpus_per_node);
  schedule.set_tokens_per_step(int64_t{mesh.gpus()} *
                               scenario.micro_batch_size() *
                               scenario.seq_len() * scenario.micro_batches());
  StepBuilder(layers, strategy, mesh, scenario, &schedule).Build();
  return owned;
}

void UseAlgorithms(const Strategy& strategy, Schedule* schedule) {
  for (Op& op : *schedule->mutable_ops()) {
    if (!op.has_collective() || op.collective().algorithm() == DIRECT) continue;
    CollectiveCall* c = op.mutable_collective();
    c->set_algorithm(AlgorithmFor(strategy, c->group()));
  }
}

const KernelList& KernelsOf(const Schedule& schedule, const ComputeOp& op) {
  const int i = op.kernel_list();
  if (i < 0 || i >= schedule.kernel_lists_size()) {
    std::fprintf(stderr,
                 "shardsim: internal error: compute op names kernel list %d "
                 "of %d\n",
                 i, schedule.kernel_lists_size());
    std::abort();
  }
  return schedule.kernel_lists(i);
}

std::string FormatSchedule(const Schedule& s) {
  std::string out = absl::StrFormat(
      "schedule of %s on %d GPUs (%d per node), %d ops, %d tokens per step\n",
      s.strategy(), s.gpus(), s.gpus_per_node(), s.ops_size(),
      s.tokens_per_step());
  absl::StrAppendFormat(&out, "%5s  %-7s %-8s %4s  %-34s %s\n", "id", "stream",
                        "phase", "mb", "op", "details");
  for (const Op& op : s.ops()) {
    std::string details;
    switch (op.body_case()) {
      case Op::kCompute:
        details = absl::StrFormat("%.3f GFLOP, %d kernels",
                                  op.compute().flops() / 1e9,
                                  KernelsOf(s, op.compute()).kernels_size());
        break;
      case Op::kCollective: {
        const CollectiveCall& c = op.collective();
        details = absl::StrFormat(
            "%s over %s, %s, %.3f MB %s", CollectiveOp_Name(c.op()),
            GroupName(c.group()), Algorithm_Name(c.algorithm()),
            c.bytes() / 1e6, DType_Name(c.dtype()));
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
