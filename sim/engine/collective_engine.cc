#include "sim/engine/collective_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <simgrid/s4u.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "sim/collective/estimate.h"
#include "sim/base/group.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

namespace {

uint64_t WireBytes(double payload, const Protocol& proto) {
  return static_cast<uint64_t>(
      std::llround(payload / proto.bandwidth_fraction()));
}

}  // namespace

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
    const CollectiveCall& call) const {
  const Entry* e = calls_->Find(call);
  // Run, summary and protocol take prepared calls only (the contract).
  if (e == nullptr) std::abort();
  return *e;
}

const PlanSummary& CollectiveEngine::summary(const CollectiveCall& call) const {
  return entry(call).summary;
}

const Protocol& CollectiveEngine::protocol(const CollectiveCall& call) const {
  return *entry(call).protocol;
}

bool CollectiveEngine::AllIntraSymmetric() const {
  bool all = true;
  for (const Entry* e : used_) all = all && e->summary.intra_symmetric;
  return all;
}

int CollectiveEngine::NetworkPeriod() const {
  const int nodes = fabric_.mesh().nodes;
  const int per_node = fabric_.platform().network().nics_per_node();
  const int nics = nodes * per_node;
  // A flow as the network sees it from its sending node n: the NIC it
  // leaves by and the one it enters, both counted from n's first NIC
  // (wrapping), its wire bytes and alpha. Node n's flows shifted by P
  // nodes are node n + P's exactly when n's relative flows are n + P's,
  // so a stage's flows repeat every P nodes when every node's relative
  // flows, sorted, equal those P nodes on.
  using NetFlow = std::tuple<int, int, uint64_t, double>;
  std::vector<std::vector<NetFlow>> from(nodes);  // by sending node
  auto repeats = [&](int by) {
    for (int n = 0; n < nodes; ++n) {
      if (from[n] != from[(n + by) % nodes]) return false;
    }
    return true;
  };
  // Periods of a set of flows are the multiples of its least one (they
  // form a subgroup of the shifts), so each stage only moves P up to the
  // next multiple of P, dividing the job's nodes, under which it repeats.
  int period = 1;
  absl::flat_hash_set<std::pair<int, int>> pairs;
  auto add = [&](const Entry& e, const std::vector<Hop>& hops) {
    for (std::vector<NetFlow>& f : from) f.clear();
    for (const Hop& h : hops) {  // each node's flows are sorted below
      if (!h.inter) continue;
      const uint64_t bytes = WireBytes(h.elements, *e.protocol);
      for (const std::vector<int>& group : e.groups) {
        const Route r = RouteOf(e, group, h.src, h.dst);
        const int n = r.from_nic / per_node;
        const int first = n * per_node;
        from[n].emplace_back(r.from_nic - first,
                             (r.to_nic - first + nics) % nics, bytes,
                             h.steps * r.alpha);
        if (!fabric_.one_switch()) pairs.insert({r.from_nic, r.to_nic});
      }
    }
    for (std::vector<NetFlow>& f : from) std::sort(f.begin(), f.end());
    while (period < nodes && !repeats(period)) {
      int next = period * 2;
      while (nodes % next != 0) next += period;
      period = next;
    }
  };
  for (const Entry* e : used_) {
    for (const Stage& stage : e->summary.stages) {
      if (period == nodes) break;
      if (stage.by_step.empty()) add(*e, stage.hops);
      for (const std::vector<Hop>& step : stage.by_step) add(*e, step);
    }
  }
  if (period == nodes) return nodes;
  // A link that only ever carries flows of one sending NIC (or one
  // receiving NIC), at a NIC's speed, never carries more than that NIC's
  // link does: under the max-min shares found without it, it is never over
  // its capacity, so those shares are the max-min ones with it too. One
  // switch has no such link (no pair is listed then). An up-link slower
  // than a NIC (an oversubscription that does not divide the leaf's ports,
  // fat_tree.h) can hold back even one NIC's flows: no symmetry then.
  struct Users {
    int from;
    int to;  // -1: several
  };
  absl::flat_hash_map<const sg4::Link*, Users> users;
  std::vector<sg4::Link*> links;
  for (const auto& [from, to] : pairs) {
    links.clear();
    fabric_.nic_host(from)->route_to(fabric_.nic_host(to), links, nullptr);
    for (size_t i = 1; i + 1 < links.size(); ++i) {
      if (links[i]->get_bandwidth() < fabric_.NicBandwidth()) return nodes;
      auto [it, fresh] = users.try_emplace(links[i], Users{from, to});
      Users& u = it->second;
      if (u.from != from) u.from = -1;
      if (u.to != to) u.to = -1;
      if (u.from < 0 && u.to < 0) return nodes;
    }
  }
  return period;
}

void CollectiveEngine::UseSymmetry() {
  node_symmetry_ = AllIntraSymmetric();
  net_period_ = network_symmetry_ && mode_ == FlowMode::kFast
                    ? NetworkPeriod()
                    : fabric_.mesh().nodes;
  stage_flows_.clear();  // built for this period
}

absl::Status CollectiveEngine::Prepare(const CollectiveCall& call) {
  absl::StatusOr<const Entry*> e = calls_->Get(call);
  if (!e.ok()) return e.status();
  Use(*e);
  return absl::OkStatus();
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

CollectiveEngine::CallTime CollectiveEngine::Run(const CollectiveCall& call,
                                                 Progress* progress) {
  Progress unused;
  if (progress == nullptr) progress = &unused;
  const Entry& e = entry(call);
  const double start = sg4::Engine::get_clock();
  ++progress->part;
  progress->until = start + e.protocol->base_latency_s();
  sg4::this_actor::sleep_for(e.protocol->base_latency_s());
  progress->until = -1;
  CallTime t;
  t.latency_s = e.protocol->base_latency_s();
  if (mode_ == FlowMode::kFast) {
    t.latency_s += RunFast(e, progress);
  } else {
    RunPerStep(e);
  }
  t.seconds = sg4::Engine::get_clock() - start;
  t.latency_s = std::min(t.latency_s, t.seconds);
  return t;
}

// SimGrid 3.32 keeps the flows an actor has in flight in a list that every
// completion walks (ActorImpl::activities_, a std::list it remove()s from),
// so one actor waiting on n flows pays n^2/2. Flows are started and waited
// in batches of kBatch, each by one of a pool of worker actors: creating an
// actor per batch costs more than the list (a context and its stack).
//
// A flow is a put to a mailbox with a permanent receiver: SimGrid starts
// such a comm at once, without a get, from the sender's host to the
// receiver's (CommImpl::isend, CommImpl::start). So the worker moves itself
// to the flow's source and its receiver to the destination before each put;
// moves are instant. Each is a simcall, during which other actors run: so
// a batch has a receiver of its own. Host-to-host comms (Comm::sendto) would
// need no moves, but 3.32 detaches them, and the end of each detached comm
// walks a list of every one in flight (the maestro's activities_): O(flows in
// flight) per end, 85% of a 16,384-GPU step and 60% of a 1,024-GPU ZeRO++
// one. Puts are waited by their worker, so their ends walk its short list.
class CollectiveEngine::FlowWorkers {
 public:
  static constexpr size_t kBatch = 32;

  // From an actor.
  explicit FlowWorkers(Fabric* fabric)
      : fabric_(fabric),
        mutex_(sg4::Mutex::create()),
        work_(sg4::ConditionVariable::create()) {}

  // Flows started together and not all done yet.
  struct Join {
    int pending = 0;
    sg4::ConditionVariablePtr done = sg4::ConditionVariable::create();
  };

  // From an actor: starts every flow at once, returns when all are done.
  // `on_end`, if given, is called as each flow ends (at its end).
  void Run(std::vector<Flow>* flows,
           const std::function<void()>& on_end = nullptr) {
    if (flows->size() <= kBatch) {
      RunBatch(flows, 0, flows->size(), &on_end);
      return;
    }
    Join join;
    Start(flows, &on_end, &join);
    Wait(&join);
  }

  // From an actor: starts every flow at once; Wait(join) returns when they
  // are done. `flows` and `on_end` (may be null) must outlive the wait.
  void Start(std::vector<Flow>* flows, const std::function<void()>* on_end,
             Join* join) {
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    for (size_t first = 0; first < flows->size(); first += kBatch) {
      queue_.push_back({flows, first, std::min(flows->size(), first + kBatch),
                        on_end, join});
      ++join->pending;
    }
    // Every batch queued must find a worker now: one that waits for its
    // turn would start its flows late. Several calls can queue batches at
    // one instant before any worker wakes, so the count is of the queue.
    // Workers that finish a batch go back to the queue; daemons, so that
    // the simulation ends when the last real actor does.
    while (idle_ < static_cast<int>(queue_.size())) {
      sg4::Actor::create("flows", sg4::this_actor::get_host(), [this] {
        Work();
      })->daemonize();
      ++idle_;  // idle from its creation: it takes a batch when it runs
    }
    work_->notify_all();
  }

  void Wait(Join* join) {
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    join->done->wait(lock, [&] { return join->pending == 0; });
  }

 private:
  struct Batch {
    std::vector<Flow>* flows;
    size_t first;
    size_t last;
    const std::function<void()>* on_end;
    Join* join;
  };

  // `on_end`: null, or empty, for none.
  void RunBatch(std::vector<Flow>* flows, size_t first, size_t last,
                const std::function<void()>* on_end) {
    static char payload;  // a put must carry one; nothing reads it
    const Box box = TakeBox();
    sg4::Host* const home = sg4::this_actor::get_host();
    std::vector<sg4::CommPtr> comms;
    bool open = false;
    for (size_t i = first; i < last; ++i) {
      Flow& f = (*flows)[i];
      box.receiver->set_host(f.to);
      sg4::this_actor::set_host(f.from);
      if (f.nvswitch && !open) {
        fabric_->OpenNvlink();
        open = true;
      }
      comms.push_back(box.mailbox->put_async(&payload, f.bytes));
      f.comm = comms.back();
    }
    if (open) fabric_->CloseNvlink();
    sg4::this_actor::set_host(home);  // started flows keep their route
    if (on_end == nullptr || !*on_end) {
      for (size_t i = first; i < last; ++i) {
        comms[i - first]->wait();
        (*flows)[i].finish = comms[i - first]->get_finish_time();
      }
    } else {
      // In the order they end, so that on_end sees each end when it happens.
      std::vector<size_t> index(comms.size());
      for (size_t j = 0; j < index.size(); ++j) index[j] = first + j;
      while (!comms.empty()) {
        const size_t j = static_cast<size_t>(sg4::Comm::wait_any(comms));
        (*flows)[index[j]].finish = comms[j]->get_finish_time();
        (*on_end)();
        comms[j] = comms.back();
        comms.pop_back();
        index[j] = index.back();
        index.pop_back();
      }
    }
    GiveBack(box);
  }

  // A mailbox and its permanent receiver, used by one batch at a time.
  struct Box {
    sg4::Mailbox* mailbox;
    sg4::ActorPtr receiver;
  };
  // Between two simcalls one actor runs alone: the free list needs no lock.
  Box TakeBox() {
    if (free_boxes_.empty()) {
      // Named by owner: mailboxes outlive it, and SimGrid's are global.
      Box box{sg4::Mailbox::by_name(
                  absl::StrCat("flows ", absl::Hex(this), " ", boxes_++)),
              sg4::Actor::create("flow ends", sg4::this_actor::get_host(),
                                 [] { Park(); })};
      // A daemon, so that the simulation ends when the last real actor
      // does. SimGrid would suspend a comm whose receiver is suspended, so
      // it blocks on a condition nobody signals instead.
      box.receiver->daemonize();
      box.mailbox->set_receiver(box.receiver);
      return box;
    }
    Box box = free_boxes_.back();
    free_boxes_.pop_back();
    return box;
  }
  // `box`'s flows are all done. A permanent receiver's mailbox keeps the
  // comms it was sent for a get that never comes: clear() drops them.
  void GiveBack(const Box& box) {
    box.mailbox->clear();
    free_boxes_.push_back(box);
  }

  static void Park() {
    sg4::MutexPtr mutex = sg4::Mutex::create();
    sg4::ConditionVariablePtr never = sg4::ConditionVariable::create();
    std::unique_lock<sg4::Mutex> lock(*mutex);
    for (;;) never->wait(lock);
  }

  void Work() {
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    for (;;) {
      work_->wait(lock, [this] { return !queue_.empty(); });
      --idle_;
      const Batch b = queue_.front();
      queue_.pop_front();
      lock.unlock();
      RunBatch(b.flows, b.first, b.last, b.on_end);
      lock.lock();
      ++idle_;
      if (--b.join->pending == 0) b.join->done->notify_all();
    }
  }

  Fabric* const fabric_;
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr work_;
  std::deque<Batch> queue_;
  int idle_ = 0;  // workers not running a batch
  std::vector<Box> free_boxes_;
  int boxes_ = 0;  // mailboxes made
};

// Inter-node flows share only the fat tree's links: NVSwitch ports are other
// links, and the only ones whose bandwidth ever changes (SetNvlinkScale). So
// a stage's flows on the fat tree (all of an inter-node stage, the network
// hops of a ring across nodes) unfold the same way, flow for flow, every
// time they run while nothing else is on the tree. Their first lone run is
// recorded: each flow's bytes left at every instant one of them ends.
// Max-min rates change only when a flow on the tree starts or ends, so
// between two such instants every rate is constant and the bytes left are
// linear in time. Later lone runs replay the record without flows: each
// flow ends when it did. Flows reaching the tree during a replay disturb
// it: every replayed flow not yet done starts then as a real one with the
// bytes the record leaves it (rounded to whole bytes), so that from that
// instant SimGrid shares the links as it would have. Direct all-to-alls
// (qgZ) need this shortcut to be affordable: a 1024-GPU inter-node
// all-to-all is 127 steps of 1024 flows per call, the same steps call
// after call.

// A lone run, from its start: when each flow ended, and at each instant a
// flow ended (at[0] = 0), every flow's bytes left.
struct CollectiveEngine::LoneRecord {
  std::vector<double> finish;
  std::vector<double> at;
  std::vector<std::vector<double>> left;

  // Flow i's bytes left `t` seconds after the start.
  double Left(size_t i, double t) const {
    const size_t k = std::upper_bound(at.begin(), at.end(), t) - at.begin();
    if (k == at.size()) return 0;
    const double x = (t - at[k - 1]) / (at[k] - at[k - 1]);
    return left[k - 1][i] + (left[k][i] - left[k - 1][i]) * x;
  }
  // Appends it as the flows' state, `t` seconds after the start.
  void Snap(double t, const std::vector<Flow>& flows) {
    if (!at.empty() && at.back() == t) return;
    at.push_back(t);
    left.emplace_back();
    for (const Flow& f : flows) {
      left.back().push_back(f.comm != nullptr ? f.comm->get_remaining()
                                              : static_cast<double>(f.bytes));
    }
  }
};

// A step-by-step stage (an all-to-all's) whose steps all run on the fat
// tree alone and are all recorded replays as one wait, not a wait per step
// and one per alpha: 127 steps per call of qgZ's all-to-all at 1024 GPUs.
// Its run is theirs one after the other, each step from the end of the
// previous one's alphas (as RunFlows ends it), and the tree is idle between
// a step's last flow and the next step, as it is step by step.
struct CollectiveEngine::LoneChain {
  bool chains = false;  // false: a step has flows of both domains, or none
  LoneStages* lone = nullptr;              // the steps' domain
  std::vector<const LoneRecord*> records;  // per step
  std::vector<double> last;                // per step: its last flow's end
  std::vector<double> length;   // per step: until its last alpha is done
  std::vector<double> latency;  // per step: that alpha (RunFlows' return)
};

// A chain's replay from step `first`: when each step starts.
struct CollectiveEngine::ChainRun {
  const LoneChain* chain;
  size_t first;
  int part;                    // the caller's Progress::part before it
  std::vector<double> starts;  // of steps first.., then the chain's end

  // The index in `starts` of the step under way at `now`.
  size_t At(double now) const {
    const size_t i =
        std::upper_bound(starts.begin(), starts.end(), now) - starts.begin();
    return std::min(i, starts.size() - 1) - 1;
  }
  // Whether flows of the step under way are still on the tree.
  bool Busy(double now) const {
    const size_t i = At(now);
    return now < starts[i] + chain->last[first + i];
  }
  // As Progress::AppendState would step by step.
  void AppendState(double now, std::vector<double>* out) const {
    const size_t i = At(now);
    const LoneRecord& r = *chain->records[first + i];
    const double t = now - starts[i];
    const bool alphas = t >= chain->last[first + i];
    out->push_back(part + 2 * static_cast<double>(i) + (alphas ? 2 : 1));
    if (alphas) {
      out->push_back(starts[i + 1] - now);
      return;
    }
    for (size_t f = 0; f < r.finish.size(); ++f) out->push_back(r.Left(f, t));
  }
};

class CollectiveEngine::LoneStages {
 public:
  // `scale`: as Rescale's, now.
  explicit LoneStages(double scale)
      : mutex_(sg4::Mutex::create()),
        wake_(sg4::ConditionVariable::create()),
        scale_(scale) {}

  // Records (and chains) are kept per stage and per bandwidth scale of
  // the domain's links, and never move.
  const LoneRecord* Find(const std::vector<Hop>* stage) const {
    auto it = records_.find({stage, scale_});
    return it == records_.end() ? nullptr : &it->second;
  }
  void Keep(const std::vector<Hop>* stage, LoneRecord record) {
    ++counts_.recorded;
    records_.try_emplace({stage, scale_}, std::move(record));
  }
  // Chains are made once their steps are all recorded.
  const LoneChain* FindChain(const Stage* stage) const {
    auto it = chains_.find({stage, scale_});
    return it == chains_.end() ? nullptr : &it->second;
  }
  const LoneChain* KeepChain(const Stage* stage, LoneChain chain) {
    return &chains_.try_emplace({stage, scale_}, std::move(chain))
                .first->second;
  }

  // The domain's links change bandwidth by `scale` (x their own) from
  // now: a replay under way turns real, a run under way is not lone.
  // (Its flows' rates are bounded by no link's bandwidth at their start:
  // Fabric::OpenNvlink.)
  void Rescale(double scale) {
    Disturb();
    ++starts_;
    scale_ = scale;
  }

  // Nothing in the domain: no real flows, no replay.
  bool Idle() const { return real_ == 0 && replay_ == nullptr; }

  // Before flows reach the domain: a replay under way turns real (its
  // owner starts its flows at this same instant, and counts as real). A
  // chain between two steps is cut instead: its owner goes on step by step
  // from the next one, and the domain is idle till then.
  void Disturb() {
    if (replay_ == nullptr) return;
    Replay* r = replay_;
    replay_ = nullptr;
    const double now = sg4::Engine::get_clock();
    if (now >= r->end) return;  // its flows end now
    if (r->chain != nullptr && !r->chain->Busy(now)) {
      r->cut_at = now;
    } else {
      r->disturbed_at = now;
      ++counts_.disturbed;
      ++real_;
    }
    wake_->notify_all();
  }

  // Real flows in the domain from now until Stop(). Returns the number of
  // starts so far: a run was alone if it is unchanged at its end.
  uint64_t Start() {
    ++real_;
    return ++starts_;
  }
  void Stop() { --real_; }
  uint64_t starts() const { return starts_; }
  const ReplayCounts& counts() const { return counts_; }
  // Stages replayed, in whole or in part.
  void CountReplays(int64_t stages) { counts_.replayed += stages; }

  struct Replay {
    double end = 0;  // its last flow's end (a chain's: its last alpha's)
    const ChainRun* chain = nullptr;  // a chain's steps
    double disturbed_at = -1;         // when it turned real, if it did
    double cut_at = -1;               // a chain: when it was cut, if it was
  };
  // From an Idle() domain: waits until `r` ends, is disturbed (its owner
  // then starts its flows and calls Stop()) or cut.
  void Wait(Replay* r) {
    replay_ = r;
    ++starts_;
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    while (r->disturbed_at < 0 && r->cut_at < 0 &&
           sg4::Engine::get_clock() < r->end) {
      wake_->wait_until(lock, r->end);
    }
    if (replay_ == r) replay_ = nullptr;
  }

 private:
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr wake_;
  absl::node_hash_map<std::pair<const std::vector<Hop>*, double>, LoneRecord>
      records_;
  absl::node_hash_map<std::pair<const Stage*, double>, LoneChain> chains_;
  double scale_;
  int real_ = 0;  // flow sets in the domain now (RunFlows calls)
  uint64_t starts_ = 0;
  Replay* replay_ = nullptr;
  ReplayCounts counts_;
};

void CollectiveEngine::set_replay_stages(bool on) {
  const bool replays = on && mode_ == FlowMode::kFast;
  // The fat tree's links never change bandwidth.
  lone_tree_ = replays ? std::make_unique<LoneStages>(1) : nullptr;
  lone_nvswitch_ =
      replays ? std::make_unique<LoneStages>(fabric_.nvlink_scale()) : nullptr;
  stage_flows_.clear();  // built to run together or apart (FlowsOf)
}

void CollectiveEngine::SetNvlinkScale(double scale) {
  fabric_.SetNvlinkScale(scale, node_symmetry_);
  if (lone_nvswitch_ != nullptr) lone_nvswitch_->Rescale(scale);
}

CollectiveEngine::ReplayCounts CollectiveEngine::replay_counts() const {
  if (lone_tree_ == nullptr) return ReplayCounts();
  ReplayCounts c = lone_tree_->counts();
  const ReplayCounts& n = lone_nvswitch_->counts();
  c.recorded += n.recorded;
  c.replayed += n.replayed;
  c.disturbed += n.disturbed;
  return c;
}

void CollectiveEngine::Progress::AppendState(double now,
                                             std::vector<double>* out) const {
  if (chain != nullptr) {
    chain->AppendState(now, out);
    return;
  }
  out->push_back(part);
  if (until >= 0) out->push_back(until - now);
  AppendFlowsLeft(now, out);
}

void CollectiveEngine::Progress::AppendFlowsLeft(
    double now, std::vector<double>* out) const {
  auto append = [&](const std::vector<Flow>& v, const LoneRecord* record) {
    for (size_t i = 0; i < v.size(); ++i) {
      const Flow& f = v[i];
      if (f.comm != nullptr) {
        out->push_back(f.comm->get_remaining());
      } else if (record != nullptr) {
        out->push_back(record->Left(i, now - replay_start));
      } else {
        out->push_back(static_cast<double>(f.bytes));
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
  for (const std::vector<int>& group : e.groups) {
    for (const Hop& h : hops) {
      if (node_symmetry_ && !h.inter && group[h.src] / per_node != 0) {
        continue;  // another node's NVSwitch traffic mirrors node 0's
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
      Flow f{r.from, r.to, WireBytes(bytes, *e.protocol)};
      f.nvswitch = !h.inter;
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
                                  Progress* progress, const Resume* resume) {
  const StageFlows& stage = FlowsOf(e, hops);
  const double start =
      resume != nullptr ? resume->start : sg4::Engine::get_clock();
  if (workers_ == nullptr) workers_ = std::make_unique<FlowWorkers>(&fabric_);
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
    workers_->Run(&flows);
    progress->flows = nullptr;
    for (size_t i = 0; i < flows.size(); ++i) finish[i] = flows[i].finish;
  } else if (stage.net.empty() || stage.local.empty()) {
    // Flows of one domain, alone in it or not.
    const bool on_tree = !stage.net.empty();
    LoneStages* lone = on_tree ? lone_tree_.get() : lone_nvswitch_.get();
    const std::vector<Flow>& mine = on_tree ? stage.net : stage.local;
    progress->net = &mine;  // RunLone points it at what it runs
    finish.clear();
    RunLone(lone, &hops, start, mine, &net, &finish, progress, resume);
    progress->net = nullptr;
  } else {
    // NVSwitch flows and fat-tree flows share no link: the former run for
    // real (the NVSwitch domain is busy meanwhile), the latter as a stage
    // of their own, alone on the tree or not.
    lone_nvswitch_->Disturb();
    lone_nvswitch_->Start();
    local = stage.local;
    std::vector<double> net_finish;
    progress->flows = &local;
    progress->net = &stage.net;  // RunLone points it at what it runs
    FlowWorkers::Join join;
    workers_->Start(&local, nullptr, &join);
    RunLone(lone_tree_.get(), &hops, start, stage.net, &net, &net_finish,
            progress, resume);
    workers_->Wait(&join);
    lone_nvswitch_->Stop();
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

void CollectiveEngine::RunLone(LoneStages* lone, const std::vector<Hop>* stage,
                               double start, const std::vector<Flow>& flows,
                               std::vector<Flow>* net,
                               std::vector<double>* finish, Progress* progress,
                               const Resume* resume) {
  if (resume != nullptr) {
    RunRest(lone, start, *resume->record, resume->at - start, flows, net,
            progress);
    for (const Flow& f : *net) finish->push_back(f.finish);
    return;
  }
  lone->Disturb();
  const bool alone = lone->Idle();
  const LoneRecord* record = alone ? lone->Find(stage) : nullptr;
  if (record != nullptr &&
      ReplayLone(lone, start, *record, flows, net, progress)) {
    finish->resize(flows.size());
    for (size_t i = 0; i < flows.size(); ++i) {
      (*finish)[i] = start + record->finish[i];
    }
    return;
  }
  if (record == nullptr) {
    *net = flows;
    progress->net = net;
    const uint64_t starts = lone->Start();
    if (!alone) {
      workers_->Run(net);
      lone->Stop();
    } else {
      LoneRecord r;
      r.Snap(0, *net);
      workers_->Run(net,
                    [&] { r.Snap(sg4::Engine::get_clock() - start, *net); });
      lone->Stop();
      if (lone->starts() == starts) {  // nothing else reached the domain
        for (const Flow& f : *net) r.finish.push_back(f.finish - start);
        lone->Keep(stage, std::move(r));
      }
    }
  }
  for (const Flow& f : *net) finish->push_back(f.finish);
}

bool CollectiveEngine::ReplayLone(LoneStages* lone, double start,
                                  const LoneRecord& record,
                                  const std::vector<Flow>& flows,
                                  std::vector<Flow>* net, Progress* progress) {
  LoneStages::Replay r;
  r.end = start + *std::max_element(record.finish.begin(), record.finish.end());
  progress->net = &flows;  // none started: the record says what is left
  progress->replay = &record;
  progress->replay_start = start;
  lone->CountReplays(1);
  lone->Wait(&r);
  progress->replay = nullptr;
  if (r.disturbed_at < 0) return true;
  RunRest(lone, start, record, r.disturbed_at - start, flows, net, progress);
  return false;
}

void CollectiveEngine::RunRest(LoneStages* lone, double start,
                               const LoneRecord& record, double t,
                               const std::vector<Flow>& flows,
                               std::vector<Flow>* net, Progress* progress) {
  // Flows done by then run as empty ones: the collapse sees 0 bytes left,
  // as it would, and they are one list of flows with the rest.
  *net = flows;
  progress->net = net;
  for (size_t i = 0; i < net->size(); ++i) {
    Flow& f = (*net)[i];
    f.bytes = record.finish[i] <= t
                  ? 0
                  : static_cast<uint64_t>(std::llround(record.Left(i, t)));
  }
  workers_->Run(net);
  lone->Stop();
  for (size_t i = 0; i < net->size(); ++i) {
    if (record.finish[i] <= t) (*net)[i].finish = start + record.finish[i];
  }
}

const CollectiveEngine::LoneChain* CollectiveEngine::ChainOf(
    const Entry& e, const Stage& stage) {
  // The domain of its first step's flows.
  const bool on_tree = !FlowsOf(e, stage.by_step[0]).net.empty();
  LoneStages* lone = on_tree ? lone_tree_.get() : lone_nvswitch_.get();
  if (const LoneChain* c = lone->FindChain(&stage); c != nullptr) {
    return c->chains ? c : nullptr;
  }
  LoneChain c;
  c.lone = lone;
  for (const std::vector<Hop>& step : stage.by_step) {
    const StageFlows& flows = FlowsOf(e, step);
    const std::vector<Flow>& other = on_tree ? flows.local : flows.net;
    if (!other.empty() || flows.alpha.empty()) {
      lone->KeepChain(&stage, LoneChain());  // never chains
      return nullptr;
    }
    const LoneRecord* r = lone->Find(&step);
    if (r == nullptr) return nullptr;  // not yet
    // The step's end as RunFlows finds it (no floor).
    double length = 0;
    double latency = 0;
    for (size_t i = 0; i < r->finish.size(); ++i) {
      const double done = r->finish[i] + flows.alpha[i];
      if (done > length) {
        length = done;
        latency = flows.alpha[i];
      }
    }
    c.records.push_back(r);
    c.last.push_back(*std::max_element(r->finish.begin(), r->finish.end()));
    c.length.push_back(length);
    c.latency.push_back(latency);
  }
  c.chains = true;
  return lone->KeepChain(&stage, std::move(c));
}

size_t CollectiveEngine::RunChain(const Entry& e, const Stage& stage,
                                  const LoneChain& chain, size_t first,
                                  Progress* progress, double* latency) {
  const size_t steps = stage.by_step.size();
  ChainRun run{&chain, first, progress->part, {}};
  double t = sg4::Engine::get_clock();
  run.starts.push_back(t);
  for (size_t j = first; j < steps; ++j)
    run.starts.push_back(t += chain.length[j]);
  LoneStages::Replay r;
  r.end = run.starts.back();
  r.chain = &run;
  progress->chain = &run;
  chain.lone->Wait(&r);
  progress->chain = nullptr;
  const bool stopped = r.disturbed_at >= 0 || r.cut_at >= 0;
  const size_t stop =
      stopped ? first + run.At(sg4::Engine::get_clock()) : steps;
  chain.lone->CountReplays(static_cast<int64_t>(stop - first) +
                           (stopped ? 1 : 0));
  for (size_t j = first; j < stop; ++j) *latency += chain.latency[j];
  progress->part += 2 * static_cast<int>(stop - first);
  if (!stopped) return steps;
  const double start = run.starts[stop - first];
  if (r.disturbed_at >= 0) {
    const Resume resume{chain.records[stop], start, r.disturbed_at};
    *latency += RunFlows(e, stage.by_step[stop], 0, 0, progress, &resume);
  } else {  // cut after this step's flows: its alphas run out
    progress->part += 2;
    progress->until = run.starts[stop - first + 1];
    sg4::this_actor::sleep_until(progress->until);
    progress->until = -1;
    *latency += chain.latency[stop];
  }
  return stop + 1;
}

double CollectiveEngine::RunFast(const Entry& e, Progress* progress) {
  double latency = 0;
  for (const Stage& stage : e.summary.stages) {
    if (stage.by_step.empty()) {
      double floor_alpha = 0;
      const double floor =
          StageFloor(stage, *e.protocol, fabric_.platform(), &floor_alpha);
      latency += RunFlows(e, stage.hops, floor, floor_alpha, progress);
    } else {
      // A chain takes the steps left whenever its domain is idle; one not
      // complete yet is not looked for again in this run.
      bool chains = lone_tree_ != nullptr;
      for (size_t k = 0; k < stage.by_step.size();) {
        const LoneChain* chain = chains ? ChainOf(e, stage) : nullptr;
        chains = chain != nullptr;
        if (chain != nullptr) {
          chain->lone->Disturb();
          if (chain->lone->Idle()) {
            k = RunChain(e, stage, *chain, k, progress, &latency);
            continue;
          }
        }
        latency += RunFlows(e, stage.by_step[k], 0, 0, progress);
        ++k;
      }
    }
  }
  return latency;
}

namespace {

// One message of the per-step mode: the transfers of one step with the same
// channel, source and destination (plan.h: one message cut into ranges).
struct Message {
  int src = 0;
  int dst = 0;
  int64_t elements = 0;
  std::vector<int> next;  // messages that need this one's data
  int waiting = 0;        // messages whose data this one needs
};

// The plan's messages and their data dependencies. A message is what one
// pair sends on one channel in one step (plan.h); it needs every earlier
// transfer into its sender that overlaps what it sends, and the previous
// step's messages on its own connection (an NCCL channel carries its steps
// one after another). The switch is member p.
std::vector<Message> DataflowMessages(const Plan& plan) {
  const std::vector<Transfer> transfers = ExpandTransfers(plan);  // by step
  const int p = plan.shape.size();
  auto who = [p](int member) { return member == kSwitch ? p : member; };
  using Connection = std::tuple<int, int, int>;  // channel, src, dst
  std::map<std::tuple<int, int, int, int>, int> id;
  std::vector<Message> msgs;
  std::vector<std::set<int>> needs;  // per message, earlier messages
  std::vector<int> msg_of(transfers.size());
  std::vector<std::vector<size_t>> into(p + 1);       // transfers into a member
  std::map<Connection, std::pair<int, int>> last_on;  // step, message
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    auto [it, fresh] = id.try_emplace({t.step, t.channel, t.src, t.dst},
                                      static_cast<int>(msgs.size()));
    const int m = it->second;
    if (fresh) {
      msgs.push_back({t.src, t.dst, 0, {}, 0});
      needs.emplace_back();
      const Connection c{t.channel, t.src, t.dst};
      if (auto prev = last_on.find(c); prev != last_on.end()) {
        needs[m].insert(prev->second.second);
      }
      last_on[c] = {t.step, m};
    }
    for (size_t j : into[who(t.src)]) {
      const Transfer& in = transfers[j];
      if (in.step < t.step && in.offset < t.offset + t.count &&
          t.offset < in.offset + in.count) {
        needs[m].insert(msg_of[j]);
      }
    }
    msgs[m].elements += t.count;
    msg_of[i] = m;
    into[who(t.dst)].push_back(i);
  }
  for (size_t m = 0; m < msgs.size(); ++m) {
    for (int d : needs[m]) msgs[d].next.push_back(static_cast<int>(m));
    msgs[m].waiting = static_cast<int>(needs[m].size());
  }
  return msgs;
}

}  // namespace

void CollectiveEngine::RunPerStep(const Entry& e) {
  const std::vector<Message> plan_msgs = DataflowMessages(e.plan);
  int remaining = static_cast<int>(plan_msgs.size() * e.groups.size());
  sg4::MutexPtr mutex = sg4::Mutex::create();
  sg4::ConditionVariablePtr done = sg4::ConditionVariable::create();
  for (const std::vector<int>& group : e.groups) {
    auto msgs = std::make_shared<std::vector<Message>>(plan_msgs);
    // Launch(i): message i's flow, then its alpha, then whatever it unblocks.
    auto launch = std::make_shared<std::function<void(int)>>();
    *launch = [this, &e, &group, msgs, launch, &remaining, mutex, done](int i) {
      sg4::Actor::create(
          "message", sg4::this_actor::get_host(), [=, &e, &group, &remaining] {
            const Message& m = (*msgs)[i];
            const Route r = RouteOf(e, group, m.src, m.dst);
            const bool leaves = LeavesNode(e.shape, m.src, m.dst);
            const double bytes =
                leaves ? m.elements : m.elements * e.intra_inflation;
            if (!leaves) fabric_.OpenNvlink();
            sg4::CommPtr comm = sg4::Comm::sendto_async(
                r.from, r.to, WireBytes(bytes, *e.protocol));
            if (!leaves) fabric_.CloseNvlink();
            comm->wait();
            sg4::this_actor::sleep_for(r.alpha);
            for (int n : m.next) {
              if (--(*msgs)[n].waiting == 0) (*launch)(n);
            }
            std::unique_lock<sg4::Mutex> lock(*mutex);
            if (--remaining == 0) done->notify_all();
          });
    };
    for (int i = 0; i < static_cast<int>(msgs->size()); ++i) {
      if ((*msgs)[i].waiting == 0) (*launch)(i);
    }
  }
  std::unique_lock<sg4::Mutex> lock(*mutex);
  done->wait(lock, [&] { return remaining == 0; });
}

}  // namespace shardsim
