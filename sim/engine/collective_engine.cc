#include "sim/engine/collective_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <simgrid/s4u.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/group.h"
#include "sim/collective/estimate.h"
#include "sim/collective/wire_bytes.h"
#include "sim/engine/flow_workers.h"
#include "sim/engine/lone_stages.h"
#include "sim/schedule/programs.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

CollectiveEngine::CollectiveEngine(Fabric& fabric, FlowMode mode, int channels,
                                   PreparedCalls* prepared)
    : fabric_(fabric),
      mode_(mode),
      channels_(channels),
      net_period_(fabric.mesh().nodes),
      calls_(prepared) {
  if (calls_ == nullptr ||
      !calls_->Serve(fabric.mesh(), fabric.platform(), mode, channels)) {
    own_ = std::make_unique<PreparedCalls>(fabric.mesh(), fabric.platform(),
                                           mode, channels);
    calls_ = own_.get();
  }
  set_replay_stages(true);
}

CollectiveEngine::~CollectiveEngine() = default;

const CollectiveEngine::Entry& CollectiveEngine::entry(
    const CollectiveCall& call, int program) const {
  const Entry* e = calls_->Find(call);
  // Run, summary and protocol take prepared calls only (the contract).
  if (e == nullptr) std::abort();
  if (programs_.empty()) return *e;
  auto it = program_calls_.find({e, program});
  if (it == program_calls_.end()) std::abort();
  return *it->second;
}

// A program's copy of a call differs in its groups only: the call's own
// entry answers for every program.
const PlanSummary& CollectiveEngine::summary(const CollectiveCall& call) const {
  const Entry* e = calls_->Find(call);
  if (e == nullptr) std::abort();  // prepared calls only (the contract)
  return e->summary;
}

const Protocol& CollectiveEngine::protocol(const CollectiveCall& call) const {
  const Entry* e = calls_->Find(call);
  if (e == nullptr) std::abort();
  return *e->protocol;
}

absl::Status CollectiveEngine::Prepare(const CollectiveCall& call,
                                       int program) {
  absl::StatusOr<const Entry*> e = calls_->Get(call);
  if (!e.ok()) return e.status();
  if (programs_.empty()) {
    Use(*e);
    return absl::OkStatus();
  }
  auto [it, fresh] = program_calls_.try_emplace({*e, program});
  if (!fresh) return absl::OkStatus();
  // The program's groups: those holding one of its ranks, each all its.
  auto mine = std::make_unique<Entry>(**e);
  mine->groups.clear();
  for (const std::vector<int>& group : (*e)->groups) {
    int in = 0;
    for (int rank : group) in += program_of_[rank] == program ? 1 : 0;
    if (in == 0) continue;
    if (absl::Status s =
            GroupWithinProgram(call.group(), group, program_of_, program);
        !s.ok()) {
      program_calls_.erase(it);
      return s;
    }
    mine->groups.push_back(group);
  }
  it->second = std::move(mine);
  Use(it->second.get());
  return absl::OkStatus();
}

void CollectiveEngine::SetPrograms(std::vector<std::vector<int>> ranks) {
  programs_ = std::move(ranks);
  program_of_.assign(fabric_.mesh().gpus(), -1);
  for (size_t p = 0; p < programs_.size(); ++p) {
    for (int rank : programs_[p]) program_of_[rank] = static_cast<int>(p);
  }
  set_replay_stages(lone_tree_ != nullptr);  // a domain per program now
  network_symmetry_ = false;
}

void CollectiveEngine::Use(const Entry* e) {
  if (is_used_.insert(e).second) used_.push_back(e);
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
  auto network = [&](int a, int b, double alpha) {
    const int from = fabric_.NicOf(a);
    const int to = fabric_.NicOf(b);
    return Route{fabric_.nic_host(from), fabric_.nic_host(to), alpha, from, to};
  };
  const double sharp = fabric_.platform().efficiency().sharp_latency_s();
  if (dst == kSwitch) return network(group[src], column_peer(src, 1), sharp);
  if (src == kSwitch) return network(column_peer(dst, -1), group[dst], sharp);
  const int a = group[src];
  const int b = group[dst];
  if (fabric_.SameNode(a, b)) {
    return {fabric_.gpu(a), fabric_.gpu(b), proto.intra_alpha_s()};
  }
  return network(a, b, proto.inter_alpha_s());
}

void CollectiveEngine::EndRun() { workers_.reset(); }

FlowWorkers& CollectiveEngine::Workers() {
  if (workers_ == nullptr) {
    // Creating its SimGrid mutex can switch to another actor, which may
    // create workers too: the first made is kept, the others dropped
    // before anyone runs on them.
    auto made = std::make_unique<FlowWorkers>(&fabric_);
    if (workers_ == nullptr) workers_ = std::move(made);
  }
  return *workers_;
}

CollectiveEngine::CallTime CollectiveEngine::Run(const CollectiveCall& call,
                                                 Progress* progress,
                                                 int program) {
  Progress unused;
  if (progress == nullptr) progress = &unused;
  const Entry& e = entry(call, program);
  const double start = sg4::Engine::get_clock();
  ++progress->part;
  progress->until = start + e.protocol->base_latency_s();
  sg4::this_actor::sleep_for(e.protocol->base_latency_s());
  progress->until = -1;
  CallTime t;
  t.latency_s = e.protocol->base_latency_s();
  if (mode_ == FlowMode::kFast) {
    t.latency_s += RunFast(e, progress, program);
  } else {
    RunPerStep(e);
  }
  t.seconds = sg4::Engine::get_clock() - start;
  t.latency_s = std::min(t.latency_s, t.seconds);
  return t;
}
void CollectiveEngine::SetNvlinkScale(double scale) {
  fabric_.SetNvlinkScale(scale, node_symmetry_);
  if (!lone_nvswitch_.empty()) lone_nvswitch_[0]->Rescale(scale);
}

void CollectiveEngine::SetNvlinkScale(double scale, int program) {
  fabric_.SetNvlinkScale(scale, programs_[program]);
  if (!lone_nvswitch_.empty()) Nvswitch(program)->Rescale(scale);
}

void CollectiveEngine::Progress::AppendState(double now,
                                             std::vector<double>* out,
                                             std::vector<double>* bytes) const {
  if (chain != nullptr) {
    chain->AppendState(now, out, bytes);
    return;
  }
  out->push_back(part);
  if (until >= 0) out->push_back(until - now);
  AppendFlowsLeft(now, out, bytes);
}

void CollectiveEngine::Progress::AppendFlowsLeft(
    double now, std::vector<double>* out, std::vector<double>* bytes) const {
  auto append = [&](const std::vector<Flow>& v, const LoneRecord* record) {
    // How many, with the counts: the bytes of each call's flows follow
    // one another in `bytes`.
    out->push_back(static_cast<double>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) {
      const Flow& f = v[i];
      if (f.comm != nullptr) {
        bytes->push_back(f.comm->get_remaining());
      } else if (record != nullptr) {
        bytes->push_back(record->Left(i, now - replay_start));
      } else {
        bytes->push_back(static_cast<double>(f.bytes));
      }
    }
  };
  if (flows != nullptr) append(*flows, nullptr);
  if (net != nullptr) append(*net, replay);
}

const CollectiveEngine::StageFlows& CollectiveEngine::FlowsOf(
    const Entry& e, const std::vector<Hop>& hops) {
  auto [it, fresh] = stage_flows_.try_emplace(&hops);
  StageFlows& s = it->second;
  if (!fresh) return s;
  const int per_node = fabric_.mesh().gpus_per_node;
  const int nics_per_node = fabric_.platform().network().nics_per_node();
  const bool mirrored = net_period_ < fabric_.mesh().nodes;
  // The first node of the call's groups: node 0, or its program's first.
  int first_node = fabric_.mesh().nodes;
  for (const std::vector<int>& group : e.groups) {
    for (int rank : group) first_node = std::min(first_node, rank / per_node);
  }
  for (const std::vector<int>& group : e.groups) {
    for (const Hop& h : hops) {
      if (node_symmetry_ && !h.inter && group[h.src] / per_node != first_node) {
        continue;  // another node's NVSwitch traffic mirrors the first's
      }
      // A GPU's NICs are on its node: a twin is known before its route
      // (all but 1 of 128 at 1024 GPUs, where ZeRO++'s all-to-all steps
      // are 10^5 hops). From the switch, the sender is found by the route.
      if (h.inter && mirrored && h.src != kSwitch &&
          group[h.src] / per_node >= net_period_) {
        continue;
      }
      Route r = RouteOf(e, group, h.src, h.dst);
      if (h.inter && mirrored) {
        if (r.from_nic / nics_per_node >= net_period_) {
          continue;  // a twin of a flow from the first nodes
        }
        const int to = r.to_nic / nics_per_node % net_period_ * nics_per_node +
                       r.to_nic % nics_per_node;
        r.from = fabric_.nic_out(r.from_nic);
        r.to = fabric_.nic_in(to);
      }
      const double bytes =
          h.inter ? h.elements : h.elements * e.intra_inflation;
      const Flow f{r.from,  r.to, WireBytes(bytes, *e.protocol),
                   nullptr, 0,    !h.inter};
      if (lone_tree_ == nullptr) s.all.push_back(f);  // else run by domain
      s.alpha.push_back(h.steps * r.alpha);
      s.on_net.push_back(h.inter);
      (h.inter ? s.net : s.local).push_back(f);
    }
  }
  return s;
}

double CollectiveEngine::RunFlows(const Entry& e, const std::vector<Hop>& hops,
                                  double floor, double floor_alpha,
                                  Progress* progress, int program,
                                  const Resume* resume) {
  const StageFlows& stage = FlowsOf(e, hops);
  const double start =
      resume != nullptr ? resume->start : sg4::Engine::get_clock();
  ++progress->part;
  // When each flow ended, in group then hop order.
  std::vector<double> finish(stage.alpha.size());
  // Kept until the call ends: Progress points at them.
  std::vector<Flow> flows;
  std::vector<Flow> local;
  std::vector<Flow> net;
  if (lone_tree_ == nullptr) {
    flows = stage.all;
    progress->flows = &flows;
    Workers().Run(&flows);
    progress->flows = nullptr;
    for (size_t i = 0; i < flows.size(); ++i) finish[i] = flows[i].finish;
  } else if (stage.net.empty() || stage.local.empty()) {
    // Flows of one domain, alone in it or not.
    const bool on_tree = !stage.net.empty();
    LoneStages* lone = on_tree ? lone_tree_.get() : Nvswitch(program);
    const std::vector<Flow>& mine = on_tree ? stage.net : stage.local;
    progress->net = &mine;  // RunLone points it at what it runs
    finish.clear();
    RunLone(lone, &hops, start, mine, &net, &finish, progress, resume);
    progress->net = nullptr;
  } else {
    // NVSwitch flows and fat-tree flows share no link: the former run for
    // real (the NVSwitch domain is busy meanwhile), the latter as a stage
    // of their own, alone on the tree or not.
    LoneStages* ports = Nvswitch(program);
    ports->Disturb();
    ports->Start();
    local = stage.local;
    std::vector<double> net_finish;
    progress->flows = &local;
    progress->net = &stage.net;  // RunLone points it at what it runs
    FlowWorkers::Join join;
    Workers().Start(&local, nullptr, &join);
    RunLone(lone_tree_.get(), &hops, start, stage.net, &net, &net_finish,
            progress, resume);
    Workers().Wait(&join);
    ports->Stop();
    progress->flows = nullptr;
    progress->net = nullptr;
    size_t l = 0;
    size_t n = 0;
    for (size_t i = 0; i < finish.size(); ++i) {
      finish[i] = stage.on_net[i] ? net_finish[n++] : local[l++].finish;
    }
  }
  double end = start + floor;
  double latency = floor_alpha;
  for (size_t i = 0; i < finish.size(); ++i) {
    const double done = finish[i] + stage.alpha[i];
    if (done > end) {
      end = done;
      latency = stage.alpha[i];
    }
  }
  ++progress->part;
  progress->until = end;
  sg4::this_actor::sleep_until(end);
  progress->until = -1;
  return latency;
}

double CollectiveEngine::RunFast(const Entry& e, Progress* progress,
                                 int program) {
  double latency = 0;
  for (const Stage& stage : e.summary.stages) {
    if (stage.by_step.empty()) {
      double floor_alpha = 0;
      const double floor =
          StageFloor(stage, *e.protocol, fabric_.platform(), &floor_alpha);
      latency += RunFlows(e, stage.hops, floor, floor_alpha, progress, program);
    } else {
      // A chain takes the steps left whenever its domain is idle; one not
      // complete yet is not looked for again in this run.
      bool chains = lone_tree_ != nullptr;
      for (size_t k = 0; k < stage.by_step.size();) {
        const LoneChain* chain = chains ? ChainOf(e, stage, program) : nullptr;
        chains = chain != nullptr;
        if (chain != nullptr) {
          chain->lone->Disturb();
          if (chain->lone->Idle()) {
            k = RunChain(e, stage, *chain, k, progress, program, &latency);
            continue;
          }
        }
        latency += RunFlows(e, stage.by_step[k], 0, 0, progress, program);
        ++k;
      }
    }
  }
  return latency;
}

}  // namespace shardsim
