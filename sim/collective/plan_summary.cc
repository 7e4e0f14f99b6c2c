#include "sim/collective/plan_summary.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace shardsim {
namespace {

enum Kind { kIntra = 1, kInter = 2 };

int Wrap(int a, int n) { return ((a % n) + n) % n; }

// Hops of one stage while they are being summed: bytes, and the steps each
// is used in as intervals (passes on one hop may overlap in time; a hop
// sends one message per step, so a step counts once).
struct HopBuilder {
  Hop hop;
  std::vector<std::pair<int, int>> steps;  // [first, last]
};
using StageHops = std::map<std::pair<int32_t, int32_t>, HopBuilder>;

void AddToHop(StageHops* hops, const PlanShape& shape, int src, int dst,
              int64_t elements, int first, int last) {
  HopBuilder& b = (*hops)[{src, dst}];
  b.hop.src = src;
  b.hop.dst = dst;
  b.hop.inter = LeavesNode(shape, src, dst);
  b.hop.elements += elements;
  b.steps.push_back({first, last});
}

int CountSteps(std::vector<std::pair<int, int>> steps) {
  std::sort(steps.begin(), steps.end());
  int count = 0;
  int covered = -1;  // last step already counted
  for (auto [first, last] : steps) {
    first = std::max(first, covered + 1);
    if (first <= last) {
      count += last - first + 1;
      covered = last;
    }
  }
  return count;
}

// Raises the step's largest message of its kind to `elements`.
void AddToStep(StepLoad* load, const PlanShape& shape, int src, int dst,
               int64_t elements) {
  int64_t& slot = src == kSwitch || dst == kSwitch ? load->via_switch
                  : LeavesNode(shape, src, dst)    ? load->inter
                                                   : load->intra;
  slot = std::max(slot, elements);
}

// Intra hops of each node, as (stage, local src, local dst, elements,
// steps): symmetric when every node has the same multiset.
bool IntraSymmetric(const PlanShape& shape, const std::vector<Stage>& stages) {
  using Key = std::tuple<size_t, int, int, int64_t, int>;
  std::vector<std::multiset<Key>> per_node(shape.nodes);
  for (size_t s = 0; s < stages.size(); ++s) {
    for (const Hop& h : stages[s].hops) {
      if (h.inter) continue;
      per_node[shape.NodeOf(h.src)].insert({s, h.src % shape.per_node,
                                            h.dst % shape.per_node, h.elements,
                                            h.steps});
    }
  }
  for (int n = 1; n < shape.nodes; ++n) {
    if (per_node[n] != per_node[0]) return false;
  }
  return true;
}

// Phase 1: the kind of every step, from what its explicit transfers and
// ring passes cross; a stage is a run of one kind, so kinds come first.
std::vector<int> StepKinds(const Plan& plan) {
  const PlanShape& shape = plan.shape;
  std::vector<int> kind(std::max(plan.num_steps, 1), 0);
  for (const Transfer& t : plan.transfers) {
    kind[t.step] |= LeavesNode(shape, t.src, t.dst) ? kInter : kIntra;
  }
  for (const RingPass& ring : plan.rings) {
    const int n = static_cast<int>(ring.order.size());
    int pass_kind = 0;
    for (int r = 0; r < n; ++r) {
      const bool leaves =
          LeavesNode(shape, ring.order[r], ring.order[(r + 1) % n]);
      pass_kind |= leaves ? kInter : kIntra;
    }
    for (int t = 0; t + 1 < n; ++t) kind[ring.first_step + t] |= pass_kind;
  }
  return kind;
}

// Every step's kind and stage.
struct StepLayout {
  std::vector<int> kind;   // kIntra | kInter; 0: idle
  std::vector<int> stage;  // per step
  int num_stages = 1;
};

// Phase 2: a new stage wherever the kind changes, since a hierarchical
// algorithm's phases run one after another; idle steps change nothing.
StepLayout CutStages(std::vector<int> kind) {
  StepLayout layout;
  layout.stage.assign(kind.size(), 0);
  int stages = 0;
  int current = 0;
  for (size_t s = 0; s < kind.size(); ++s) {
    if (kind[s] != 0 && kind[s] != current) {
      current = kind[s];
      ++stages;
    }
    layout.stage[s] = std::max(stages - 1, 0);
  }
  layout.kind = std::move(kind);
  layout.num_stages = std::max(stages, 1);
  return layout;
}

// What one pair of members sends in one step, all channels together:
// (step, src, dst) -> elements, ordered by step.
using StepMessages = std::map<std::tuple<int, int, int>, int64_t>;

// Phase 3: explicit transfers, summed per hop of their stage and, since
// channels of one pair share the link, per pair and step for the floor.
StepMessages AddTransfers(const Plan& plan, const StepLayout& layout,
                          std::vector<StageHops>* hops,
                          std::vector<StepLoad>* load) {
  StepMessages messages;
  for (const Transfer& t : plan.transfers) {
    AddToHop(&(*hops)[layout.stage[t.step]], plan.shape, t.src, t.dst, t.count,
             t.step, t.step);
    messages[{t.step, t.src, t.dst}] += t.count;
  }
  for (const auto& [key, elements] : messages) {
    const auto& [step, src, dst] = key;
    AddToStep(&(*load)[step], plan.shape, src, dst, elements);
  }
  return messages;
}

// Phase 4: ring passes as hops. They need no floor: a pipelined ring is
// exactly its hops' flows plus alpha per step.
void AddRingPasses(const Plan& plan, const StepLayout& layout,
                   std::vector<StageHops>* hops) {
  for (const RingPass& ring : plan.rings) {
    const int n = static_cast<int>(ring.order.size());
    if (n < 2) continue;
    const int first = ring.first_step;
    const int last = first + n - 2;
    auto hop_ends = [&](int r) {
      std::pair<int, int> e{ring.order[r], ring.order[(r + 1) % n]};
      if (ring.reversed) std::swap(e.first, e.second);
      return e;
    };
    // Hop r carries every range but the one its successor starts (or ends)
    // with (plan.cc's CountVolume). A pass lies in one stage, or, across
    // stages (HO-Ring's rows), joins the one where its data is ready: where
    // it starts, or, reversed, where it ends (what it reduced moves on).
    const int home = layout.stage[ring.reversed ? last : first];
    int64_t total = 0;
    for (const Range& r : ring.ranges) total += r.count;
    for (int r = 0; r < n; ++r) {
      const auto [src, dst] = hop_ends(r);
      AddToHop(&(*hops)[home], plan.shape, src, dst,
               total - ring.ranges[Wrap(r + 1 - ring.lag, n)].count, first,
               last);
    }
  }
}

// Stages that any ring pass of two or more members runs in: those are not
// run step by step.
std::vector<bool> StagesWithRings(const Plan& plan, const StepLayout& layout) {
  std::vector<bool> has_ring(layout.num_stages, false);
  for (const RingPass& ring : plan.rings) {
    if (ring.order.size() < 2) continue;
    const int n = static_cast<int>(ring.order.size());
    for (int t = 0; t + 1 < n; ++t) {
      has_ring[layout.stage[ring.first_step + t]] = true;
    }
  }
  return has_ring;
}

// One stage's messages, step by step (Stage::by_step): aggregating an
// all-to-all's steps would put every flow in flight at once.
std::vector<std::vector<Hop>> ByStep(const StepMessages& messages,
                                     const StepLayout& layout, int stage,
                                     const PlanShape& shape) {
  std::vector<std::vector<Hop>> by_step;
  int step = -1;
  for (const auto& [key, elements] : messages) {  // ordered by step
    const auto& [s, src, dst] = key;
    if (layout.stage[s] != stage) continue;
    if (s != step) {
      by_step.emplace_back();
      step = s;
    }
    Hop h;
    h.src = src;
    h.dst = dst;
    h.elements = elements;
    h.steps = 1;
    h.inter = LeavesNode(shape, src, dst);
    by_step.back().push_back(h);
  }
  return by_step;
}

// Phase 5: the stages as the engine runs them, with their floors; a stage
// whose hops carry no bytes is left out, having no flow to run.
std::vector<Stage> AssembleStages(const Plan& plan, const StepLayout& layout,
                                  std::vector<StageHops> hops,
                                  const std::vector<StepLoad>& load,
                                  const StepMessages& messages) {
  const std::vector<bool> has_ring = StagesWithRings(plan, layout);
  std::vector<Stage> stages;
  for (int i = 0; i < layout.num_stages; ++i) {
    Stage stage;
    for (auto& [key, b] : hops[i]) {
      if (b.hop.elements == 0) continue;
      b.hop.steps = CountSteps(std::move(b.steps));
      stage.hops.push_back(b.hop);
    }
    for (size_t s = 0; s < layout.kind.size(); ++s) {
      if (layout.kind[s] != 0 && layout.stage[s] == i) {
        stage.steps.push_back(load[s]);
      }
    }
    if (!has_ring[i]) stage.by_step = ByStep(messages, layout, i, plan.shape);
    if (!stage.hops.empty()) stages.push_back(std::move(stage));
  }
  return stages;
}

}  // namespace

PlanSummary Summarize(const Plan& plan) {
  PlanSummary out;
  out.volume = CountVolume(plan);
  const StepLayout layout = CutStages(StepKinds(plan));
  std::vector<StageHops> hops(layout.num_stages);
  std::vector<StepLoad> load(layout.kind.size());
  const StepMessages messages = AddTransfers(plan, layout, &hops, &load);
  AddRingPasses(plan, layout, &hops);
  out.stages = AssembleStages(plan, layout, std::move(hops), load, messages);
  out.intra_symmetric = IntraSymmetric(plan.shape, out.stages);
  return out;
}

}  // namespace shardsim
