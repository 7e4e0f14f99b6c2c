#include "sim/traffic/traffic.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "sim/collective/plan.h"

namespace shardsim {
namespace {

// Calls that move the same bytes the same way share one entry.
using CallKey =
    std::tuple<int, int, int, int, int, int, int, std::string, int64_t, int>;

CallKey KeyOf(const Op& op) {
  const CollectiveCall& c = op.collective();
  const Group& g = c.group();
  return {op.phase(),     c.op(),           g.intra_size(), g.intra_stride(),
          g.inter_size(), g.inter_stride(), c.algorithm(),  c.tensor(),
          c.bytes(),      c.root()};
}

}  // namespace

absl::StatusOr<std::vector<TrafficEntry>> CountTraffic(const Schedule& schedule,
                                                       const Mesh& mesh) {
  std::map<CallKey, std::pair<const Op*, int64_t>> calls;
  for (const Op& op : schedule.ops()) {
    if (op.body_case() != Op::kCollective) continue;
    auto [it, fresh] = calls.try_emplace(KeyOf(op), &op, 0);
    ++it->second.second;
  }
  // A plan depends on neither phase nor tensor: count each once. Elements
  // are bytes here; the wire does not care about the dtype.
  std::map<std::tuple<int, int, int, int, int64_t, int>, PlanVolume> volumes;
  std::vector<TrafficEntry> entries;
  for (const auto& [key, value] : calls) {
    const auto& [op, n] = value;
    const CollectiveCall& c = op->collective();
    if (absl::Status s = ValidateGroup(c.group(), mesh); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule op ", op->id(), " (", op->label(), "): group ",
                       GroupName(c.group()), ": ", s.message()));
    }
    PlanRequest req;
    req.op = c.op();
    req.algorithm = c.algorithm();
    req.shape = {c.group().intra_size(), c.group().inter_size()};
    req.count = c.bytes();
    req.root = c.root();
    const auto vkey = std::make_tuple(req.op, req.algorithm, req.shape.per_node,
                                      req.shape.nodes, req.count, req.root);
    auto found = volumes.find(vkey);
    if (found == volumes.end()) {
      absl::StatusOr<Plan> plan = MakePlan(req);
      if (!plan.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule op ", op->id(), " (", op->label(),
                         "): ", plan.status().message()));
      }
      found = volumes.emplace(vkey, CountVolume(*plan)).first;
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
    e.set_intra_node_bytes(found->second.intra_node * n * groups);
    e.set_inter_node_bytes(found->second.inter_node * n * groups);
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace shardsim
