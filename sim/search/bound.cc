#include "sim/search/bound.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/time/clock.h"
#include "sim/base/bandwidth.h"
#include "sim/base/group.h"
#include "sim/compute/kernel_time.h"
#include "sim/schedule/host_cost.h"
#include "sim/schedule/issue_order.h"
#include "sim/schedule/lower.h"

namespace shardsim {
namespace {

// SimGrid's max-min solver shares links to maxmin/precision (1e-5 of a
// rate by default, SimGrid 3.32's documented configuration), so a flow may
// finish that much sooner than its bytes over its link allow; the engine's
// flows also carry whole bytes. A collective's least time keeps ten times
// the solver's precision in hand.
constexpr double kSolverSlack = 1e-4;

// The fastest a byte can leave a GPU inside its node and between nodes, in
// bytes/s of payload: the links' rates (sim/base/bandwidth.h), direct
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

// The least a step lasts beside a stream of collectives that run `comm`
// seconds at full speed and progress at `scale` of that while compute
// runs. `compute` is the compute stream's ops, (work, slowdown while a
// collective runs), least slowdown first. With `o` seconds of overlap the
// compute runs `work + slowed(o)`, where slowed(o) is `o` less the most
// work that fits in it (least-slowed first), and the collectives run
// max(0, comm - scale o) seconds on their own; both add up, as the
// compute stream never runs two ops at once. The least over `o`: that
// sum is convex and piecewise linear, so the least is at a knee.
double LeastBeside(const std::vector<std::pair<double, double>>& compute,
                   double comm, double scale) {
  double work = 0;
  for (const auto& [w, slowdown] : compute) work += w;
  auto step = [&](double o, double slowed) {
    return work + slowed + std::max(0.0, comm - scale * o);
  };
  double least = step(0, 0);
  const double knee = comm / scale;  // the collectives wholly overlapped
  double o = 0;
  double done = 0;
  for (const auto& [w, slowdown] : compute) {
    const double next = o + w * (1 + slowdown);
    if (knee > o && knee < next) {
      least = std::min(least,
                       step(knee, knee - done - (knee - o) / (1 + slowdown)));
    }
    o = next;
    done += w;
    least = std::min(least, step(o, o - done));
  }
  return least;
}

}  // namespace

StepBounder::StepBounder(const Mesh& mesh, const Platform& platform)
    : StepBounder(std::make_unique<PreparedCalls>(
                      mesh, platform, FlowMode::kFast, platform.channels(),
                      /*volumes=*/true),
                  nullptr) {}

StepBounder::StepBounder(PreparedCalls* calls) : StepBounder(nullptr, calls) {}

StepBounder::StepBounder(std::unique_ptr<PreparedCalls> own,
                         PreparedCalls* calls)
    : own_(std::move(own)), calls_(own_ != nullptr ? own_.get() : calls) {
  const Mesh& mesh = calls_->mesh();
  gpus_per_nic_ =
      GpusPerNic(calls_->platform(), mesh.gpus_per_node, mesh.nodes);
}

StepBounder::LeastTime StepBounder::LeastCallTime(
    const CollectiveCall& call, const PreparedCall& prepared) const {
  const Speeds speed = FastestSpeeds(calls_->platform());
  // Every member sends through its own port: the busiest one sends at
  // least the mean. Every group of the call's shape runs it at once
  // (collective_engine.h), each member's NIC shared by gpus_per_nic_ of
  // them: the busiest NIC sends at least the mean over the NICs in use.
  const PlanVolume& v = prepared.volume;
  const double members = GroupSize(call.group());
  const double nvlink = v.intra_node / members / speed.intra;
  const double volume =
      std::max(nvlink, v.inter_node / members * gpus_per_nic_ / speed.inter);
  // The engine runs the call with the protocol of least estimate, and
  // never faster than that estimate (estimate.h): the same prepared call's
  // (its step loads count every group's GPUs on a NIC, as they run).
  return {std::max(volume, prepared.estimate) * (1 - kSolverSlack),
          nvlink * (1 - kSolverSlack)};
}

absl::StatusOr<double> StepBounder::Bound(const Schedule& schedule) {
  return Bound(StepOps(schedule));
}

absl::StatusOr<double> StepBounder::Bound(const StepOps& ops) {
  const Platform& platform = calls_->platform();
  const Schedule& base = ops.base();
  // Each op's least time, walked with the replay's own constraints
  // (sim/schedule/issue_order.h): each holds in the simulation, so no
  // simulated op ends before its bound. With several programs (pipeline
  // stages) a send counts nothing: it only orders ops across programs.
  const int programs = std::max(1, base.programs_size());
  // Of each base op, once: a folded step's copies are its ops again.
  struct Least {
    LeastTime t;
    double slowdown = 0;  // a compute op's, with one collective's SMs held
  };
  std::vector<Least> of_base(base.ops_size());
  for (int b = 0; b < base.ops_size(); ++b) {
    const Op& op = base.ops(b);
    if (op.id() != b) {
      return absl::InvalidArgumentError("schedule: op ids are not 0..n-1");
    }
    if (op.program() < 0 || op.program() >= programs) {
      return absl::InvalidArgumentError("schedule: an op of no program");
    }
    if (op.has_compute()) {
      const OpCost c = ComputeOpCost(KernelsOf(base, op.compute()), platform);
      of_base[b].t.seconds = c.seconds;
      of_base[b].slowdown = ComputeSlowdown(
          c, platform.interference().collective_sms(), platform);
    } else if (op.has_collective()) {
      if (deadline_ != absl::InfiniteFuture() &&
          calls_->Find(op.collective()) == nullptr && absl::Now() > deadline_) {
        return absl::DeadlineExceededError("the bound's deadline passed");
      }
      absl::StatusOr<const PreparedCall*> prepared =
          GetForTimes(calls_, op.collective());
      if (!prepared.ok()) return prepared.status();
      of_base[b].t = LeastCallTime(op.collective(), **prepared);
    }
  }
  // For the slowdown below, per program: the compute stream's ops (work,
  // slowdown), and each stream's collectives' least time, op by op in
  // step order.
  std::vector<double> least(ops.size(), 0);
  std::vector<std::vector<std::pair<double, double>>> compute(programs);
  std::map<std::pair<int, int>, LeastTime> collective_time;
  for (int id = 0; id < ops.size(); ++id) {
    const Op& op = ops.op(id);
    const Least& l = of_base[op.id()];
    least[id] = l.t.seconds;
    if (op.has_compute() && op.stream() == COMPUTE) {
      compute[op.program()].emplace_back(l.t.seconds, l.slowdown);
    } else if (op.has_collective()) {
      LeastTime& sum = collective_time[{op.program(), op.stream()}];
      sum.seconds += l.t.seconds;
      sum.nvlink_s += l.t.nvlink_s;
    }
  }
  absl::StatusOr<Walk> walk =
      WalkSchedule(ops, HostCosts(ops, platform), least);
  if (!walk.ok()) return walk.status();
  double bound = 0;
  for (double end : walk->end) bound = std::max(bound, end);
  // Compute and collectives slow each other (replay.cc): a compute op runs
  // at 1 / (1 + s) of its speed or slower while a collective runs, s its
  // ComputeSlowdown with one collective's SMs held; NVLink runs at
  // nvlink_under_compute while compute runs. Each stream's collectives
  // against the compute stream, twice: their least times at full speed,
  // and their NVSwitch ports' bytes alone at the slower speed.
  for (auto& ops : compute) {
    std::sort(ops.begin(), ops.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
  }
  const double under = platform.interference().nvlink_under_compute();
  for (const auto& [stream, sum] : collective_time) {
    const auto& mine = compute[stream.first];
    bound = std::max(bound, LeastBeside(mine, sum.seconds, 1));
    if (under > 0) {
      bound = std::max(bound, LeastBeside(mine, sum.nvlink_s, under));
    }
  }
  // A step bound by its host alone is the same sum of launch costs as the
  // replay's, added in another order: a few ulps apart either way.
  return bound * (1 - 1e-12);
}

absl::StatusOr<double> StepLowerBound(const Schedule& schedule,
                                      const Mesh& mesh,
                                      const Platform& platform) {
  return StepBounder(mesh, platform).Bound(schedule);
}

}  // namespace shardsim
