#include "sim/engine/replay.h"

#include <algorithm>

#include <simgrid/s4u.hpp>

#include "absl/strings/str_cat.h"

namespace sg4 = simgrid::s4u;

namespace shardsim {

double ComputeSeconds(const ComputeOp& op, const Platform& platform) {
  const Efficiency& eff = platform.efficiency();
  const auto it = eff.compute().find(op.kind());
  const double share = it != eff.compute().end() ? it->second
                                                 : eff.compute_default();
  const double flops_s = op.flops() / (platform.gpu().peak_flops() * share);
  const double hbm_s = op.memory_bytes() /
                       (platform.gpu().hbm_bytes_per_s() * eff.hbm_fraction());
  return std::max(flops_s, hbm_s);
}

namespace {

class Replayer {
 public:
  Replayer(const Schedule& s, const Fabric& f, CollectiveEngine* c)
      : schedule_(s), fabric_(f), collectives_(c),
        waiting_(s.ops_size(), 0), next_(s.ops_size()),
        timing_{0, 0, std::vector<OpTime>(s.ops_size())} {
    std::vector<int> last_on_stream(Stream_ARRAYSIZE, -1);
    for (const Op& op : s.ops()) {
      std::vector<int> deps(op.deps().begin(), op.deps().end());
      if (last_on_stream[op.stream()] >= 0) {
        deps.push_back(last_on_stream[op.stream()]);
      }
      last_on_stream[op.stream()] = op.id();
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      waiting_[op.id()] = static_cast<int>(deps.size());
      for (int d : deps) next_[d].push_back(op.id());
    }
  }

  void Start() {
    for (const Op& op : schedule_.ops()) {
      if (waiting_[op.id()] == 0) Launch(op.id());
    }
  }

  int completed() const { return completed_; }

  StepTiming Finish() {
    for (const OpTime& t : timing_.ops) {
      timing_.step_time_s = std::max(timing_.step_time_s, t.end);
    }
    for (const Op& op : schedule_.ops()) {
      if (op.stream() == COMPUTE) {
        timing_.compute_busy_s += timing_.ops[op.id()].end -
                                  timing_.ops[op.id()].start;
      }
    }
    return std::move(timing_);
  }

 private:
  void Launch(int id) {
    sg4::Actor::create(absl::StrCat("op", id), fabric_.gpu(0),
                       [this, id] { Execute(id); });
  }

  void Execute(int id) {
    const Op& op = schedule_.ops(id);
    timing_.ops[id].start = sg4::Engine::get_clock();
    switch (op.body_case()) {
      case Op::kCompute:
        sg4::this_actor::sleep_for(
            ComputeSeconds(op.compute(), fabric_.platform()));
        break;
      case Op::kCollective:
        collectives_->Run(op.collective());
        break;
      default:  // memory bookkeeping takes no time
        break;
    }
    timing_.ops[id].end = sg4::Engine::get_clock();
    ++completed_;
    for (int n : next_[id]) {
      if (--waiting_[n] == 0) Launch(n);
    }
  }

  const Schedule& schedule_;
  const Fabric& fabric_;
  CollectiveEngine* collectives_;
  std::vector<int> waiting_;            // unfinished predecessors
  std::vector<std::vector<int>> next_;  // ops waiting on this one
  StepTiming timing_;
  int completed_ = 0;
};

}  // namespace

absl::StatusOr<StepTiming> ReplayStep(const Schedule& schedule,
                                      const Fabric& fabric,
                                      CollectiveEngine* collectives) {
  for (const Op& op : schedule.ops()) {
    if (op.body_case() != Op::kCollective) continue;
    if (absl::Status s = collectives->Prepare(op.collective()); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule op ", op.id(), " (", op.label(), "): ",
                       s.message()));
    }
  }
  // Every GPU runs this same program; node symmetry holds when every plan
  // is symmetric across nodes too (collective_engine.h).
  collectives->set_node_symmetry(collectives->AllIntraSymmetric());
  Replayer replayer(schedule, fabric, collectives);
  replayer.Start();
  sg4::Engine::get_instance()->run();
  if (replayer.completed() != schedule.ops_size()) {
    return absl::InternalError(absl::StrCat(
        "replay: ", schedule.ops_size() - replayer.completed(),
        " ops never ran (a dependency on a later op?)"));
  }
  return replayer.Finish();
}

}  // namespace shardsim
