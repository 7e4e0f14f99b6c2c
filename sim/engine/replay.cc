#include "sim/engine/replay.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/engine/collapse.h"
#include "sim/engine/step_actors.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/periodic.h"

namespace shardsim {

absl::StatusOr<StepTiming> ReplayStep(const StepOps& step, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse) {
  // Copies of a block make no call the base does not.
  for (const Op& op : step.base().ops()) {
    if (op.body_case() != Op::kCollective) continue;
    if (absl::Status s = collectives->Prepare(op.collective()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule op ", op.id(), " (", op.label(), "): ", s.message()));
    }
  }
  // Every GPU runs this same program; node and network symmetry hold when
  // the plans are symmetric across nodes too (collective_engine.h).
  collectives->UseSymmetry();
  StepTiming out;
  const int micro_batches = step.micro_batches();
  out.replay.set_micro_batches(micro_batches);
  out.replay.set_micro_batches_simulated(micro_batches);
  std::optional<StepTimes> times;
  std::string why;
  std::optional<Repeats> r;
  if (!collapse) {
    out.replay.set_full_because("collapsing was turned off");
  } else if (collectives->mode() != FlowMode::kFast) {
    out.replay.set_full_because("per-step flows");
  } else if (r = FindRepeats(step, &why); !r) {
    out.replay.set_full_because(why);
  } else if (r->hi - r->lo <= kKeptBlocks) {
    out.replay.set_full_because(absl::StrCat(
        r->hi - r->lo + 1, " repeating micro-batches: too few to collapse"));
  } else {
    absl::StatusOr<std::optional<StepTimes>> c =
        ReplayCollapsed(step, *r, fabric, collectives, &out.replay);
    if (!c.ok()) return c.status();
    times = *std::move(c);
  }
  if (!times) {
    // A full replay needs every op stored.
    std::optional<OwnedSchedule> whole;
    if (step.fold()) whole = Unfold(step);
    absl::StatusOr<std::vector<OpTime>> t = RunStepActors(
        whole ? **whole : step.base(), fabric, collectives, {}, nullptr);
    if (!t.ok()) return t.status();
    times = StepTimes(*std::move(t));
  }
  if (const int last = times->LastToEnd(); last >= 0) {
    out.step_time_s = std::max(0.0, (*times)[last].end);
  }
  for (int id = 0; id < step.size(); ++id) {
    if (step.op(id).stream() == COMPUTE) {
      const OpTime t = (*times)[id];
      out.compute_busy_s += t.end - t.start;
    }
  }
  out.ops = *std::move(times);
  out.breakdown = CriticalPathBreakdown(step, &out.ops);
  return out;
}

absl::StatusOr<StepTiming> ReplayStep(const Schedule& schedule, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse) {
  return ReplayStep(StepOps(schedule), fabric, collectives, collapse);
}

uint64_t ReplayDigest(const Schedule& schedule) {
  std::string why;
  const std::optional<Repeats> r = FindRepeats(schedule, &why);
  Schedule read = schedule;
  read.clear_strategy();
  for (Op& op : *read.mutable_ops()) {
    if (op.has_memory()) op.mutable_memory()->Clear();
  }
  // A schedule has no map fields: its serialization is deterministic (as
  // periodic.cc and analyze.cc compare schedules).
  std::string bytes = read.SerializeAsString();
  absl::StrAppend(
      &bytes, "|repeats ",
      r ? absl::StrCat(r->lo, " ", r->hi, " ", r->first_op, " ", r->period_ops)
        : why);
  return std::hash<std::string>()(bytes);
}

}  // namespace shardsim
