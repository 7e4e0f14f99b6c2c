#include "sim/engine/replay.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/engine/collapse.h"
#include "sim/engine/degraded.h"
#include "sim/engine/step_actors.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/periodic.h"
#include "sim/schedule/programs.h"

namespace shardsim {
namespace {

// A step of several programs (replay.h): every call prepared for its
// program, and the step replayed in full.
absl::StatusOr<StepTiming> ReplayPrograms(const StepOps& step,
                                          const Programs& programs,
                                          Fabric* fabric,
                                          CollectiveEngine* collectives) {
  if (step.fold()) {
    return absl::InvalidArgumentError(
        "a folded step of several programs: the engine replays those whole");
  }
  const Schedule& s = step.base();
  std::vector<std::vector<int>> ranks;
  for (const ProgramInfo& p : programs.list) ranks.push_back(p.ranks);
  collectives->SetPrograms(std::move(ranks));
  for (const Op& op : s.ops()) {
    if (op.body_case() != Op::kCollective) continue;
    if (absl::Status st = collectives->Prepare(op.collective(), op.program());
        !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule op ", op.id(), " (", op.label(),
                       ") of program ", op.program(), ": ", st.message()));
    }
  }
  collectives->UseSymmetry();  // none: every flow runs
  StepTiming out;
  const int micro_batches = step.micro_batches();
  out.replay.set_micro_batches(micro_batches);
  out.replay.set_micro_batches_simulated(micro_batches);
  out.replay.set_full_because(
      "several programs (one per rank role): replayed in full");
  absl::StatusOr<std::vector<OpTime>> t =
      RunStepActors(s, &programs, fabric, collectives, {}, nullptr);
  if (!t.ok()) return t.status();
  out.ops = StepTimes(*std::move(t));
  if (const int last = out.ops.LastToEnd(); last >= 0) {
    out.step_time_s = std::max(0.0, out.ops[last].end);
  }
  for (const ProgramInfo& p : programs.list) {
    double busy = 0;
    for (int id : p.ops) {
      if (s.ops(id).stream() != COMPUTE) continue;
      const OpTime o = out.ops[id];
      busy += o.end - o.start;
    }
    out.compute_busy_s = std::max(out.compute_busy_s, busy);
  }
  out.breakdown = CriticalPathBreakdown(step, &out.ops);
  return out;
}

}  // namespace

absl::StatusOr<StepTiming> ReplayStep(const StepOps& step, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse) {
  absl::StatusOr<Programs> programs = ReadPrograms(step.base(), fabric->mesh());
  if (!programs.ok()) return programs.status();
  if (programs->several()) {
    if (DegradesGpus(fabric->platform())) {
      return absl::InvalidArgumentError(
          "platform field degraded: slow GPUs with several programs (a "
          "pipeline's stages) are not modelled; degrade links only");
    }
    return ReplayPrograms(step, *programs, fabric, collectives);
  }
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
  const int classes = static_cast<int>(fabric->classes().size());
  if (!collapse) {
    out.replay.set_full_because("collapsing was turned off");
  } else if (classes > 1) {
    out.replay.set_full_because(absl::StrCat(
        classes,
        " classes of ranks that compute apart (platform degraded): "
        "replayed in full"));
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
    absl::StatusOr<std::vector<OpTime>> t =
        RunStepActors(whole ? **whole : step.base(), nullptr, fabric,
                      collectives, {}, nullptr);
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
