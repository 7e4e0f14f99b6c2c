#include "sim/schedule/pipeline/pipeline.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/lower/pass.h"
#include "sim/schedule/lower/step.h"
#include "sim/schedule/lower/walk.h"
#include "sim/schedule/pipeline/order.h"

namespace shardsim {
namespace {

// A pass of one micro-batch through one chunk: (forward, mb, chunk).
using PassKey = std::tuple<bool, int, int>;

// Where a stage's pass meets its neighbours: the first compute op, which
// waits for what the neighbour sends, and the send it ends with (-1: the
// first or last virtual stage in that direction sends nothing).
struct Boundary {
  int receive = -1;
  int send = -1;
};

// The stage's visits: each pass of the order over its chunk's segments,
// forward in model order, backward in reverse.
std::vector<lower::Visit> WalkStage(const std::vector<lower::Segment>& segs,
                                    const std::vector<int>& chunk_of_layer,
                                    const std::vector<PipeStep>& order) {
  std::vector<lower::Visit> visits;
  const int n = static_cast<int>(segs.size());
  for (const PipeStep& p : order) {
    for (int i = 0; i < n; ++i) {
      const int q = p.forward ? i : n - 1 - i;
      if (chunk_of_layer[segs[q].layer] != p.chunk) continue;
      visits.push_back(
          {p.forward ? FORWARD : BACKWARD, p.mb, q, segs[q].layer});
    }
  }
  return visits;
}

// After the lowering's passes: marks each pass's first compute op and
// sends its output at its last, to the next virtual stage (forward) or
// the previous one (backward).
class SendPass : public lower::Pass {
 public:
  // `peer(key)`: the program a pass's output goes to, -1 for none.
  // `from(key)`: the program a pass's input comes from, -1 for none.
  // Under Execution.pipeline_scatter_gather each tensor-parallel rank sends
  // 1/tp of the `bytes` (Megatron-LM's split_tensor_into_1d_equal_chunks,
  // when they divide evenly) and the receiving pass first all-gathers them
  // over its tensor-parallel group (gather_split_1d_tensor), on the compute
  // stream as that code blocks on it.
  SendPass(lower::Step* step, const std::vector<int>& chunk_of_layer,
           std::function<int(const PassKey&)> peer,
           std::function<int(const PassKey&)> from, int64_t bytes,
           std::map<PassKey, Boundary>* out)
      : step_(*step),
        chunk_of_layer_(chunk_of_layer),
        peer_(std::move(peer)),
        from_(std::move(from)),
        bytes_(bytes),
        out_(*out) {
    const int tp = step_.layout().tp();
    split_ = step_.ex().pipeline_scatter_gather() && tp > 1 &&
             bytes_ % (2 * tp) == 0;  // whole bf16 values a rank
    if (split_) send_bytes_ = bytes_ / tp;
  }

  void Begin() override {
    // Recomputes are in the visits now (InsertRecomputes): a backward pass
    // starts with them.
    const auto& visits = step_.visits;
    for (int v = 0; v < static_cast<int>(visits.size()); ++v) {
      const PassKey k = Key(v);
      if (first_.count(k) == 0) first_[k] = v;
      last_[k] = v;
    }
  }

  void BeforeCompute(int v, std::vector<int>* deps) override {
    const PassKey k = Key(v);
    if (!split_ || first_[k] != v || from_(k) < 0) return;
    const lower::Visit& visit = step_.visits[v];
    const bool fwd = std::get<0>(k);
    const int gather = step_.DimCollective(
        COMPUTE, visit.phase, visit.mb, visit.layer, Dim::kTp, ALL_GATHER,
        bytes_, BF16,
        fwd ? "received activations" : "received activation grads", {});
    out_[k].receive = gather;  // what waits for the sender's send
    deps->push_back(gather);
  }

  void AfterCompute(int v, int op) override {
    const PassKey k = Key(v);
    if (first_[k] == v && out_[k].receive < 0) out_[k].receive = op;
    if (last_[k] != v) return;
    const int peer = peer_(k);
    if (peer < 0) return;
    const lower::Visit& visit = step_.visits[v];
    const bool fwd = std::get<0>(k);
    Op* send = step_.NewOp(
        COMPUTE, visit.phase, visit.mb, visit.layer,
        absl::StrCat("send ", fwd ? "activations" : "activation grads", " to ",
                     "stage ", peer),
        {op});
    PointToPoint* p = send->mutable_send();
    p->set_bytes(send_bytes_);
    p->set_dtype(BF16);
    p->set_tensor(fwd ? "activations" : "activation grads");
    p->set_peer_program(peer);
    out_[k].send = send->id();
  }

 private:
  PassKey Key(int v) const {
    const lower::Visit& visit = step_.visits[v];
    return {visit.phase == FORWARD, visit.mb, chunk_of_layer_[visit.layer]};
  }

  lower::Step& step_;
  const std::vector<int>& chunk_of_layer_;
  std::function<int(const PassKey&)> peer_;
  std::function<int(const PassKey&)> from_;
  const int64_t bytes_;
  bool split_ = false;
  int64_t send_bytes_ = bytes_;  // what each rank sends
  std::map<PassKey, Boundary>& out_;
  std::map<PassKey, int> first_, last_;  // visits of each pass
};

struct StageSchedule {
  Schedule* schedule = nullptr;  // one program: this stage's, on out's arena
  std::map<PassKey, Boundary> boundaries;
};

// The order Merge lists the stages' ops in: (stage, index in the stage).
using Order = std::vector<std::pair<int, int>>;

// Where Merge stands: the ops listed so far, and per stage the next op
// to list.
struct Listing {
  const std::vector<std::vector<Op*>>& ops;
  const std::vector<std::vector<std::pair<int, int>>>& cross;
  // cross_of[p][i]: index into cross[p] of op i's receive (-1: none).
  const std::vector<std::vector<int>>& cross_of;
  std::vector<std::vector<bool>> placed;
  std::vector<int> next;
  Order order;

  Listing(const std::vector<std::vector<Op*>>& o,
          const std::vector<std::vector<std::pair<int, int>>>& c,
          const std::vector<std::vector<int>>& c_of)
      : ops(o), cross(c), cross_of(c_of), next(o.size(), 0) {
    for (const std::vector<Op*>& stage : ops) {
      placed.emplace_back(stage.size(), false);
    }
  }

  // Whether stage p's next op may be listed: its receive's send is.
  bool Ready(int p) const {
    const int c = cross_of[p][next[p]];
    if (c < 0) return true;
    const auto [q, j] = cross[p][c];
    return placed[q][j];
  }
  void Place(int p) {
    placed[p][next[p]] = true;
    order.push_back({p, next[p]++});
  }
  // Lists each stage's ops up to ends[p], each stage in turn as far as its
  // receives allow, until all are; false when they wait on each other's
  // sends past the ends.
  bool PlaceUpTo(const std::vector<int>& ends) {
    for (bool progress = true; progress;) {
      progress = false;
      bool all = true;
      for (int p = 0; p < static_cast<int>(ops.size()); ++p) {
        while (next[p] < ends[p] && Ready(p)) {
          Place(p);
          progress = true;
        }
        all = all && next[p] >= ends[p];
      }
      if (all) return true;
    }
    return false;
  }
  // Every op, as PlaceUpTo does.
  absl::Status PlaceRest() {
    std::vector<int> ends;
    for (const std::vector<Op*>& stage : ops) {
      ends.push_back(static_cast<int>(stage.size()));
    }
    if (!PlaceUpTo(ends)) {
      return absl::InternalError(
          "pipeline: the stages wait for each other's sends in a cycle");
    }
    return absl::OkStatus();
  }
};

// Block by block (sim/schedule/periodic.h), in rounds of `stride` blocks:
// every stage's ops before its first micro-batch, then every stage's
// blocks 0 .. stride - 1, then the next `stride`, ..., then the stages'
// last blocks (the cool-down); within each round the stages in turn, each
// as far as its receives allow (in stage order where none waits on a
// later stage's send). Where every stage repeats its micro-batches
// (1F1B's steady state) the merged schedule then repeats its blocks too,
// and the engine collapses it (replay.h). nullopt when a stage's
// micro-batches do not start in order, or a round's stages wait on a
// later round's send.
std::optional<Order> BlockOrder(
    const std::vector<std::vector<Op*>>& ops,
    const std::vector<std::vector<std::pair<int, int>>>& cross,
    const std::vector<std::vector<int>>& cross_of, int stride) {
  const int n = static_cast<int>(ops.size());
  // Per stage, the first op of each block: starts[p][k + 1] for block k.
  std::vector<std::vector<int>> starts(n);
  for (int p = 0; p < n; ++p) {
    starts[p].push_back(0);
    for (int i = 0; i < static_cast<int>(ops[p].size()); ++i) {
      const int mb = ops[p][i]->micro_batch();
      const int block = static_cast<int>(starts[p].size()) - 2;
      if (mb <= block) continue;
      if (mb != block + 1) return std::nullopt;
      starts[p].push_back(i);
    }
    if (starts[p].size() != starts[0].size()) return std::nullopt;
  }
  Listing l(ops, cross, cross_of);
  const int last = static_cast<int>(starts[0].size()) - 2;  // the last block
  std::vector<int> ends(n);
  // Round -1 is the ops before block 0; round k ends with block
  // (k + 1) * stride - 1.
  for (int end = -1; end < last; end = end < 0 ? stride - 1 : end + stride) {
    for (int p = 0; p < n; ++p) ends[p] = starts[p][end + 2];
    if (!l.PlaceUpTo(ends)) return std::nullopt;
  }
  if (!l.PlaceRest().ok()) return std::nullopt;
  return std::move(l.order);
}

// Lists every stage's ops in one schedule: each program's in its own order,
// interleaved so that every send comes before the ops that wait for it
// (the contract's deps on earlier ops), block by block where the stages
// allow it (BlockOrder), ids renumbered. The ops move, not copied: the
// stages are on `out`'s arena, and a 1T model's 64 stages of 512
// micro-batches are 2.9 M ops (1 GB) that would otherwise be held twice.
absl::Status Merge(const std::vector<StageSchedule>& stages,
                   const std::vector<std::vector<std::pair<int, int>>>& cross,
                   const std::vector<std::vector<int>>& cross_of,
                   Schedule* out) {
  const int n = static_cast<int>(stages.size());
  std::vector<int> list_offset(n, 0);
  std::vector<std::vector<int>> id(n);
  std::vector<std::vector<Op*>> ops(n);
  for (int p = 0; p < n; ++p) {
    Schedule& s = *stages[p].schedule;
    list_offset[p] = out->kernel_lists_size();
    for (const KernelList& l : s.kernel_lists()) *out->add_kernel_lists() = l;
    id[p].assign(s.ops_size(), -1);
    ops[p].resize(s.ops_size());
    s.mutable_ops()->UnsafeArenaExtractSubrange(0, s.ops_size(), ops[p].data());
  }
  // Rounds of one block each; else of a group of as many micro-batches as
  // there are stages (interleaved 1F1B runs them so, and ZeRO-3's stages
  // prefetch the next micro-batch before they send).
  std::optional<Order> order = BlockOrder(ops, cross, cross_of, 1);
  if (!order && n > 1) order = BlockOrder(ops, cross, cross_of, n);
  if (!order) {  // each stage in turn, as far as its receives allow
    Listing l(ops, cross, cross_of);
    if (absl::Status s = l.PlaceRest(); !s.ok()) return s;
    order = std::move(l.order);
  }
  out->mutable_ops()->Reserve(static_cast<int>(order->size()));
  for (const auto& [p, i] : *order) {
    Op* op = ops[p][i];
    op->set_id(out->ops_size());
    op->set_program(p);
    id[p][i] = op->id();
    // Deps and waits are on earlier ops of the stage: placed already.
    for (int k = 0; k < op->deps_size(); ++k) {
      op->set_deps(k, id[p][op->deps(k)]);
    }
    if (const int c = cross_of[p][i]; c >= 0) {
      op->add_deps(id[cross[p][c].first][cross[p][c].second]);
    }
    for (int k = 0; k < op->host_waits_size(); ++k) {
      op->set_host_waits(k, id[p][op->host_waits(k)]);
    }
    if (op->has_memory() && op->memory().delta_bytes() < 0) {
      op->mutable_memory()->set_frees(id[p][op->memory().frees()]);
    }
    if (op->has_compute()) {
      op->mutable_compute()->set_kernel_list(op->compute().kernel_list() +
                                             list_offset[p]);
    }
    out->mutable_ops()->UnsafeArenaAddAllocated(op);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int>>> VirtualStageLayers(
    int blocks, int stages, int chunks, const std::vector<int>& stage_layers) {
  const int virtual_stages = stages * chunks;
  std::vector<int> per(virtual_stages, 0);
  if (!stage_layers.empty()) {
    if (chunks != 1 || static_cast<int>(stage_layers.size()) != stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field parallelism.stage_layers: ", stage_layers.size(),
          " entries; give one per pipeline stage (", stages, "), without vpp"));
    }
    if (std::accumulate(stage_layers.begin(), stage_layers.end(), 0) !=
        blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field parallelism.stage_layers: they sum to ",
          std::accumulate(stage_layers.begin(), stage_layers.end(), 0),
          ", the model has ", blocks, " blocks"));
    }
    per = stage_layers;
  } else {
    if (blocks % virtual_stages != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field parallelism.pp: the model's ", blocks,
          " blocks do not split evenly over ", stages, " stages x ", chunks,
          " chunks (give parallelism.stage_layers for an uneven split)"));
    }
    per.assign(virtual_stages, blocks / virtual_stages);
  }
  std::vector<std::vector<int>> out(virtual_stages);
  int layer = 1;  // 0 is the embedding
  for (int v = 0; v < virtual_stages; ++v) {
    if (v == 0) out[v].push_back(0);
    for (int k = 0; k < per[v]; ++k) out[v].push_back(layer++);
    if (v == virtual_stages - 1) out[v].push_back(blocks + 1);  // head
  }
  return out;
}

absl::Status LowerPipeline(const std::vector<Layer>& layers,
                           const Strategy& strategy, const Layout& layout,
                           const Scenario& scenario, Schedule* out) {
  const int pp = layout.pp();
  const int chunks = std::max(1, scenario.parallelism().vpp());
  const std::vector<int> uneven(scenario.parallelism().stage_layers().begin(),
                                scenario.parallelism().stage_layers().end());
  absl::StatusOr<std::vector<std::vector<int>>> vstages = VirtualStageLayers(
      static_cast<int>(layers.size()) - 2, pp, chunks, uneven);
  if (!vstages.ok()) return vstages.status();
  const int last_virtual = pp * chunks - 1;
  const int64_t boundary = layers.front().output_bytes;  // same for every block
  // The stages are lowered on out's arena, where Merge moves their ops.
  google::protobuf::Arena* arena = out->GetArena();
  if (arena == nullptr) {
    return absl::InternalError("pipeline: the step must be on an arena");
  }
  std::vector<StageSchedule> stages(pp);
  std::vector<std::vector<Layer>> stage_layers(pp);
  for (int s = 0; s < pp; ++s) {
    std::vector<int> chunk_of_layer;
    for (int c = 0; c < chunks; ++c) {
      for (int l : (*vstages)[c * pp + s]) {
        stage_layers[s].push_back(layers[l]);
        chunk_of_layer.push_back(c);
      }
    }
    absl::StatusOr<std::vector<PipeStep>> order =
        StageOrder(scenario.parallelism().pipeline_schedule(), pp, chunks,
                   scenario.micro_batches(), s);
    if (!order.ok()) return order.status();
    // Forward to virtual stage c * pp + s + 1, backward to ... - 1.
    auto peer = [s, pp, last_virtual](const PassKey& k) {
      const int v = std::get<2>(k) * pp + s + (std::get<0>(k) ? 1 : -1);
      return v < 0 || v > last_virtual ? -1 : v % pp;
    };
    Schedule* sched = google::protobuf::Arena::CreateMessage<Schedule>(arena);
    stages[s].schedule = sched;
    lower::Step step(stage_layers[s], strategy, layout, scenario, sched);
    step.segments = lower::BuildSegments(stage_layers[s], strategy.execution(),
                                         step.ParamsSharded());
    step.visits = WalkStage(step.segments, chunk_of_layer, *order);
    // Forward from virtual stage c * pp + s - 1, backward from ... + 1.
    auto from = [s, pp, last_virtual](const PassKey& k) {
      const int v = std::get<2>(k) * pp + s + (std::get<0>(k) ? -1 : 1);
      return v < 0 || v > last_virtual ? -1 : v % pp;
    };
    SendPass sends(&step, chunk_of_layer, peer, from, boundary,
                   &stages[s].boundaries);
    lower::RunLoweringPasses(&step, &sends);
  }
  // Each pass that receives waits for its sender's send: forward from
  // virtual stage v - 1, backward from v + 1.
  std::vector<std::vector<std::pair<int, int>>> cross(pp);
  std::vector<std::vector<int>> cross_of(pp);
  for (int s = 0; s < pp; ++s) {
    cross_of[s].assign(stages[s].schedule->ops_size(), -1);
    for (const auto& [key, b] : stages[s].boundaries) {
      const auto [fwd, mb, c] = key;
      const int v = c * pp + s + (fwd ? -1 : 1);
      if (v < 0 || v > last_virtual) continue;
      const int from = v % pp;
      const Boundary& sender = stages[from].boundaries.at({fwd, mb, v / pp});
      cross_of[s][b.receive] = static_cast<int>(cross[s].size());
      cross[s].push_back({from, sender.send});
    }
  }
  for (int s = 0; s < pp; ++s) {
    Program* p = out->add_programs();
    p->set_role(absl::StrCat("stage ", s));
    for (int r : layout.StageRanks(s)) p->add_ranks(r);
  }
  return Merge(stages, cross, cross_of, out);
}

}  // namespace shardsim
