// Calls prepared for the engine: each call's plan summarized as the fast
// engine runs it, with its groups and wire protocol, made once per PlanKey
// on one mesh and platform. Making one needs no SimGrid, so a caller that
// runs many simulations of one mesh (`shardsim plan`) prepares every call
// once, before it forks them, and each simulation's engine takes the calls
// it needs from there (CollectiveEngine); the plan's lower bound reads the
// same summaries (sim/search/bound.h).
#ifndef SHARDSIM_SIM_ENGINE_PREPARED_CALLS_H_
#define SHARDSIM_SIM_ENGINE_PREPARED_CALLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/collective/plan.h"
#include "sim/collective/plan_cache.h"
#include "sim/collective/plan_summary.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

enum class FlowMode { kFast, kPerStep };

struct PreparedCall {
  Plan plan;  // kept in per-step mode only
  PlanSummary summary;
  const Protocol* protocol = nullptr;    // the platform's, least estimate
  double estimate = 0;                   // that protocol's (estimate.h)
  std::vector<std::vector<int>> groups;  // global ranks, member order
  PlanShape shape;
  double intra_inflation = 1;  // IntraInflation (estimate.h)
  PlanVolume volume;           // counted where asked for (PreparedCalls)
};

// PreparedCall per PlanKey. Safe to share between threads (PlanCache).
class PreparedCalls {
 public:
  // `channels`: parallel rings for every call. `volumes`: count each plan's
  // volume too (the bound reads it; the engine does not).
  PreparedCalls(const Mesh& mesh, const Platform& platform, FlowMode mode,
                int channels, bool volumes = false);
  PreparedCalls(const PreparedCalls&) = delete;
  PreparedCalls& operator=(const PreparedCalls&) = delete;

  // `call`'s entry, made on its key's first request. Errors name the call's
  // group or algorithm and why it cannot run here.
  absl::StatusOr<const PreparedCall*> Get(const CollectiveCall& call);
  // Made before, or null.
  const PreparedCall* Find(const CollectiveCall& call) const;

  // Whether these are the calls an engine of this mesh, platform, mode and
  // channel count would make.
  bool Serve(const Mesh& mesh, const Platform& platform, FlowMode mode,
             int channels) const;

  const Mesh& mesh() const { return mesh_; }
  const Platform& platform() const { return platform_; }

 private:
  absl::StatusOr<PreparedCall> Make(const CollectiveCall& call, Plan plan);

  const Mesh mesh_;
  const Platform platform_;
  const std::string platform_bytes_;  // for Serve
  const FlowMode mode_;
  const int channels_;
  const bool volumes_;
  const FatTreeLayout tree_;  // where the NICs sit (AddUplinkLoads)
  // One element per byte: the wire sees bytes, whatever the dtype.
  PlanCache<PreparedCall> calls_;
};

// `call`'s entry for reading its times (summary, estimate, volume), which
// do not depend on members' names: a broadcast from a root a node or more
// on takes the entry of the root at its local index, whose plan is the
// same with every member renamed (tests/plan_summary_test.cc), so Lins'
// broadcast from every member of a 1024-GPU group needs 8 plans, not 1024.
absl::StatusOr<const PreparedCall*> GetForTimes(PreparedCalls* calls,
                                                const CollectiveCall& call);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_PREPARED_CALLS_H_
