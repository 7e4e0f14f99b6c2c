#include "sim/estimate/estimate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/analyze/analyze.h"
#include "sim/base/bandwidth.h"
#include "sim/collective/estimate.h"
#include "sim/compute/kernel_time.h"
#include "sim/schedule/host_cost.h"
#include "sim/schedule/issue_order.h"
#include "sim/schedule/lower.h"

namespace shardsim {
namespace {

// An op's expected time alone, and what the engine's interference reads.
struct Alone {
  double seconds = 0;
  OpCost cost;             // compute
  double nvlink_s = 0;     // collective: its busiest port's bytes, full speed
  double nic_s = 0;        // collective: its busiest NIC's bytes, alone
  bool holds_sms = false;  // a collective or a send: its kernels hold SMs
};

// A send's time: its protocol's latency and wire bytes over the busiest
// NIC (or NVSwitch port) its rank pairs go through, each pair one flow
// (collective_engine.h RunSend); flows of GPUs sharing a NIC split it.
double SendSeconds(const PointToPoint& send, const std::vector<int>& from,
                   const std::vector<int>& to, const Mesh& mesh,
                   const Platform& p) {
  const int m = mesh.gpus_per_node;
  bool across = false;
  std::map<int, int> per_nic;  // flows through each NIC, either end
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
    if (from[i] / m == to[i] / m) continue;
    across = true;
    if (p.network().nics_per_node() > 0) {
      ++per_nic[NicOfRank(p, m, from[i]) * 2];
      ++per_nic[NicOfRank(p, m, to[i]) * 2 + 1];
    }
  }
  int share = 1;
  for (const auto& [nic, flows] : per_nic) share = std::max(share, flows);
  const double rate = across ? NicBandwidth(p) / share : NvlinkBandwidth(p);
  double seconds = 0;
  if (SendProtocol(p, send.bytes(), across, rate, &seconds) == nullptr) {
    return 0;  // ValidatePlatform requires a protocol
  }
  return seconds;
}

// Intervals of a program's ops of one kind, merged, with how many ran at
// once over each piece: the walk's occupancy, for the overlaps.
class Occupancy {
 public:
  // Empty again, its storage kept for the next walk's (a pipeline's
  // events are 10^6, tens of MB each walk).
  void Clear() {
    starts_.clear();
    ends_.clear();
    pieces_.clear();
    hint_ = 0;
  }
  void Add(double start, double end) {
    if (end > start) {
      starts_.push_back(start);
      ends_.push_back(end);
    }
  }
  // The pieces between each time an interval starts or ends and the next,
  // with as many intervals as hold there: starts and ends sorted apart
  // (as times alone: a third of the sort of (time, +-1) events) and
  // merged.
  void Seal() {
    std::sort(starts_.begin(), starts_.end());
    std::sort(ends_.begin(), ends_.end());
    const double inf = std::numeric_limits<double>::infinity();
    auto next = [&](size_t i, size_t j) {
      return std::min(i < starts_.size() ? starts_[i] : inf,
                      j < ends_.size() ? ends_[j] : inf);
    };
    int count = 0;
    size_t i = 0;
    size_t j = 0;
    while (i < starts_.size() || j < ends_.size()) {
      const double t = next(i, j);
      for (; j < ends_.size() && ends_[j] == t; ++j) --count;
      for (; i < starts_.size() && starts_[i] == t; ++i) ++count;
      const double after = next(i, j);
      if (count > 0 && after < inf) pieces_.push_back({t, after, count});
    }
  }
  // Calls f(seconds, count) for each piece of [start, end) with count > 0.
  template <typename F>
  void Over(double start, double end, F f) const {
    for (size_t i = FirstEndingAfter(start);
         i < pieces_.size() && pieces_[i].start < end; ++i) {
      const Piece& p = pieces_[i];
      const double s = std::min(end, p.end) - std::max(start, p.start);
      if (s > 0) f(s, p.count);
    }
  }

 private:
  struct Piece {
    double start, end;
    int count;
  };

  // The first piece that ends after t (pieces_.size() if none): a search
  // galloping from the last one's answer, since a program's ops are asked
  // about in issue order, about in time order (a binary search of every
  // piece was a quarter of a pipeline's estimate).
  size_t FirstEndingAfter(double t) const {
    const size_t n = pieces_.size();
    auto after = [&](size_t i) { return pieces_[i].end > t; };
    const size_t h = std::min(hint_, n);
    size_t lo = 0;
    size_t hi = n;  // the answer is in [lo, hi]
    if (h < n && !after(h)) {
      lo = h + 1;
      for (size_t step = 1;; step *= 2) {
        const size_t probe = lo + step - 1;
        if (probe >= n) break;
        if (after(probe)) {
          hi = probe;
          break;
        }
        lo = probe + 1;
      }
    } else {
      hi = h;
      for (size_t step = 1; hi >= step; step *= 2) {
        if (!after(hi - step)) {
          lo = hi - step + 1;
          break;
        }
        hi -= step;
      }
    }
    hint_ = std::partition_point(pieces_.begin() + lo, pieces_.begin() + hi,
                                 [&](const Piece& p) { return !(p.end > t); }) -
            pieces_.begin();
    return hint_;
  }

  std::vector<double> starts_, ends_;
  std::vector<Piece> pieces_;
  mutable size_t hint_ = 0;  // FirstEndingAfter's last answer
};

}  // namespace

absl::StatusOr<StepEstimate> EstimateStep(const Schedule& schedule,
                                          PreparedCalls* calls) {
  return EstimateStep(StepOps(schedule), calls);
}

absl::StatusOr<StepEstimate> EstimateStep(const StepOps& ops,
                                          PreparedCalls* calls) {
  const Platform& p = calls->platform();
  const Schedule& schedule = ops.base();
  const int n = ops.size();
  const int programs = std::max(1, schedule.programs_size());
  const double gpus_per_nic =
      GpusPerNic(p, calls->mesh().gpus_per_node, calls->mesh().nodes);
  // Each base op's time alone, once: a folded step's copies are its ops
  // again (step op id's is of_base[ops.op(id).id()]).
  std::vector<Alone> of_base(schedule.ops_size());
  // Ops share kernel lists (every layer's forward, each micro-batch's):
  // each list's cost worked out once.
  std::vector<std::optional<OpCost>> list_cost(schedule.kernel_lists_size());
  for (const Op& op : schedule.ops()) {
    const int id = op.id();
    if (id < 0 || id >= schedule.ops_size()) {
      return absl::InvalidArgumentError("schedule: op ids are not 0..n-1");
    }
    Alone& a = of_base[id];
    if (op.has_compute()) {
      const int list = op.compute().kernel_list();
      std::optional<OpCost>* cached =
          list >= 0 && list < static_cast<int>(list_cost.size())
              ? &list_cost[list]
              : nullptr;
      if (cached == nullptr || !cached->has_value()) {
        const OpCost cost = ComputeOpCost(KernelsOf(schedule, op.compute()), p);
        if (cached != nullptr) *cached = cost;
        a.cost = cost;
      } else {
        a.cost = **cached;
      }
      a.seconds = a.cost.seconds;
    } else if (op.has_collective()) {
      absl::StatusOr<const PreparedCall*> call =
          GetForTimes(calls, op.collective());
      if (!call.ok()) return call.status();
      const PreparedCall& c = **call;
      const double fraction =
          c.protocol != nullptr ? c.protocol->bandwidth_fraction() : 1;
      a.nvlink_s = static_cast<double>(c.volume.intra_node) /
                   GroupSize(op.collective().group()) * c.intra_inflation /
                   (NvlinkBandwidth(p) * fraction);
      // Every group of the call's shape runs it at once, each member's NIC
      // shared by the node's GPUs on it (as the bound counts it).
      a.nic_s = static_cast<double>(c.volume.inter_node) /
                GroupSize(op.collective().group()) * gpus_per_nic /
                (NicBandwidth(p) * fraction);
      a.seconds = std::max({c.estimate, a.nvlink_s, a.nic_s});
      a.holds_sms = true;
    } else if (op.has_send()) {
      const int peer = op.send().peer_program();
      if (op.program() >= schedule.programs_size() || peer < 0 ||
          peer >= schedule.programs_size()) {
        return absl::InvalidArgumentError(
            "schedule: a send between programs it does not have");
      }
      const auto& from = schedule.programs(op.program()).ranks();
      const auto& to = schedule.programs(peer).ranks();
      a.seconds = SendSeconds(op.send(), {from.begin(), from.end()},
                              {to.begin(), to.end()}, calls->mesh(), p);
      a.holds_sms = true;
    }
  }
  auto alone = [&](int id) -> const Alone& { return of_base[ops.op(id).id()]; };
  const std::vector<double> host_cost = HostCosts(ops, p);
  std::vector<double> seconds(n);
  for (int id = 0; id < n; ++id) seconds[id] = alone(id).seconds;
  absl::StatusOr<Walk> walk = WalkSchedule(ops, host_cost, seconds);
  if (!walk.ok()) return walk.status();
  const int sms = p.interference().collective_sms();
  const double under = p.interference().nvlink_under_compute();
  std::vector<Occupancy> comm(programs), compute(programs), nic(programs);
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    for (int g = 0; g < programs; ++g) {
      comm[g].Clear();
      compute[g].Clear();
      nic[g].Clear();
    }
    for (int id = 0; id < n; ++id) {
      const Op& op = ops.op(id);
      const int g = op.program();
      if (alone(id).holds_sms) comm[g].Add(walk->start[id], walk->end[id]);
      if (alone(id).nic_s > 0) nic[g].Add(walk->start[id], walk->end[id]);
      if (op.has_compute() && op.stream() == COMPUTE) {
        compute[g].Add(walk->start[id], walk->end[id]);
      }
    }
    for (int g = 0; g < programs; ++g) {
      comm[g].Seal();
      compute[g].Seal();
      nic[g].Seal();
    }
    double moved = 0;  // the most an op's time changed
    for (int id = 0; id < n; ++id) {
      const Op& op = ops.op(id);
      const int g = op.program();
      const Alone& a = alone(id);
      double t = a.seconds;
      const double start = walk->start[id];
      const double span = walk->end[id] - start;
      if (span <= 0) continue;
      // The share of its run each rate held in the last walk sets its time
      // in the next: work w done at rate 1 but for shares g_k at r_k takes
      // w / (1 - sum g_k (1 - r_k)).
      if (op.has_compute()) {
        // At 1 / (1 + s) of its speed while collectives hold SMs.
        double lost = 0;
        comm[g].Over(start, walk->end[id], [&](double o, int count) {
          const double s = ComputeSlowdown(a.cost, count * sms, p);
          lost += o / span * s / (1 + s);
        });
        t = a.seconds / (1 - lost);
      } else if (op.has_collective()) {
        if (under > 0 && under < 1) {
          // Its NVSwitch bytes at `under` of the ports' speed under compute.
          double o = 0;
          compute[g].Over(start, walk->end[id], [&](double s, int) { o += s; });
          t = std::max(t, a.nvlink_s / (1 - o / span * (1 - under)));
        }
        if (a.nic_s > 0) {
          // Its NIC bytes at 1 / k of the NICs while k of its program's
          // calls cross them (flows share a link evenly, max-min).
          double lost = 0;
          nic[g].Over(start, walk->end[id], [&](double o, int count) {
            lost += o / span * (1 - 1.0 / count);
          });
          t = std::max(t, a.nic_s / (1 - lost));
        }
      }
      moved = std::max(moved, std::abs(t - seconds[id]));
      seconds[id] = t;
    }
    walk = WalkSchedule(ops, host_cost, seconds);
    if (!walk.ok()) return walk.status();
    const double step =
        n > 0 ? *std::max_element(walk->end.begin(), walk->end.end()) : 0;
    if (moved <= kSettled * step) break;
  }
  StepEstimate e;
  int last = -1;
  for (int id = 0; id < n; ++id) {
    if (last < 0 || walk->end[id] >= walk->end[last]) last = id;
  }
  if (last < 0) return e;
  e.step_time_s = walk->end[last];
  std::vector<double> busy(programs, 0);
  for (int id = 0; id < n; ++id) {
    const Op& op = ops.op(id);
    if (op.has_compute() && op.stream() == COMPUTE) {
      busy[op.program()] += walk->end[id] - walk->start[id];
    }
  }
  e.compute_s = *std::max_element(busy.begin(), busy.end());
  // Back through what held each op: an op held by its host goes back to
  // the op its program issued before it.
  std::vector<int> issued_before(n, -1);
  std::vector<int> previous(programs, -1);
  for (int id = 0; id < n; ++id) {
    const int g = ops.op(id).program();
    issued_before[id] = previous[g];
    previous[g] = id;
  }
  // Of each collective or send on it, the part its program's compute
  // does not cover.
  std::vector<Occupancy> covered(programs);
  for (int id = 0; id < n; ++id) {
    const Op& op = ops.op(id);
    if (op.has_compute() && op.stream() == COMPUTE) {
      covered[op.program()].Add(walk->start[id], walk->end[id]);
    }
  }
  for (Occupancy& o : covered) o.Seal();
  for (int id = last; id >= 0;) {
    const Op& op = ops.op(id);
    if (op.has_collective() || op.has_send()) {
      double overlapped = 0;
      covered[op.program()].Over(walk->start[id], walk->end[id],
                                 [&](double s, int) { overlapped += s; });
      e.exposed_comm_s += walk->end[id] - walk->start[id] - overlapped;
    }
    id = walk->held_by[id] >= 0 ? walk->held_by[id] : issued_before[id];
  }
  return e;
}

std::string EstimateCaveat(const Platform& platform) {
  if (!platform.has_degraded() || platform.degraded().ByteSizeLong() == 0) {
    return "";
  }
  return absl::StrCat(
      "platform ", platform.name(),
      ": its degraded parts are left out of the estimate, which times every "
      "GPU, NVLink port and NIC at full speed (shardsim run simulates them)");
}

absl::StatusOr<Results> EstimateJob(const Job& job) {
  if (absl::Status s = ValidatePlatform(
          job.platform, absl::StrCat("platform ", job.platform.name()));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPoints(job); !s.ok()) return s;
  Results results;
  results.set_scenario(job.path);
  if (std::string caveat = EstimateCaveat(job.platform); !caveat.empty()) {
    results.add_warnings(std::move(caveat));
  }
  // One set of calls per GPU count: every strategy's calls on that mesh.
  std::map<int, std::unique_ptr<PreparedCalls>> calls;
  for (const std::string& spec : job.scenario.strategies()) {
    for (int gpus : job.scenario.gpus()) {
      // Folded where that holds: the same estimate, on 10^4 ops stored
      // where a long pipeline's whole step has 10^5 to 10^6.
      absl::StatusOr<Point> point =
          AnalyzePoint(job, spec, gpus, Storage::kFolded);
      if (!point.ok()) return point.status();
      ResultRow& row = point->row;
      if (!row.oom()) {
        std::unique_ptr<PreparedCalls>& mine = calls[gpus];
        if (mine == nullptr) {
          mine = std::make_unique<PreparedCalls>(
              point->mesh, job.platform, FlowMode::kFast,
              job.platform.channels(), /*volumes=*/true);
        }
        absl::StatusOr<StepEstimate> e = EstimateStep(point->ops(), mine.get());
        if (!e.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(PointName(job, spec, gpus), e.status().message()));
        }
        SetStepTime(job, *point, e->step_time_s, &row);
        row.set_compute_s(e->compute_s);
        row.set_exposed_comm_s(e->exposed_comm_s);
        row.set_estimate(true);
      }
      *results.add_rows() = std::move(row);
    }
  }
  return results;
}

}  // namespace shardsim
