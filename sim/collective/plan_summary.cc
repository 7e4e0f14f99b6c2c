#include "sim/collective/plan_summary.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "sim/base/bandwidth.h"

namespace shardsim {
namespace {

enum Kind { kIntra = 1, kInter = 2 };

int Wrap(int a, int n) { return ((a % n) + n) % n; }

// Intervals of steps [first, last]. Nearly every hop has one (an
// all-to-all's pair, a ring's edge), so it is kept inline: a 1024-GPU
// HO-Ring has 10^6 hops, each a heap block otherwise.
using StepIntervals = absl::InlinedVector<std::pair<int, int>, 1>;

// What a segment or pass adds to one hop of a stage: bytes, and the steps
// it uses the hop in (passes on one hop may overlap in time; a hop sends
// one message per step, so a step counts once).
struct HopPart {
  int32_t src;
  int32_t dst;
  int64_t elements;
  int32_t first;
  int32_t last;
};
// A hop's ring parts summed so far.
struct HopSum {
  int64_t elements = 0;
  StepIntervals steps;
};
// A stage's hops while they are being summed, by (src, dst). Ring passes
// come back to their hops (a 1024-GPU HO-Ring adds 10^7 parts to 10^6
// hops), so theirs are summed as they come, in a table. Segments are
// listed, and sorted once all are in: an all-to-all's pairs are all
// distinct (10^7 at 16,384 GPUs), and in a table that large each would be
// a cache miss.
struct StageHops {
  std::vector<HopPart> listed;
  absl::flat_hash_map<std::pair<int32_t, int32_t>, HopSum> summed;
};

void ListPart(StageHops* hops, const HopPart& part) {
  hops->listed.push_back(part);
}

void SumPart(StageHops* hops, const HopPart& part) {
  HopSum& b = hops->summed[{part.src, part.dst}];
  b.elements += part.elements;
  // Passes come mostly in step order: a run that starts inside the last
  // one, or right after it, extends it (CountSteps counts the union).
  if (!b.steps.empty() && b.steps.back().first <= part.first &&
      part.first <= b.steps.back().second + 1) {
    b.steps.back().second = std::max(b.steps.back().second, part.last);
    return;
  }
  b.steps.push_back({part.first, part.last});
}

int CountSteps(StepIntervals steps) {
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

// Where a message between these members counts in its step's load.
enum LoadSlot { kIntraSlot, kInterSlot, kSwitchSlot, kSlots };

LoadSlot SlotOf(const PlanShape& shape, int src, int dst) {
  if (src == kSwitch || dst == kSwitch) return kSwitchSlot;
  return LeavesNode(shape, src, dst) ? kInterSlot : kIntraSlot;
}

int64_t& At(StepLoad& load, LoadSlot slot) {
  return slot == kSwitchSlot  ? load.via_switch
         : slot == kInterSlot ? load.inter
                              : load.intra;
}

// A run of a chain's pieces j = first .. last that hold `elements` each (not
// zero: an empty piece moves nothing). A chain's pieces are one member's
// chunks or a node's, so most chains are one or two runs.
struct PieceRun {
  int first = 0;
  int last = 0;
  int64_t elements = 0;
};

std::vector<PieceRun> PieceRuns(const ChainPass& chain) {
  std::vector<PieceRun> runs;
  const int k = static_cast<int>(chain.pieces.size());
  for (int j = 0; j < k; ++j) {
    const int64_t e = chain.pieces[j].count;
    if (e == 0) continue;
    if (runs.empty() || runs.back().last != j - 1 ||
        runs.back().elements != e) {
      runs.push_back({j, j, e});
    }
    runs.back().last = j;
  }
  return runs;
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

// One pair sending `elements` in every step of [first, last]: an explicit
// transfer, or a run of equal pieces crossing one hop of a chain.
struct Segment {
  int src = 0;
  int dst = 0;
  int first = 0;
  int last = 0;
  int64_t elements = 0;
};

// The plan's explicit transfers and chains as segments, in no particular
// order: what phases 1 and 3 and the step loads read. Transfers in a row
// between the same pair in the same step (one per channel, as plans append
// them) are one segment: all three read a segment's elements as a sum.
std::vector<Segment> Segments(const Plan& plan) {
  std::vector<Segment> out;
  for (const Transfer& t : plan.transfers) {
    if (!out.empty()) {
      Segment& g = out.back();
      if (g.first == t.step && g.last == t.step && g.src == t.src &&
          g.dst == t.dst) {
        g.elements += t.count;
        continue;
      }
    }
    out.push_back(Segment{t.src, t.dst, t.step, t.step, t.count});
  }
  for (const DirectPass& pass : plan.directs) {
    const int n = static_cast<int>(pass.chunks.size());
    for (int t = 1; t < n; ++t) {
      const int step = pass.first_step + t - 1;
      for (int m = 0; m < n; ++m) {
        const int64_t elements = DirectChunk(pass, m, t).count;
        if (elements == 0) continue;
        out.push_back(Segment{m, DirectPeer(m, t, n), step, step, elements});
      }
    }
  }
  for (const ChainPass& chain : plan.chains) {
    const std::vector<PieceRun> runs = PieceRuns(chain);
    for (size_t h = 0; h + 1 < chain.order.size(); ++h) {
      const int at = chain.first_step + static_cast<int>(h);  // piece 0's
      for (const PieceRun& r : runs) {
        out.push_back(Segment{chain.order[h], chain.order[h + 1], at + r.first,
                              at + r.last, r.elements});
      }
    }
  }
  return out;
}

// Phase 1: the kind of every step, from what its segments and ring passes
// cross; a stage is a run of one kind, so kinds come first.
std::vector<int> StepKinds(const Plan& plan,
                           const std::vector<Segment>& segments) {
  const PlanShape& shape = plan.shape;
  std::vector<int> kind(std::max(plan.num_steps, 1), 0);
  // A segment's pair is busy from its first step to its last: counted in
  // at the first and out past the last, per kind (intra, inter).
  std::vector<int> starts[2], ends[2];
  for (int b = 0; b < 2; ++b) {
    starts[b].assign(kind.size() + 1, 0);
    ends[b].assign(kind.size() + 1, 0);
  }
  for (const Segment& g : segments) {
    const int b = LeavesNode(shape, g.src, g.dst) ? 1 : 0;
    ++starts[b][g.first];
    ++ends[b][g.last + 1];
  }
  int busy[2] = {0, 0};
  for (size_t step = 0; step < kind.size(); ++step) {
    for (int b = 0; b < 2; ++b) {
      busy[b] += starts[b][step] - ends[b][step];
      if (busy[b] > 0) kind[step] |= b == 1 ? kInter : kIntra;
    }
  }
  for (const RingPass& ring : plan.rings) {
    const int n = static_cast<int>(ring.order.size());
    int pass_kind = 0;
    // Until both kinds are seen: 131,000 passes in a 1024-GPU HO-Ring.
    for (int r = 0; r < n && pass_kind != (kInter | kIntra); ++r) {
      const bool leaves =
          LeavesNode(shape, ring.order[r], ring.order[r + 1 < n ? r + 1 : 0]);
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

// What one pair of members sends in one step, all channels together, one
// per (step, src, dst), ordered by them.
struct Message {
  int step = 0;
  int src = 0;
  int dst = 0;
  int64_t elements = 0;
};
using StepMessages = std::vector<Message>;

// The explicit transfers' and direct passes' messages, step by step: each
// step's transfers summed per pair (sorted by pair). Chains and rings add
// none: every step they run in is in a pipelined stage (PipelinedStages),
// never run step by step, and a long chain is millions of messages.
StepMessages CollectMessages(const Plan& plan) {
  StepMessages merged;
  std::vector<Message> step;
  size_t t = 0;  // the explicit transfers are sorted by step
  for (int s = 0; s < plan.num_steps || t < plan.transfers.size(); ++s) {
    step.clear();
    for (; t < plan.transfers.size() && plan.transfers[t].step == s; ++t) {
      const Transfer& x = plan.transfers[t];
      step.push_back(Message{s, x.src, x.dst, x.count});
    }
    for (const DirectPass& pass : plan.directs) {
      const int n = static_cast<int>(pass.chunks.size());
      const int k = s - pass.first_step + 1;  // the pass's step
      if (k < 1 || k >= n) continue;
      for (int m = 0; m < n; ++m) {
        const int64_t elements = DirectChunk(pass, m, k).count;
        if (elements > 0) {
          step.push_back(Message{s, m, DirectPeer(m, k, n), elements});
        }
      }
    }
    // A direct pass lists a step's messages by sender already.
    auto by_pair = [](const Message& x, const Message& y) {
      return std::tie(x.src, x.dst) < std::tie(y.src, y.dst);
    };
    if (!std::is_sorted(step.begin(), step.end(), by_pair)) {
      std::sort(step.begin(), step.end(), by_pair);
    }
    for (size_t i = 0; i < step.size(); ++i) {
      if (i > 0 && step[i].src == step[i - 1].src &&
          step[i].dst == step[i - 1].dst) {
        merged.back().elements += step[i].elements;
      } else {
        merged.push_back(step[i]);
      }
    }
  }
  return merged;
}

// The NICs whose load a member's network traffic adds to, a NIC once per
// GPU on it that is this member of its group; none given: one NIC each.
std::vector<std::vector<int32_t>> NicsOf(const PlanShape& shape,
                                         const NicMembers& nics) {
  std::vector<std::vector<int32_t>> nics_of(shape.size());
  for (size_t k = 0; k < nics.size(); ++k) {
    for (int32_t m : nics[k]) nics_of[m].push_back(static_cast<int32_t>(k));
  }
  if (nics.empty()) {
    for (int m = 0; m < shape.size(); ++m) nics_of[m] = {m};
  }
  return nics_of;
}

// Every step's busiest endpoint of each kind (StepLoad), from the segments
// without listing the messages. An endpoint is what a member sends or
// receives over NVSwitch, or what a NIC sends or receives: every GPU on it
// counts, each as its member (all groups of a call run the same plan, so a
// member's load is the same in every group). Per endpoint, the segments'
// sums over runs of steps; then, largest first, each sum claims the steps
// of its run that no larger one has: each step's largest of those sums,
// transfers and chains' pieces together. The switch is no endpoint: its
// load is every member's, which the fabric reduces as it passes.
std::vector<StepLoad> StepLoads(const Plan& plan,
                                const std::vector<Segment>& segments,
                                const NicMembers& nics, int steps) {
  const std::vector<std::vector<int32_t>> nics_of = NicsOf(plan.shape, nics);
  struct Keyed {
    int endpoint;  // member over NVSwitch, NIC over the network
    int way;       // 0: sends, 1: receives
    int slot;
    int first;
    int last;
    int64_t elements;
  };
  std::vector<Keyed> segs;
  segs.reserve(2 * segments.size());
  for (const Segment& g : segments) {
    const int slot = SlotOf(plan.shape, g.src, g.dst);
    for (int way = 0; way < 2; ++way) {
      const int member = way == 0 ? g.src : g.dst;
      if (member == kSwitch) continue;
      if (slot == kIntraSlot) {
        segs.push_back({member, way, slot, g.first, g.last, g.elements});
        continue;
      }
      for (int32_t k : nics_of[member]) {
        segs.push_back({k, way, slot, g.first, g.last, g.elements});
      }
    }
  }
  // Grouped by (endpoint, way, slot), in that order; a group's order is
  // its events' (sorted below). A counting sort: endpoints are dense, and
  // a 1024-GPU plan has 10^5 segments.
  const int endpoints =
      std::max(plan.shape.size(), static_cast<int>(nics.size()));
  auto key = [](const Keyed& k) {
    return (k.endpoint * 2 + k.way) * kSlots + k.slot;
  };
  std::vector<int> place(endpoints * 2 * kSlots + 1, 0);
  for (const Keyed& k : segs) ++place[key(k) + 1];
  for (size_t i = 1; i < place.size(); ++i) place[i] += place[i - 1];
  std::vector<Keyed> grouped(segs.size());
  for (const Keyed& k : segs) grouped[place[key(k)]++] = k;
  segs = std::move(grouped);
  // Per endpoint: +elements where a segment starts, - past where it ends;
  // the sum holds from one event's step to the next's.
  struct Sum {
    int slot;
    int first;
    int last;
    int64_t elements;
  };
  std::vector<Sum> sums;
  std::vector<std::pair<int, int64_t>> events;
  for (size_t i = 0; i < segs.size();) {
    size_t j = i;
    events.clear();
    for (; j < segs.size() && segs[j].endpoint == segs[i].endpoint &&
           segs[j].way == segs[i].way && segs[j].slot == segs[i].slot;
         ++j) {
      events.push_back({segs[j].first, segs[j].elements});
      events.push_back({segs[j].last + 1, -segs[j].elements});
    }
    // An all-to-all's come in step order: 10^3 per endpoint at 16,384 GPUs.
    if (!std::is_sorted(events.begin(), events.end())) {
      std::sort(events.begin(), events.end());
    }
    int64_t sum = 0;
    for (size_t e = 0; e + 1 < events.size(); ++e) {
      sum += events[e].second;
      const int until = events[e + 1].first;
      if (until > events[e].first && sum > 0) {
        sums.push_back(Sum{segs[i].slot, events[e].first, until - 1, sum});
      }
    }
    i = j;
  }
  // A step's load is the largest sum over it. Sums of one step (all of an
  // all-to-all's, 10^7 at 16,384 GPUs) take their step's maximum as they
  // come; the longer ones, largest first, claim the steps no larger one
  // has (equal sizes claim a step with the same value, whichever first).
  std::vector<StepLoad> load(steps);
  auto one_step = [](const Sum& m) { return m.first == m.last; };
  for (const Sum& m : sums) {
    if (!one_step(m)) continue;
    int64_t& at = At(load[m.first], static_cast<LoadSlot>(m.slot));
    at = std::max(at, m.elements);
  }
  sums.erase(std::remove_if(sums.begin(), sums.end(), one_step), sums.end());
  std::sort(sums.begin(), sums.end(),
            [](const Sum& a, const Sum& b) { return a.elements > b.elements; });
  // Per slot, the first step at or after s that no larger sum has claimed
  // (a disjoint-set forest with path halving).
  std::vector<std::vector<int>> next(kSlots, std::vector<int>(steps + 1));
  for (std::vector<int>& n : next) {
    for (int s = 0; s <= steps; ++s) n[s] = s;
  }
  auto find = [](std::vector<int>& n, int s) {
    while (n[s] != s) s = n[s] = n[n[s]];
    return s;
  };
  for (const Sum& m : sums) {
    const LoadSlot slot = static_cast<LoadSlot>(m.slot);
    std::vector<int>& n = next[slot];
    for (int s = find(n, m.first); s <= m.last; s = find(n, s)) {
      int64_t& at = At(load[s], slot);
      at = std::max(at, m.elements);
      n[s] = s + 1;
    }
  }
  return load;
}

// The last step of the stage of every step (a stage is a run of steps).
std::vector<int> StageEnds(const StepLayout& layout) {
  const int steps = static_cast<int>(layout.stage.size());
  std::vector<int> end(steps);
  for (int s = steps - 1; s >= 0; --s) {
    end[s] = s + 1 < steps && layout.stage[s + 1] == layout.stage[s]
                 ? end[s + 1]
                 : s;
  }
  return end;
}

// Phase 3: explicit transfers and chains, summed per hop of their stage;
// a segment is cut where a stage ends.
void AddTransfers(const std::vector<Segment>& segments,
                  const StepLayout& layout, std::vector<StageHops>* hops) {
  const std::vector<int> stage_end = StageEnds(layout);
  for (const Segment& g : segments) {
    for (int s = g.first; s <= g.last;) {
      const int e = std::min(stage_end[s], g.last);
      ListPart(&(*hops)[layout.stage[s]],
               {g.src, g.dst, (e - s + 1) * g.elements, s, e});
      s = e + 1;
    }
  }
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
      SumPart(&(*hops)[home],
              {src, dst, total - ring.ranges[Wrap(r + 1 - ring.lag, n)].count,
               first, last});
    }
  }
}

// Stages that a ring or chain pass runs in: those run as their hops with
// the pipeline's floor, not step by step. A pass moves each hop's bytes as
// one stream, whatever its pieces, so its flows are one per hop; steps of
// explicit transfers alone (an all-to-all's) stay step by step, since
// their hops together would put every pair in flight at once.
std::vector<bool> PipelinedStages(const Plan& plan, const StepLayout& layout) {
  // A tree's explicit transfers cross its edges, and each edge carries its
  // messages one step after another (pieces up or down, a level's chunks),
  // as a chain's hop does: a member's edges are its parent and children,
  // where an all-to-all's pairs are every pair.
  std::vector<bool> pipelined(layout.num_stages, plan.algorithm == TREE);
  auto mark = [&](int first, int last) {
    for (int t = first; t <= last; ++t) pipelined[layout.stage[t]] = true;
  };
  for (const RingPass& ring : plan.rings) {
    const int n = static_cast<int>(ring.order.size());
    if (n >= 2) mark(ring.first_step, ring.first_step + n - 2);
  }
  for (const ChainPass& chain : plan.chains) {
    const int n = static_cast<int>(chain.order.size());
    const bool moves = std::any_of(chain.pieces.begin(), chain.pieces.end(),
                                   [](const Range& r) { return r.count > 0; });
    if (n >= 2 && moves) {
      mark(chain.first_step,
           chain.first_step + static_cast<int>(chain.pieces.size()) + n - 3);
    }
  }
  return pipelined;
}

// One stage's messages, step by step (Stage::by_step): aggregating an
// all-to-all's steps would put every flow in flight at once.
std::vector<std::vector<Hop>> ByStep(const StepMessages& messages,
                                     const StepLayout& layout, int stage,
                                     const PlanShape& shape) {
  std::vector<std::vector<Hop>> by_step;
  int step = -1;
  for (const Message& m : messages) {  // ordered by step
    if (layout.stage[m.step] != stage) continue;
    if (m.step != step) {
      by_step.emplace_back();
      step = m.step;
    }
    Hop h;
    h.src = m.src;
    h.dst = m.dst;
    h.elements = m.elements;
    h.steps = 1;
    h.inter = LeavesNode(shape, m.src, m.dst);
    by_step.back().push_back(h);
  }
  return by_step;
}

// Phase 5: the stages as the engine runs them, with their floors; a stage
// whose hops carry no bytes is left out, having no flow to run.
std::vector<Stage> AssembleStages(const Plan& plan, const StepLayout& layout,
                                  std::vector<StageHops> hops,
                                  const std::vector<StepLoad>& load,
                                  bool by_step) {
  const std::vector<bool> pipelined = PipelinedStages(plan, layout);
  std::optional<StepMessages> messages;  // listed once a stage needs them
  std::vector<Stage> stages;
  for (int i = 0; i < layout.num_stages; ++i) {
    Stage stage;
    // A hop per (src, dst): its parts' bytes summed, their steps counted
    // once each. A ring sum joins the list as a part per interval.
    std::vector<HopPart>& parts = hops[i].listed;
    for (const auto& [key, sum] : hops[i].summed) {
      int64_t elements = sum.elements;
      for (const auto& [first, last] : sum.steps) {
        parts.push_back({key.first, key.second, elements, first, last});
        elements = 0;
      }
    }
    std::sort(parts.begin(), parts.end(),
              [](const HopPart& a, const HopPart& b) {
                return std::tie(a.src, a.dst) < std::tie(b.src, b.dst);
              });
    StepIntervals steps;
    for (size_t j = 0; j < parts.size();) {
      Hop h;
      h.src = parts[j].src;
      h.dst = parts[j].dst;
      h.inter = LeavesNode(plan.shape, h.src, h.dst);
      steps.clear();
      for (; j < parts.size() && parts[j].src == h.src && parts[j].dst == h.dst;
           ++j) {
        h.elements += parts[j].elements;
        steps.push_back({parts[j].first, parts[j].last});
      }
      if (h.elements == 0) continue;
      h.steps = CountSteps(steps);
      stage.hops.push_back(h);
    }
    for (size_t s = 0; s < layout.kind.size(); ++s) {
      if (layout.kind[s] != 0 && layout.stage[s] == i) {
        stage.steps.push_back(load[s]);
      }
    }
    if (!pipelined[i] && by_step) {
      if (!messages) messages = CollectMessages(plan);
      stage.by_step = ByStep(*messages, layout, i, plan.shape);
    }
    if (!stage.hops.empty()) stages.push_back(std::move(stage));
  }
  return stages;
}

// `h` through an endpoint: its elements, and the fewest steps of any hop.
void AddHop(const Hop& h, EndpointLoad* l) {
  l->steps = l->elements == 0 ? h.steps : std::min(l->steps, h.steps);
  l->elements += h.elements;
}

// `l` as `busiest` if it moves more (of equals, over more steps).
void KeepBusier(const EndpointLoad& l, EndpointLoad* busiest) {
  if (std::tie(l.elements, l.steps) >
      std::tie(busiest->elements, busiest->steps)) {
    *busiest = l;
  }
}

// Each stage's busiest endpoints (StageLoad), from its hops: a hop loads
// its sender's endpoint and its receiver's, the switch excepted, as
// StepLoads counts them.
void AddStageLoads(const PlanShape& shape, const NicMembers& nics,
                   std::vector<Stage>* stages) {
  const std::vector<std::vector<int32_t>> nics_of = NicsOf(shape, nics);
  const size_t endpoints =
      std::max(static_cast<size_t>(shape.size()), nics.size());
  std::vector<EndpointLoad> load(2 * endpoints * kSlots);
  for (Stage& stage : *stages) {
    std::fill(load.begin(), load.end(), EndpointLoad{});
    auto add = [&](size_t endpoint, int way, int slot, const Hop& h) {
      AddHop(h, &load[(endpoint * 2 + way) * kSlots + slot]);
    };
    for (const Hop& h : stage.hops) {
      const int slot = SlotOf(shape, h.src, h.dst);
      for (int way = 0; way < 2; ++way) {
        const int member = way == 0 ? h.src : h.dst;
        if (member == kSwitch) continue;
        if (slot == kIntraSlot) {
          add(member, way, slot, h);
          continue;
        }
        for (int32_t k : nics_of[member]) add(k, way, slot, h);
      }
    }
    for (size_t i = 0; i < load.size(); ++i) {
      const int slot = static_cast<int>(i % kSlots);
      KeepBusier(load[i], slot == kSwitchSlot  ? &stage.busiest.via_switch
                          : slot == kInterSlot ? &stage.busiest.inter
                                               : &stage.busiest.intra);
    }
  }
}

}  // namespace

NicMembers CallNics(const std::vector<std::vector<int>>& groups,
                    const Platform& platform, int gpus_per_node) {
  if (platform.network().nics_per_node() <= 0) return {};  // no network
  std::map<int, std::vector<int32_t>> by_nic;
  for (const std::vector<int>& group : groups) {
    for (size_t m = 0; m < group.size(); ++m) {
      by_nic[NicOfRank(platform, gpus_per_node, group[m])].push_back(
          static_cast<int32_t>(m));
    }
  }
  NicMembers nics;
  for (auto& [nic, members] : by_nic) {
    std::sort(members.begin(), members.end());
    nics.push_back(std::move(members));
  }
  std::sort(nics.begin(), nics.end());
  nics.erase(std::unique(nics.begin(), nics.end()), nics.end());
  return nics;
}

PlanSummary Summarize(const Plan& plan, bool by_step, const NicMembers& nics) {
  PlanSummary out;
  const std::vector<Segment> segments = Segments(plan);
  const StepLayout layout = CutStages(StepKinds(plan, segments));
  const int steps = static_cast<int>(layout.kind.size());
  std::vector<StageHops> hops(layout.num_stages);
  AddTransfers(segments, layout, &hops);
  AddRingPasses(plan, layout, &hops);
  out.stages = AssembleStages(plan, layout, std::move(hops),
                              StepLoads(plan, segments, nics, steps), by_step);
  AddStageLoads(plan.shape, nics, &out.stages);
  out.intra_symmetric = IntraSymmetric(plan.shape, out.stages);
  return out;
}

void AddUplinkLoads(const std::vector<std::vector<int>>& groups,
                    const Platform& platform, int gpus_per_node,
                    const FatTreeLayout& tree, PlanSummary* summary) {
  if (!tree.has_uplinks()) return;
  std::vector<std::vector<int>> leaf_of(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int rank : groups[g]) {
      leaf_of[g].push_back(
          tree.LeafOfNic(NicOfRank(platform, gpus_per_node, rank)));
    }
  }
  std::vector<EndpointLoad> load(2 * tree.leaves());  // out, in per leaf
  for (Stage& stage : summary->stages) {
    std::fill(load.begin(), load.end(), EndpointLoad{});
    for (const Hop& h : stage.hops) {
      if (!h.inter || h.src == kSwitch || h.dst == kSwitch) continue;
      for (const std::vector<int>& leaf : leaf_of) {
        if (leaf[h.src] == leaf[h.dst]) continue;
        AddHop(h, &load[2 * leaf[h.src]]);
        AddHop(h, &load[2 * leaf[h.dst] + 1]);
      }
    }
    stage.busiest.uplinks = {};
    for (const EndpointLoad& l : load) KeepBusier(l, &stage.busiest.uplinks);
  }
}

PlanSummary NodesOn(PlanSummary summary, int nodes, const PlanShape& shape) {
  const int shift = nodes * shape.per_node;
  auto rename = [&](int32_t* m) {
    if (*m != kSwitch) *m = Wrap(*m + shift, shape.size());
  };
  auto by_ends = [](const Hop& a, const Hop& b) {
    return std::tie(a.src, a.dst) < std::tie(b.src, b.dst);
  };
  for (Stage& stage : summary.stages) {
    for (Hop& h : stage.hops) {
      rename(&h.src);
      rename(&h.dst);
    }
    std::sort(stage.hops.begin(), stage.hops.end(), by_ends);
    for (std::vector<Hop>& step : stage.by_step) {
      for (Hop& h : step) {
        rename(&h.src);
        rename(&h.dst);
      }
      std::sort(step.begin(), step.end(), by_ends);
    }
  }
  return summary;
}

}  // namespace shardsim
