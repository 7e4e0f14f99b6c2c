#include "sim/engine/plan_summary.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

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

}  // namespace

PlanSummary Summarize(const Plan& plan) {
  PlanSummary out;
  out.volume = CountVolume(plan);
  const PlanShape& shape = plan.shape;

  // Kind of every step: what its explicit transfers and ring passes cross.
  std::vector<int> kind(std::max(plan.num_steps, 1), 0);
  for (const Transfer& t : plan.transfers) {
    kind[t.step] |= LeavesNode(shape, t.src, t.dst) ? kInter : kIntra;
  }
  std::vector<int> pass_kind(plan.rings.size(), 0);
  for (size_t i = 0; i < plan.rings.size(); ++i) {
    const RingPass& ring = plan.rings[i];
    const int n = static_cast<int>(ring.order.size());
    for (int r = 0; r < n; ++r) {
      const bool leaves =
          LeavesNode(shape, ring.order[r], ring.order[(r + 1) % n]);
      pass_kind[i] |= leaves ? kInter : kIntra;
    }
    for (int t = 0; t + 1 < n; ++t) kind[ring.first_step + t] |= pass_kind[i];
  }
  // A new stage wherever the kind changes; idle steps change nothing.
  std::vector<int> stage_of(kind.size(), 0);
  int stages = 0;
  int current = 0;
  for (size_t s = 0; s < kind.size(); ++s) {
    if (kind[s] != 0 && kind[s] != current) {
      current = kind[s];
      ++stages;
    }
    stage_of[s] = std::max(stages - 1, 0);
  }
  std::vector<StageHops> hops(std::max(stages, 1));
  std::vector<StepLoad> load(kind.size());
  std::vector<bool> has_ring(hops.size(), false);
  for (const RingPass& ring : plan.rings) {
    if (ring.order.size() < 2) continue;
    const int n = static_cast<int>(ring.order.size());
    for (int t = 0; t + 1 < n; ++t)
      has_ring[stage_of[ring.first_step + t]] = true;
  }

  // Explicit transfers: what one pair of members sends in one step, all
  // channels together (they share the link).
  std::map<std::tuple<int, int, int>, int64_t> messages;
  for (const Transfer& t : plan.transfers) {
    AddToHop(&hops[stage_of[t.step]], shape, t.src, t.dst, t.count, t.step,
             t.step);
    messages[{t.step, t.src, t.dst}] += t.count;
  }
  for (const auto& [key, elements] : messages) {
    const auto& [step, src, dst] = key;
    AddToStep(&load[step], shape, src, dst, elements);
  }
  for (size_t i = 0; i < plan.rings.size(); ++i) {
    const RingPass& ring = plan.rings[i];
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
    const int home = stage_of[ring.reversed ? last : first];
    int64_t total = 0;
    for (const Range& r : ring.ranges) total += r.count;
    for (int r = 0; r < n; ++r) {
      const auto [src, dst] = hop_ends(r);
      AddToHop(&hops[home], shape, src, dst,
               total - ring.ranges[Wrap(r + 1 - ring.lag, n)].count, first,
               last);
    }
  }
  for (int i = 0; i < static_cast<int>(hops.size()); ++i) {
    Stage stage;
    for (auto& [key, b] : hops[i]) {
      if (b.hop.elements == 0) continue;
      b.hop.steps = CountSteps(std::move(b.steps));
      stage.hops.push_back(b.hop);
    }
    for (size_t s = 0; s < kind.size(); ++s) {
      if (kind[s] != 0 && stage_of[s] == i) stage.steps.push_back(load[s]);
    }
    if (!has_ring[i]) {
      int step = -1;
      for (const auto& [key, elements] : messages) {  // ordered by step
        const auto& [s, src, dst] = key;
        if (stage_of[s] != i) continue;
        if (s != step) {
          stage.by_step.emplace_back();
          step = s;
        }
        Hop h;
        h.src = src;
        h.dst = dst;
        h.elements = elements;
        h.steps = 1;
        h.inter = LeavesNode(shape, src, dst);
        stage.by_step.back().push_back(h);
      }
    }
    if (!stage.hops.empty()) out.stages.push_back(std::move(stage));
  }
  out.intra_symmetric = IntraSymmetric(shape, out.stages);
  return out;
}

}  // namespace shardsim
