#include "sim/traffic/traffic.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "sim/collective/plan.h"
#include "sim/collective/plan_cache.h"

namespace shardsim {
namespace {

// Calls that move the same bytes the same way, in the same phase and for
// the same tensor, in the same program, share one row.
using CallKey = std::tuple<int, int, int, int, int, int, int, std::string,
                           int64_t, int, int>;

CallKey RowKeyOf(const Op& op) {
  const CollectiveCall& c = op.collective();
  const Group& g = c.group();
  return {op.phase(),     c.op(),           g.intra_size(), g.intra_stride(),
          g.inter_size(), g.inter_stride(), c.algorithm(),  c.tensor(),
          c.bytes(),      c.root(),         op.program()};
}

// Sends of the same bytes and tensor, in the same phase, from one program
// to another, share one row.
using SendKey = std::tuple<int, std::string, int64_t, int, int>;

SendKey SendKeyOf(const Op& op) {
  const PointToPoint& p = op.send();
  return {op.phase(), p.tensor(), p.bytes(), op.program(), p.peer_program()};
}

// The ranks of program `p` (schedule.proto: none listed, every rank).
int ProgramRanks(const Schedule& s, const Mesh& mesh, int p) {
  return s.programs_size() == 0 ? mesh.gpus() : s.programs(p).ranks_size();
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
  std::map<SendKey, Calls> sends;
  const Schedule& base = ops.base();
  for (int b = 0; b < base.ops_size(); ++b) {
    const Op& op = base.ops(b);
    if (op.has_send()) {
      auto [it, fresh] =
          sends.try_emplace(SendKeyOf(op), Calls{ops.FirstId(b), 0});
      it->second.n += ops.Multiplicity(b);
      continue;
    }
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
    // Every GPU of the call's program is in one group of this shape, and
    // all groups are alike.
    const int64_t groups =
        ProgramRanks(base, mesh, op->program()) / GroupSize(c.group());
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
  // Sends: rank i of the program to rank i of its peer, each pair inside a
  // node or across nodes.
  for (const auto& [key, value] : sends) {
    const Op& op = ops.op(value.first);
    const PointToPoint& p = op.send();
    if (base.programs_size() <= std::max(op.program(), p.peer_program())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule op ", value.first, " (", op.label(),
          "): a send between programs the schedule does not list"));
    }
    const Program& from = base.programs(op.program());
    const Program& to = base.programs(p.peer_program());
    int64_t intra = 0;
    int64_t inter = 0;
    for (int i = 0; i < from.ranks_size() && i < to.ranks_size(); ++i) {
      const bool same_node = from.ranks(i) / mesh.gpus_per_node ==
                             to.ranks(i) / mesh.gpus_per_node;
      (same_node ? intra : inter) += p.bytes() * value.n;
    }
    TrafficEntry e;
    e.set_phase(op.phase());
    // op OP_UNSPECIFIED: a send (results.proto TrafficEntry).
    e.set_tensor(p.tensor());
    e.set_calls(value.n);
    e.set_bytes_per_call(p.bytes());
    e.set_intra_node_bytes(intra);
    e.set_inter_node_bytes(inter);
    entries.push_back(std::move(e));
  }
  return entries;
}

absl::StatusOr<std::vector<TrafficEntry>> CountTraffic(
    const Schedule& schedule, const Mesh& mesh, const Platform& platform) {
  return CountTraffic(StepOps(schedule), mesh, platform);
}

}  // namespace shardsim
