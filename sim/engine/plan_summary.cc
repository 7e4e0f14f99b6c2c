#include "sim/engine/plan_summary.h"

#include <map>
#include <set>
#include <tuple>

namespace shardsim {
namespace {

enum Kind { kIntra = 1, kInter = 2, kMixed = 3 };

bool Leaves(const Plan& plan, const Transfer& t) {
  return t.src == kSwitch || t.dst == kSwitch ||
         plan.shape.NodeOf(t.src) != plan.shape.NodeOf(t.dst);
}

// Intra hops of each node, as (local src, local dst, channel, elements,
// steps): symmetric when every node has the same set.
bool IntraSymmetric(const PlanShape& shape, const std::vector<Stage>& stages) {
  using Key = std::tuple<size_t, int, int, int, int64_t, int>;
  std::vector<std::multiset<Key>> per_node(shape.nodes);
  for (size_t s = 0; s < stages.size(); ++s) {
    for (const Hop& h : stages[s].hops) {
      if (h.inter) continue;
      per_node[shape.NodeOf(h.src)].insert(
          {s, h.src % shape.per_node, h.dst % shape.per_node, h.channel,
           h.elements, h.steps});
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
  out.num_steps = plan.num_steps;
  using HopKey = std::tuple<int32_t, int32_t, int32_t>;
  std::map<HopKey, Hop> hops;
  std::set<std::pair<HopKey, int32_t>> seen_steps;
  int stage_kind = 0;
  auto close_stage = [&] {
    if (hops.empty()) return;
    Stage stage;
    for (auto& [key, hop] : hops) stage.hops.push_back(hop);
    out.stages.push_back(std::move(stage));
    hops.clear();
    seen_steps.clear();
  };
  size_t begin = 0;
  const std::vector<Transfer>& ts = plan.transfers;
  while (begin < ts.size()) {
    size_t end = begin;
    int kind = 0;
    while (end < ts.size() && ts[end].step == ts[begin].step) {
      kind |= Leaves(plan, ts[end]) ? kInter : kIntra;
      ++end;
    }
    if (kind != stage_kind) close_stage();
    stage_kind = kind;
    for (size_t i = begin; i < end; ++i) {
      const Transfer& t = ts[i];
      const HopKey key{t.src, t.dst, t.channel};
      Hop& hop = hops[key];
      hop.src = t.src;
      hop.dst = t.dst;
      hop.channel = t.channel;
      hop.inter = Leaves(plan, t);
      hop.elements += t.count;
      if (seen_steps.insert({key, t.step}).second) ++hop.steps;
    }
    begin = end;
  }
  close_stage();
  out.intra_symmetric = IntraSymmetric(plan.shape, out.stages);
  return out;
}

}  // namespace shardsim
