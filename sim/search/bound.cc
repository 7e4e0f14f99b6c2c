#include "sim/search/bound.h"

#include <algorithm>
#include <map>
#include <vector>

#include "sim/collective/plan.h"
#include "sim/collective/plan_cache.h"
#include "sim/compute/kernel_time.h"
#include "sim/scenario/bandwidth.h"
#include "sim/schedule/lower.h"

namespace shardsim {
namespace {

// The fastest a byte can leave a GPU inside its node and between nodes, in
// bytes/s of payload: the links' rates (sim/scenario/bandwidth.h), direct
// patterns at nvlink_direct_fraction instead of nvlink_fraction (through
// their inflated bytes, collective_engine.h), and every wire protocol
// sending payload / bandwidth_fraction bytes.
struct Speeds {
  double intra = 0;
  double inter = 0;
};

Speeds FastestSpeeds(const Platform& p) {
  double protocol = 0;
  for (const Protocol& proto : p.protocols()) {
    protocol = std::max(protocol, proto.bandwidth_fraction());
  }
  const Efficiency& e = p.efficiency();
  const double direct =
      NvlinkBandwidth(p) * e.nvlink_direct_fraction() / e.nvlink_fraction();
  Speeds s;
  s.intra = std::max(NvlinkBandwidth(p), direct) * protocol;
  s.inter = NicBandwidth(p) * protocol;
  return s;
}

}  // namespace

absl::StatusOr<double> StepLowerBound(const Schedule& schedule,
                                      const Mesh& mesh,
                                      const Platform& platform) {
  const Speeds speed = FastestSpeeds(platform);
  PlanCache<double> least(mesh, platform,
                          [&](const CollectiveCall& call, Plan plan) {
                            // Every member sends through its own port and (at
                            // most) its own NIC: the busiest one sends at least
                            // the mean.
                            const PlanVolume v = CountVolume(plan);
                            const double members = GroupSize(call.group());
                            return absl::StatusOr<double>(
                                std::max(v.intra_node / members / speed.intra,
                                         v.inter_node / members / speed.inter));
                          });
  // The longest path through the ops, each at its least time: an op
  // starts after its dependencies and after the op before it on its
  // stream (the replay's rules, sim/engine/replay.h), so no simulated op
  // ends before its path does.
  std::vector<double> end(schedule.ops_size(), 0);
  std::map<int, double> stream_free;  // stream -> end of its last op
  double bound = 0;
  for (const Op& op : schedule.ops()) {
    if (op.id() < 0 || op.id() >= schedule.ops_size()) {
      return absl::InvalidArgumentError("schedule: op ids are not 0..n-1");
    }
    double start = stream_free[op.stream()];
    for (int d : op.deps()) {
      if (d < 0 || d >= op.id()) {
        return absl::InvalidArgumentError(
            "schedule: a dependency does not come before its op");
      }
      start = std::max(start, end[d]);
    }
    double t = 0;
    if (op.has_compute()) {
      t = ComputeOpCost(KernelsOf(schedule, op.compute()), platform).seconds;
    } else if (op.has_collective()) {
      const CollectiveCall& c = op.collective();
      // One element per byte, as the engine plans it.
      absl::StatusOr<const double*> s =
          least.Get(c, c.bytes(), platform.channels());
      if (!s.ok()) return s.status();
      t = **s;
    }
    end[op.id()] = start + t;
    stream_free[op.stream()] = end[op.id()];
    bound = std::max(bound, end[op.id()]);
  }
  return bound;
}

}  // namespace shardsim
