#include "sim/engine/prepared_calls.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/collective/estimate.h"

namespace shardsim {

PreparedCalls::PreparedCalls(const Mesh& mesh, const Platform& platform,
                             FlowMode mode, int channels, bool volumes)
    : mesh_(mesh),
      platform_(platform),
      platform_bytes_(platform.SerializeAsString()),
      mode_(mode),
      channels_(channels),
      volumes_(volumes),
      tree_(platform_, mesh_.nodes),
      calls_(mesh_, platform_, [this](const CollectiveCall& call, Plan plan) {
        return Make(call, std::move(plan));
      }) {}

absl::StatusOr<const PreparedCall*> PreparedCalls::Get(
    const CollectiveCall& call) {
  return calls_.Get(call, call.bytes(), channels_);
}

const PreparedCall* PreparedCalls::Find(const CollectiveCall& call) const {
  return calls_.Find(call, call.bytes(), channels_);
}

bool PreparedCalls::Serve(const Mesh& mesh, const Platform& platform,
                          FlowMode mode, int channels) const {
  return mesh.gpus_per_node == mesh_.gpus_per_node &&
         mesh.nodes == mesh_.nodes && mode == mode_ && channels == channels_ &&
         platform.SerializeAsString() == platform_bytes_;
}

absl::StatusOr<PreparedCall> PreparedCalls::Make(const CollectiveCall& call,
                                                 Plan plan) {
  // A broadcast from a root k nodes of the group on is the one from the
  // root's local index with every member k nodes on (NodesOn): the same
  // groups, protocol and stages, renamed. So it is summarized once per
  // local root, where a broadcast of every owner's shard of a sharded
  // state would summarize a plan per owner (128 of them across 128 nodes).
  const int per_node = plan.shape.per_node;
  if (call.op() == BROADCAST && call.root() >= per_node &&
      mode_ == FlowMode::kFast) {
    CollectiveCall local = call;
    local.set_root(call.root() % per_node);
    absl::StatusOr<const PreparedCall*> from = Get(local);
    if (!from.ok()) return from.status();
    PreparedCall e = **from;
    e.summary =
        NodesOn(std::move(e.summary), call.root() / per_node, plan.shape);
    AddUplinkLoads(e.groups, platform_, mesh_.gpus_per_node, tree_, &e.summary);
    return e;
  }
  PreparedCall e;
  e.shape = plan.shape;
  e.groups = GroupsOf(call.group(), mesh_);
  e.summary = Summarize(plan, /*by_step=*/true,
                        CallNics(e.groups, platform_, mesh_.gpus_per_node));
  AddUplinkLoads(e.groups, platform_, mesh_.gpus_per_node, tree_, &e.summary);
  e.intra_inflation = IntraInflation(call.algorithm(), platform_);
  if (volumes_) e.volume = CountVolume(plan);
  if (mode_ == FlowMode::kPerStep) e.plan = std::move(plan);
  e.protocol =
      FastestProtocol(e.summary, platform_, e.intra_inflation, &e.estimate);
  // Only a platform that escaped validation gets here (no protocol, or
  // every estimate infinite or NaN); never hand the engine a null protocol.
  if (e.protocol == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform ", platform_.name(),
                     ": no wire protocol gives a "
                     "finite time for ",
                     CollectiveOp_Name(call.op()), " of ", call.bytes(),
                     " bytes (protocols, bandwidths and efficiencies)"));
  }
  return e;
}

absl::StatusOr<const PreparedCall*> GetForTimes(PreparedCalls* calls,
                                                const CollectiveCall& call) {
  if (call.op() == BROADCAST && call.root() >= call.group().intra_size()) {
    CollectiveCall local = call;
    local.set_root(call.root() % call.group().intra_size());
    return calls->Get(local);
  }
  return calls->Get(call);
}

}  // namespace shardsim
