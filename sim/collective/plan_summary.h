// A plan as the fast engine runs it (docs/engine.md §6): one flow per hop
// carrying all of that hop's bytes, with alpha added once per step after it.
//
// A stage is a maximal run of steps of one kind (inside nodes only, between
// nodes only, or both): a hierarchical algorithm's phases run one after
// another, while the hops of one phase (a pipelined ring, HO-Ring's
// concurrent rings) run together. A hop is a pair of members: the channels
// between them are one flow, which max-min shares as their sum whenever
// every hop carries the same number of channels, as every plan's does.
// Hops that must wait for each other inside a stage (a chain, a tree) are
// held back by the stage's floor: the sum over its steps of each step's
// time at its busiest endpoint (what one member sends or receives over
// NVSwitch, or one NIC, in a step, all channels together): the stage run
// step by step, with nothing else on the links. Ring passes need no floor:
// a pipelined ring is exactly its hops' flows plus alpha per step.
#ifndef SHARDSIM_SIM_COLLECTIVE_PLAN_SUMMARY_H_
#define SHARDSIM_SIM_COLLECTIVE_PLAN_SUMMARY_H_

#include <cstdint>
#include <vector>

#include "sim/base/fat_tree.h"
#include "sim/collective/plan.h"
#include "sim/schema/platform.pb.h"

namespace shardsim {

struct Hop {
  int32_t src = 0;  // member index or kSwitch
  int32_t dst = 0;
  int64_t elements = 0;  // over the whole stage, all channels
  int32_t steps = 0;     // steps of the stage this hop is used in
  bool inter = false;    // leaves the node (or touches the switch)
};

// What the busiest endpoint of one step moves (elements), by where it goes:
// what one member sends or receives over NVSwitch, or one NIC over the
// network (NicMembers), all channels together.
struct StepLoad {
  int64_t intra = 0;
  int64_t inter = 0;
  int64_t via_switch = 0;
};

// What one endpoint moves over a whole stage (elements, all channels), and
// the fewest steps of any hop through it: the flows through it share it, so
// the last of them ends no sooner than these elements at its rate, then
// waits at least those steps' alphas.
struct EndpointLoad {
  int64_t elements = 0;
  int32_t steps = 0;
};

// A stage's busiest endpoint of each kind, endpoints as StepLoad's (a
// member over NVSwitch, a NIC with every GPU on it over the network),
// where a StepLoad is one step's: the most elements, and of equals the
// most steps.
struct StageLoad {
  EndpointLoad intra;
  EndpointLoad inter;
  EndpointLoad via_switch;
  // The busiest leaf's up-links, as one pool, one way (AddUplinkLoads):
  // what its NICs send to, or receive from, other leaves.
  EndpointLoad uplinks;
};

struct Stage {
  std::vector<Hop> hops;
  StageLoad busiest;
  std::vector<StepLoad> steps;  // its steps' explicit transfers, in order
  // A stage of explicit transfers only (direct, switch) runs step by
  // step: by_step[i] are step i's messages, one per pair (steps = 1).
  // Aggregating an all-to-all's steps instead would put N x p flows in
  // flight at once, and SimGrid 3.32 pays per completion for every flow in
  // flight. A stage with a ring or chain pass, or a tree's, runs as its
  // hops, one flow each, with the pipeline's floor (estimate.h,
  // StageFloor).
  std::vector<std::vector<Hop>> by_step;
};

struct PlanSummary {
  std::vector<Stage> stages;
  // Every node of the group sees the same intra-node hops (same local
  // ranks, sizes, steps), so one node's NVSwitch traffic stands for all.
  bool intra_symmetric = true;
};

// The GPUs that share each NIC when every group of a call runs the plan at
// once (collective_engine.h), as members: nics[k] lists, for each GPU on NIC
// k, its index in its own group. All groups run the same plan, so a NIC's
// load in a step is the sum of those members' loads: on a800_lins, two GPUs
// share a NIC, and in a group of one member per node both are that member.
// Empty: every member has a NIC of its own.
using NicMembers = std::vector<std::vector<int32_t>>;

// The NicMembers of a call run at once by every one of `groups` (GroupsOf,
// group.h) on `platform`'s nodes of `gpus_per_node` GPUs: each NIC's list
// sorted, and equal lists once, which is all a stage's floor counts. None
// where the platform has no NICs.
NicMembers CallNics(const std::vector<std::vector<int>>& groups,
                    const Platform& platform, int gpus_per_node);

// With `by_step` false the stages' by_step are left empty: all that
// estimates and bounds read (hops, step loads) without listing
// every message, which a long chain has millions of. The engine needs
// them.
PlanSummary Summarize(const Plan& plan, bool by_step = true,
                      const NicMembers& nics = {});

// Sets each stage's busiest.uplinks for a call run at once by every one
// of `groups` (global ranks) on nodes of `gpus_per_node` GPUs, whose NICs
// sit on `tree`: the hops between members whose NICs are on different
// leaves, summed per leaf and way. Nothing where the tree has no up-links
// to hold a flow back (FatTreeLayout::has_uplinks). Switch hops (SHARP)
// are left out: a bound, never more than the up-links carry.
void AddUplinkLoads(const std::vector<std::vector<int>>& groups,
                    const Platform& platform, int gpus_per_node,
                    const FatTreeLayout& tree, PlanSummary* summary);

// `summary` with every member m renamed (m + nodes * per_node) mod size,
// `nodes` of the plan's nodes on (the switch stays), hops in Summarize's
// order. A broadcast from a root that many nodes on summarizes so
// (plan_summary_test), NIC maps alike included, since every node's GPUs
// sit alike.
PlanSummary NodesOn(PlanSummary summary, int nodes, const PlanShape& shape);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_PLAN_SUMMARY_H_
