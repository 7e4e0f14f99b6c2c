#include "sim/engine/collective_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <simgrid/s4u.hpp>

#include "absl/strings/str_cat.h"
#include "sim/collective/group.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

namespace {

uint64_t WireBytes(int64_t payload, const Protocol& proto) {
  return static_cast<uint64_t>(std::llround(payload / proto.bandwidth_fraction()));
}

}  // namespace

CollectiveEngine::CollectiveEngine(const Fabric& fabric, FlowMode mode,
                                   int channels)
    : fabric_(fabric), mode_(mode), channels_(channels) {}

CollectiveEngine::Key CollectiveEngine::KeyOf(const CollectiveCall& c) {
  const Group& g = c.group();
  return {c.op(),          c.algorithm(),     g.intra_size(), g.intra_stride(),
          g.inter_size(),  g.inter_stride(),  c.bytes(),      c.root()};
}

const CollectiveEngine::Entry& CollectiveEngine::entry(
    const CollectiveCall& call) const {
  return *entries_.at(KeyOf(call));
}

const PlanSummary& CollectiveEngine::summary(const CollectiveCall& call) const {
  return entry(call).summary;
}

const Protocol& CollectiveEngine::protocol(const CollectiveCall& call) const {
  return *entry(call).protocol;
}

bool CollectiveEngine::AllIntraSymmetric() const {
  for (const auto& [key, e] : entries_) {
    if (!e->summary.intra_symmetric) return false;
  }
  return true;
}

absl::Status CollectiveEngine::Prepare(const CollectiveCall& call) {
  const Key key = KeyOf(call);
  if (entries_.count(key)) return absl::OkStatus();
  const Mesh& mesh = fabric_.mesh();
  if (absl::Status s = ValidateGroup(call.group(), mesh); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", GroupName(call.group()), ": ", s.message()));
  }
  if (call.algorithm() == SHARP && !fabric_.platform().network().sharp()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm SHARP: platform ", fabric_.platform().name(),
        " has no SHARP-capable switches (network.sharp)"));
  }
  auto e = std::make_unique<Entry>();
  e->shape = {call.group().intra_size(), call.group().inter_size()};
  PlanRequest req;
  req.op = call.op();
  req.algorithm = call.algorithm();
  req.shape = e->shape;
  req.count = call.bytes();  // one element per byte: the wire sees bytes
  req.channels = channels_;
  req.root = call.root();
  absl::StatusOr<Plan> plan = MakePlan(req);
  if (!plan.ok()) return plan.status();
  e->summary = Summarize(*plan);
  if (mode_ == FlowMode::kPerStep) e->plan = *std::move(plan);
  for (int rank = 0; rank < mesh.gpus(); ++rank) {
    if (GroupFirstMember(call.group(), mesh, rank) == rank) {
      e->groups.push_back(GroupMembers(call.group(), mesh, rank));
    }
  }
  double best = std::numeric_limits<double>::infinity();
  for (const Protocol& proto : fabric_.platform().protocols()) {
    const double t = EstimateEntry(*e, proto);
    if (t < best) {
      best = t;
      e->protocol = &proto;
    }
  }
  entries_.emplace(key, std::move(e));
  return absl::OkStatus();
}

double CollectiveEngine::StageFloor(const Stage& stage,
                                    const Protocol& proto) const {
  const double nic = fabric_.NicBandwidth() * proto.bandwidth_fraction();
  const double nvlink = fabric_.NvlinkBandwidth() * proto.bandwidth_fraction();
  const double sharp = fabric_.platform().efficiency().sharp_latency_s();
  double t = 0;
  for (const StepLoad& s : stage.steps) {
    double step = 0;
    if (s.intra > 0) step = std::max(step, s.intra / nvlink + proto.intra_alpha_s());
    if (s.inter > 0) step = std::max(step, s.inter / nic + proto.inter_alpha_s());
    if (s.via_switch > 0) step = std::max(step, s.via_switch / nic + sharp);
    t += step;
  }
  return t;
}

double CollectiveEngine::EstimateEntry(const Entry& e,
                                       const Protocol& proto) const {
  const double sharp = fabric_.platform().efficiency().sharp_latency_s();
  double t = proto.base_latency_s();
  for (const Stage& stage : e.summary.stages) {
    double longest = StageFloor(stage, proto);
    for (const Hop& h : stage.hops) {
      const bool via_switch = h.src == kSwitch || h.dst == kSwitch;
      const double bw = h.inter ? fabric_.NicBandwidth() : fabric_.NvlinkBandwidth();
      const double alpha = via_switch ? sharp
                           : h.inter  ? proto.inter_alpha_s()
                                      : proto.intra_alpha_s();
      longest = std::max(longest, h.elements / (bw * proto.bandwidth_fraction()) +
                                      h.steps * alpha);
    }
    t += longest;
  }
  return t;
}

// SHARP's switch reduces in the fabric. Its load is modelled as what it
// is on the NICs: a member's contribution leaves through its NIC and the
// result comes back through it; the flow runs to (from) the member of the
// same column on the next (previous) node so that it crosses the fabric
// once, as the in-network reduction tree does.
CollectiveEngine::Route CollectiveEngine::RouteOf(const Entry& e,
                                                  const std::vector<int>& group,
                                                  int src, int dst) const {
  const Protocol& proto = *e.protocol;
  const PlanShape& s = e.shape;
  auto column_peer = [&](int member, int shift) {
    const int node = (s.NodeOf(member) + shift + s.nodes) % s.nodes;
    return group[node * s.per_node + member % s.per_node];
  };
  const double sharp = fabric_.platform().efficiency().sharp_latency_s();
  if (dst == kSwitch) {
    return {fabric_.nic(group[src]), fabric_.nic(column_peer(src, 1)), sharp};
  }
  if (src == kSwitch) {
    return {fabric_.nic(column_peer(dst, -1)), fabric_.nic(group[dst]), sharp};
  }
  const int a = group[src];
  const int b = group[dst];
  if (fabric_.SameNode(a, b)) {
    return {fabric_.gpu(a), fabric_.gpu(b), proto.intra_alpha_s()};
  }
  return {fabric_.nic(a), fabric_.nic(b), proto.inter_alpha_s()};
}

void CollectiveEngine::Run(const CollectiveCall& call) {
  const Entry& e = entry(call);
  sg4::this_actor::sleep_for(e.protocol->base_latency_s());
  if (mode_ == FlowMode::kFast) {
    RunFast(e);
  } else {
    RunPerStep(e);
  }
}

void CollectiveEngine::RunFlows(const Entry& e, const std::vector<Hop>& hops,
                                double floor) {
  const int per_node = fabric_.mesh().gpus_per_node;
  std::vector<sg4::CommPtr> comms;
  std::vector<double> alphas;
  for (const std::vector<int>& group : e.groups) {
    for (const Hop& h : hops) {
      if (node_symmetry_ && !h.inter && group[h.src] / per_node != 0) {
        continue;  // another node's NVSwitch traffic mirrors node 0's
      }
      const Route r = RouteOf(e, group, h.src, h.dst);
      comms.push_back(sg4::Comm::sendto_async(
          r.from, r.to, WireBytes(h.elements, *e.protocol)));
      alphas.push_back(h.steps * r.alpha);
    }
  }
  const double start = sg4::Engine::get_clock();
  sg4::Comm::wait_all(comms);
  double end = start + floor;
  for (size_t i = 0; i < comms.size(); ++i) {
    end = std::max(end, comms[i]->get_finish_time() + alphas[i]);
  }
  sg4::this_actor::sleep_until(end);
}

void CollectiveEngine::RunFast(const Entry& e) {
  for (const Stage& stage : e.summary.stages) {
    if (stage.by_step.empty()) {
      RunFlows(e, stage.hops, StageFloor(stage, *e.protocol));
    } else {
      for (const std::vector<Hop>& step : stage.by_step) RunFlows(e, step, 0);
    }
  }
}

namespace {

// One message of the per-step mode: the transfers of one step with the same
// channel, source and destination (plan.h: one message cut into ranges).
struct Message {
  int step;
  int channel;
  int src;
  int dst;
  int64_t elements;
};

// What a (member, channel) has received, so that its step-k sends can wait
// for everything addressed to it in earlier steps.
struct Inbox {
  std::map<int, int> expected_before;  // step -> messages due before it
  std::map<int, int> arrived_by_step;
  sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
  sg4::MutexPtr mutex = sg4::Mutex::create();

  int ArrivedBefore(int step) const {
    int n = 0;
    for (auto it = arrived_by_step.begin();
         it != arrived_by_step.end() && it->first < step; ++it) {
      n += it->second;
    }
    return n;
  }
};

}  // namespace

void CollectiveEngine::RunPerStep(const Entry& e) {
  // Group the plan's transfers into messages.
  std::map<std::tuple<int, int, int, int>, int64_t> merged;
  for (const Transfer& t : ExpandTransfers(e.plan)) {
    merged[{t.step, t.channel, t.src, t.dst}] += t.count;
  }
  std::vector<Message> messages;
  for (const auto& [k, elements] : merged) {
    messages.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k),
                        std::get<3>(k), elements});
  }
  // The switch is a member too: index p.
  const int p = e.shape.size();
  auto index = [p](int member) { return member == kSwitch ? p : member; };
  std::vector<sg4::ActorPtr> actors;
  for (const std::vector<int>& group : e.groups) {
    // inboxes[(member, channel)] and each sender's messages by step.
    auto inboxes = std::make_shared<std::map<std::pair<int, int>, Inbox>>();
    std::map<std::pair<int, int>, std::vector<const Message*>> outbox;
    std::map<std::pair<int, int>, std::vector<int>> arrivals;  // steps in
    for (const Message& m : messages) {
      outbox[{index(m.src), m.channel}].push_back(&m);
      arrivals[{index(m.dst), m.channel}].push_back(m.step);
    }
    for (auto& [who, steps] : outbox) {
      Inbox& in = (*inboxes)[who];
      for (const Message* m : steps) {
        int due = 0;
        for (int s : arrivals[who]) due += s < m->step;
        in.expected_before[m->step] = due;
      }
    }
    for (auto& [who, mine] : outbox) {
      actors.push_back(sg4::Actor::create(
          "per-step", sg4::this_actor::get_host(),
          [this, &e, &group, inboxes, index, who = who, mine = mine]() {
            Inbox& in = (*inboxes)[who];
            size_t i = 0;
            while (i < mine.size()) {
              const int step = mine[i]->step;
              {
                std::unique_lock<sg4::Mutex> lock(*in.mutex);
                in.cv->wait(lock, [&] {
                  return in.ArrivedBefore(step) >= in.expected_before[step];
                });
              }
              std::vector<sg4::CommPtr> comms;
              std::vector<std::pair<double, const Message*>> sent;
              for (; i < mine.size() && mine[i]->step == step; ++i) {
                const Message* m = mine[i];
                const Route r = RouteOf(e, group, m->src, m->dst);
                comms.push_back(sg4::Comm::sendto_async(
                    r.from, r.to, WireBytes(m->elements, *e.protocol)));
                sent.push_back({r.alpha, m});
              }
              sg4::Comm::wait_all(comms);
              std::vector<std::pair<double, const Message*>> due;
              for (size_t k = 0; k < comms.size(); ++k) {
                due.push_back({comms[k]->get_finish_time() + sent[k].first,
                               sent[k].second});
              }
              std::sort(due.begin(), due.end(),
                        [](const auto& a, const auto& b) { return a.first < b.first; });
              for (const auto& [when, m] : due) {
                sg4::this_actor::sleep_until(when);
                Inbox& dst = (*inboxes)[{index(m->dst), m->channel}];
                std::unique_lock<sg4::Mutex> lock(*dst.mutex);
                ++dst.arrived_by_step[m->step];
                dst.cv->notify_all();
              }
            }
          }));
    }
  }
  for (const sg4::ActorPtr& a : actors) a->join();
}

}  // namespace shardsim
