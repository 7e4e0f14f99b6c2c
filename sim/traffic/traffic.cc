#include "sim/traffic/traffic.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "sim/collective/plan.h"
#include "sim/collective/plan_cache.h"

namespace shardsim {
namespace {

// Calls that move the same bytes the same way, in the same phase and for
// the same tensor, share one row.
using CallKey =
    std::tuple<int, int, int, int, int, int, int, std::string, int64_t, int>;

CallKey RowKeyOf(const Op& op) {
  const CollectiveCall& c = op.collective();
  const Group& g = c.group();
  return {op.phase(),     c.op(),           g.intra_size(), g.intra_stride(),
          g.inter_size(), g.inter_stride(), c.algorithm(),  c.tensor(),
          c.bytes(),      c.root()};
}

}  // namespace

absl::StatusOr<std::vector<TrafficEntry>> CountTraffic(
    const StepOps& ops, const Mesh& mesh, const Platform& platform) {
  struct Calls {
    int first;  // the first call's op id
    int64_t n;
  };
  // A folded step's repeated block counts once per copy; its first calls
  // come first in the base as in the step.
  std::map<CallKey, Calls> calls;
  const Schedule& base = ops.base();
  for (int b = 0; b < base.ops_size(); ++b) {
    const Op& op = base.ops(b);
    if (op.body_case() != Op::kCollective) continue;
    auto [it, fresh] =
        calls.try_emplace(RowKeyOf(op), Calls{ops.FirstId(b), 0});
    it->second.n += ops.Multiplicity(b);
  }
  // A plan depends on neither phase nor tensor: count each once. Elements
  // are bytes here; the wire does not care about the dtype.
  PlanCache<PlanVolume> volumes(
      mesh, platform, [](const CollectiveCall&, Plan plan) {
        return absl::StatusOr<PlanVolume>(CountVolume(plan));
      });
  std::vector<TrafficEntry> entries;
  for (const auto& [key, value] : calls) {
    const Op* op = &ops.op(value.first);
    const int64_t n = value.n;
    const CollectiveCall& c = op->collective();
    absl::StatusOr<const PlanVolume*> volume = volumes.Get(c, c.bytes(), 1);
    if (!volume.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule op ", value.first, " (", op->label(),
                       "): ", volume.status().message()));
    }
    // Every GPU is in one group of this shape, and all groups are alike.
    const int64_t groups = mesh.gpus() / GroupSize(c.group());
    TrafficEntry e;
    e.set_phase(op->phase());
    e.set_op(c.op());
    *e.mutable_group() = c.group();
    e.set_algorithm(c.algorithm());
    e.set_tensor(c.tensor());
    e.set_calls(n);
    e.set_bytes_per_call(c.bytes());
    e.set_intra_node_bytes((*volume)->intra_node * n * groups);
    e.set_inter_node_bytes((*volume)->inter_node * n * groups);
    entries.push_back(std::move(e));
  }
  return entries;
}

absl::StatusOr<std::vector<TrafficEntry>> CountTraffic(
    const Schedule& schedule, const Mesh& mesh, const Platform& platform) {
  return CountTraffic(StepOps(schedule), mesh, platform);
}

}  // namespace shardsim
