// Collectives on the SimGrid fabric: every group of a call's shape runs its
// plan at once, as flows that share links max-min with whatever else is in
// flight (other collectives, other groups).
//
// Two ways to run a plan, which agree where both apply:
//  - fast: per stage (sim/collective/plan_summary.h), one flow per hop with all
//  its bytes,
//    then the hop's steps x alpha after it; the stage ends with its last hop,
//    and not before its floor (its steps one by one, each as long as its
//    busiest endpoint takes). Stages of explicit transfers only (an
//    all-to-all's, SHARP's) run step by step, a flow per pair per step.
//  - per-step: every message of every step is a flow (then its alpha); a
//    message starts once every earlier transfer into its sender that
//    overlaps what it sends has arrived: data flow, not lock-step. For
//    checking.
// Wire protocol: per call the one with the smallest alpha-beta estimate
// (sim/collective/estimate.h, as NCCL's tuner picks), applied as its alphas
// and as wire bytes = payload / bandwidth_fraction. Algorithms that run as
// point-to-point copies to several peers rather than as NCCL's ring kernels
// (HO-Ring, direct all-to-all) reach less of NVSwitch: their intra-node
// bytes are inflated (IntraInflation).
#ifndef SHARDSIM_SIM_ENGINE_COLLECTIVE_ENGINE_H_
#define SHARDSIM_SIM_ENGINE_COLLECTIVE_ENGINE_H_

#include <simgrid/forward.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "sim/collective/plan.h"
#include "sim/collective/plan_cache.h"
#include "sim/collective/plan_summary.h"
#include "sim/engine/fabric.h"
#include "sim/engine/flow_workers.h"
#include "sim/engine/prepared_calls.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

class CollectiveEngine {
  // Lone-stage replays (lone_stages.h).
  class LoneStages;   // the lone runs of one domain
  struct LoneRecord;  // a stage's lone run
  struct LoneChain;   // a stage of recorded steps, replayed as one
  struct ChainRun;    // a LoneChain's replay under way

 public:
  // `channels`: parallel rings for every call (the platform's by default).
  // `prepared`, if given and made for this mesh, platform, mode and
  // channel count (PreparedCalls::Serve), is where calls are prepared
  // (shared, and kept after the engine); else the engine keeps its own.
  CollectiveEngine(Fabric& fabric, FlowMode mode, int channels,
                   PreparedCalls* prepared = nullptr);
  ~CollectiveEngine();

  // Plans `call` (once per PlanKey, plan_cache.h). Errors name the call's
  // group or algorithm and why it cannot run here. With several programs
  // (SetPrograms), for `program`: the call runs the groups of its shape
  // that hold its ranks, and a group that holds ranks of other programs
  // too is an error.
  absl::Status Prepare(const CollectiveCall& call, int program = 0);

  // Several programs (schedule.proto Program; replay.h), `ranks` per
  // program, partitioning the mesh's. Before any Prepare, and once. Every
  // call then runs for one program's ranks, and what assumes that every
  // rank runs every call is off: node and network symmetry (UseSymmetry
  // keeps every flow). NVSwitch ports slow per program (SetNvlinkScale),
  // and each program's ports are a lone-stage domain of their own: a
  // program's collectives keep to its ranks, so their NVSwitch flows cross
  // only its ports (a GPU's port is its own link, fabric.h).
  void SetPrograms(std::vector<std::vector<int>> ranks);
  bool several_programs() const { return !programs_.empty(); }

  // How long a call took, and how much of it was latency: the protocol's
  // base latency plus the per-step alphas on its critical flows.
  struct CallTime {
    double seconds = 0;
    double latency_s = 0;
  };

  // Where a running call is, for the collapsed replay's comparison of
  // states (replay.h). Fast mode only.
  class Progress {
   public:
    // Appends what decides the rest of the call: how far it got and how
    // long it still waits (from `now`) to `out`, each flow's bytes still
    // to go to `bytes`.
    void AppendState(double now, std::vector<double>* out,
                     std::vector<double>* bytes) const;

   private:
    friend class CollectiveEngine;
    int part = 0;  // waits begun so far (flows, sleeps)
    const std::vector<Flow>* flows = nullptr;  // in flight
    // Those of one domain (fat tree, NVSwitch ports) run apart, if any.
    const std::vector<Flow>* net = nullptr;
    double until = -1;  // sleeping until
    // Flows replayed rather than run (LoneStages, lone_stages.h).
    const LoneRecord* replay = nullptr;
    double replay_start = 0;
    // Steps replayed as one chain: it knows where it is (ChainRun).
    const ChainRun* chain = nullptr;
    void AppendFlowsLeft(double now, std::vector<double>* out,
                         std::vector<double>* bytes) const;
  };

  // From a SimGrid actor: runs a prepared call for every group of its shape
  // and returns when the last flow (and alpha) is done. `progress`, if
  // given, follows it (fast mode).
  CallTime Run(const CollectiveCall& call, Progress* progress = nullptr,
               int program = 0);

  // From a SimGrid actor: a point-to-point send (schedule.proto
  // PointToPoint) from rank from[i] to rank to[i], for every i, each pair
  // one flow of send.bytes() (point_to_point.cc): GPU to GPU over NVSwitch
  // inside a node, NIC to NIC across nodes, as a collective's hop runs.
  // Its wire protocol is the platform's with the least alpha-beta time
  // for the slowest pair (base latency + one step's alpha + bytes at the
  // link's rate); the send takes the base latency, its flows, then the
  // alpha. Returns when every pair's bytes have arrived.
  // `progress`, if given, follows it as Run's does.
  CallTime RunSend(const PointToPoint& send, const std::vector<int>& from,
                   const std::vector<int>& to, Progress* progress = nullptr);

  // Between two runs of the engine (Engine::run): forgets the worker
  // actors, which SimGrid ended with the run.
  void EndRun();

  // Whether only node 0's NVSwitch traffic runs (UseSymmetry), or with
  // several programs each program's first node's.
  bool node_symmetry() const { return node_symmetry_; }
  // Network symmetry (docs/engine.md §8): the fewest nodes P, dividing the
  // job's, such that the network flows of every prepared call, all groups
  // together, are the same shifted by P nodes (each flow from NIC i of node
  // n to NIC j of node m has a twin from node n + P to node m + P, with the
  // same bytes and alpha), and every fat-tree link past a NIC's own link
  // carries the flows of one sending NIC only, or of one receiving NIC
  // only. The job's node count where no P short of it does.
  int NetworkPeriod() const;
  // On by default; fast mode only. Off, every network flow runs.
  void set_network_symmetry(bool on) { network_symmetry_ = on; }
  // On by default. Off, every node's NVSwitch flows run (tests compare).
  void set_node_symmetry(bool on) { node_symmetry_on_ = on; }
  // Once every call of the program is prepared, before any runs (it drops
  // the stages' flows). Node symmetry: only node 0's NVSwitch traffic runs
  // where every plan is intra-symmetric, exact since NVSwitch ports carry
  // only their own node's traffic; with several programs, each program's
  // first node's, where every program holds whole nodes (its calls' groups
  // then tile its nodes alike, and its ports carry its calls only). Network
  // symmetry, if on: only the network flows leaving the first NetworkPeriod()
  // nodes run, each from its NIC's sending half to the receiving half of the
  // NIC it enters taken P nodes back (Fabric::nic_out, nic_in). Exact: NIC i of
  // every node then carries what NIC i of node n mod P does; max-min shares,
  // being unique, are the same for a flow and its twins, and no other link
  // ever limits one.
  void UseSymmetry();
  // Nodes whose network flows run: the job's, or NetworkPeriod().
  int network_nodes() const { return net_period_; }
  // Stages of inter-node flows alone on the fat tree, and of NVSwitch
  // flows alone on the NVSwitch ports (of a program's ranks, with several
  // programs), are replayed from their first lone run (lone_stages.h,
  // LoneStages): the same times, without their flows. On by default; fast
  // mode only.
  void set_replay_stages(bool on);
  // NVSwitch ports run at `scale` x their bandwidth from now (compute
  // slows them, docs/engine.md): node 0's alone under node symmetry.
  void SetNvlinkScale(double scale);
  // Several programs: the ports of `program`'s ranks only.
  void SetNvlinkScale(double scale, int program);
  // What the replays did so far: stages recorded, replayed, and replays
  // that other flows disturbed (and turned real).
  struct ReplayCounts {
    int64_t recorded = 0;
    int64_t replayed = 0;
    int64_t disturbed = 0;
  };
  ReplayCounts replay_counts() const;
  FlowMode mode() const { return mode_; }

  const PlanSummary& summary(const CollectiveCall& call) const;
  const Protocol& protocol(const CollectiveCall& call) const;

 private:
  using Entry = PreparedCall;
  // Every prepared plan sees the same intra-node hops on every node.
  bool AllIntraSymmetric() const;
  // Several programs: each program's ranks are whole nodes.
  bool ProgramsOwnNodes() const;
  void Use(const Entry* e);  // adds it to used_ once
  const Entry& entry(const CollectiveCall& call, int program = 0) const;
  // Returns the latency part of the run.
  double RunFast(const Entry& e, Progress* progress, int program);
  // A replay of a lone stage from `start`, disturbed `at` (an instant): its
  // flows not done by then run from there (RunRest).
  struct Resume {
    const LoneRecord* record;
    double start;
    double at;
  };
  // Starts one flow per hop for every group, waits for them, then for each
  // hop's steps x alpha, and for `floor` seconds at least (of which
  // `floor_alpha` is latency). Returns the latency part of what it waited.
  // With `resume`, the stage (flows of one domain) began as that replay
  // and goes on from where it was disturbed.
  double RunFlows(const Entry& e, const std::vector<Hop>& hops, double floor,
                  double floor_alpha, Progress* progress, int program,
                  const Resume* resume = nullptr);
  // A stage's flows as RunFlows starts them, made on the stage's first run
  // (its hops never move): every group's, in group then hop order, each
  // with its alpha (steps x the route's); and the NVSwitch flows and those
  // on the fat tree apart. A replayed stage's flows are never built again:
  // ZeRO++ at 1024 GPUs replays 145,000 stages of 1024 flows.
  struct StageFlows {
    // Not started; only without replays (with them, domains run apart).
    std::vector<Flow> all;
    std::vector<double> alpha;
    std::vector<bool> on_net;
    std::vector<Flow> local;
    std::vector<Flow> net;
  };
  const StageFlows& FlowsOf(const Entry& e, const std::vector<Hop>& hops);
  // A stage's flows of one domain (`flows`, on `lone`'s links), started at
  // `start`: recorded if alone and new, replayed if alone and recorded,
  // else run. `finish` gets when each ended; `net` holds those run for
  // real, which `progress` follows until the caller resets it.
  void RunLone(LoneStages* lone, const std::vector<Hop>* stage, double start,
               const std::vector<Flow>& flows, std::vector<Flow>* net,
               std::vector<double>* finish, Progress* progress,
               const Resume* resume);
  // A recorded lone stage from `start`: true if its flows ended as they
  // did then; if disturbed, those not done ran for real from that instant,
  // in `net`, and it returns false.
  bool ReplayLone(LoneStages* lone, double start, const LoneRecord& record,
                  const std::vector<Flow>& flows, std::vector<Flow>* net,
                  Progress* progress);
  // A replay from `start` disturbed `t` seconds in: its flows not done
  // then run for real, in `net`, with the bytes the record leaves them.
  void RunRest(LoneStages* lone, double start, const LoneRecord& record,
               double t, const std::vector<Flow>& flows, std::vector<Flow>* net,
               Progress* progress);
  // A step-by-step stage's steps, if every one runs in one domain, the
  // same, and has a lone record (null otherwise); made once complete.
  const LoneChain* ChainOf(const Entry& e, const Stage& stage, int program);
  // From an idle domain: replays steps `first`.. of `stage` as one wait.
  // Returns the step to go on from: the last one, or the one after the
  // step a flow reaching the domain disturbed (which it finished).
  size_t RunChain(const Entry& e, const Stage& stage, const LoneChain& chain,
                  size_t first, Progress* progress, int program,
                  double* latency);
  void RunPerStep(const Entry& e);
  // Hosts a hop's flow runs between, and its alpha per step.
  struct Route {
    simgrid::s4u::Host* from;
    simgrid::s4u::Host* to;
    double alpha;
    int from_nic = -1;  // across nodes: the NICs it leaves and enters by
    int to_nic = -1;
  };
  Route RouteOf(const Entry& e, const std::vector<int>& group, int src,
                int dst) const;

  Fabric& fabric_;
  const FlowMode mode_;
  const int channels_;
  bool node_symmetry_ = false;
  bool node_symmetry_on_ = true;  // set_node_symmetry
  bool network_symmetry_ = true;
  int net_period_;  // nodes whose network flows run (UseSymmetry)
  std::unique_ptr<PreparedCalls> own_;  // null: the caller's
  PreparedCalls* calls_;
  // What this engine prepared (a shared PreparedCalls has others' too),
  // in the order first prepared: what symmetry is judged on.
  std::vector<const Entry*> used_;
  absl::flat_hash_set<const Entry*> is_used_;
  // The flow workers, created by the first call that needs them.
  FlowWorkers& Workers();
  std::unique_ptr<FlowWorkers> workers_;
  // Null (empty): no replays. Flows on the fat tree and on NVSwitch ports
  // share no link: each is a domain of its own, and so are the ports of
  // each program (one domain per program; one in all without programs).
  std::unique_ptr<LoneStages> lone_tree_;
  std::vector<std::unique_ptr<LoneStages>> lone_nvswitch_;
  LoneStages* Nvswitch(int program) const {
    return lone_nvswitch_[programs_.empty() ? 0 : program].get();
  }
  // Node-based: a call holds its stage's flows while others add theirs.
  absl::node_hash_map<const std::vector<Hop>*, StageFlows> stage_flows_;
  // Several programs (SetPrograms): each program's ranks; and per prepared
  // call and program, the call with that program's groups only (its own
  // stages, so that the flows built per stage are the program's).
  std::vector<std::vector<int>> programs_;
  std::vector<int> program_of_;  // by rank
  absl::node_hash_map<std::pair<const Entry*, int>, std::unique_ptr<Entry>>
      program_calls_;
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_COLLECTIVE_ENGINE_H_
