#include "sim/engine/replay.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/util/field_mask_util.h"
#include "sim/engine/collapse.h"
#include "sim/engine/degraded.h"
#include "sim/engine/step_actors.h"
#include "sim/schedule/lower.h"
#include "sim/schedule/periodic.h"
#include "sim/schedule/programs.h"

namespace shardsim {
namespace {

// Prepares every call of `step` on the engine: each for its program when
// there are several (replay.h).
absl::Status PrepareCalls(const StepOps& step, const Programs& programs,
                          CollectiveEngine* collectives) {
  if (programs.several()) {
    std::vector<std::vector<int>> ranks;
    for (const ProgramInfo& p : programs.list) ranks.push_back(p.ranks);
    collectives->SetPrograms(std::move(ranks));
  }
  // Copies of a block make no call the base does not.
  for (const Op& op : step.base().ops()) {
    if (op.body_case() != Op::kCollective) continue;
    if (absl::Status s = collectives->Prepare(op.collective(), op.program());
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule op ", op.id(), " (", op.label(), ")",
          programs.several() ? absl::StrCat(" of program ", op.program()) : "",
          ": ", s.message()));
    }
  }
  // Node and network symmetry where the plans are symmetric across nodes
  // too (collective_engine.h); with several programs, node symmetry only,
  // where each program holds whole nodes.
  collectives->UseSymmetry();
  return absl::OkStatus();
}

// The repeats to collapse `step` by, or nullopt with the reason in `info`.
std::optional<Repeats> CollapseBy(const StepOps& step, const Fabric& fabric,
                                  const CollectiveEngine& collectives,
                                  bool collapse, StepReplay* info) {
  const int classes = static_cast<int>(fabric.classes().size());
  std::string why;
  std::optional<Repeats> r;
  if (!collapse) {
    info->set_full_because("collapsing was turned off");
  } else if (classes > 1) {
    info->set_full_because(absl::StrCat(
        classes,
        " classes of ranks that compute apart (platform degraded): "
        "replayed in full"));
  } else if (collectives.mode() != FlowMode::kFast) {
    info->set_full_because("per-step flows");
  } else if (r = FindRepeats(step, &why); !r) {
    info->set_full_because(why);
  } else if (r->hi - r->lo <= KeptBlocks(step, *r)) {
    info->set_full_because(absl::StrCat((r->hi - r->lo + 1) * r->stride,
                                        " repeating micro-batches: too few to "
                                        "collapse"));
    r.reset();
  }
  return r;
}

}  // namespace

absl::StatusOr<StepTiming> ReplayStep(const StepOps& step, Fabric* fabric,
                                      CollectiveEngine* collectives,
                                      bool collapse) {
  absl::StatusOr<Programs> programs = ReadPrograms(step.base(), fabric->mesh());
  if (!programs.ok()) return programs.status();
  const bool several = programs->several();
  if (several && DegradesGpus(fabric->platform())) {
    return absl::InvalidArgumentError(
        "platform field degraded: slow GPUs with several programs (a "
        "pipeline's stages) are not modelled; degrade links only");
  }
  if (absl::Status s = PrepareCalls(step, *programs, collectives); !s.ok()) {
    return s;
  }
  StepTiming out;
  const int micro_batches = step.micro_batches();
  out.replay.set_micro_batches(micro_batches);
  out.replay.set_micro_batches_simulated(micro_batches);
  std::optional<StepTimes> times;
  if (std::optional<Repeats> r =
          CollapseBy(step, *fabric, *collectives, collapse, &out.replay)) {
    absl::StatusOr<std::optional<StepTimes>> c =
        ReplayCollapsed(step, *r, fabric, collectives, &out.replay);
    if (!c.ok()) return c.status();
    times = *std::move(c);
  }
  if (!times) {
    // A full replay needs every op stored, and its programs read off them:
    // the base's list only the base's ops (the rest would never be issued).
    std::optional<OwnedSchedule> whole;
    if (step.fold()) {
      whole = Unfold(step);
      programs = ReadPrograms(**whole, fabric->mesh());
      if (!programs.ok()) return programs.status();
    }
    absl::StatusOr<std::vector<OpTime>> t = RunStepActors(
        whole ? **whole : step.base(), several ? &*programs : nullptr, fabric,
        collectives, {}, nullptr);
    if (!t.ok()) return t.status();
    times = StepTimes(*std::move(t));
  }
  if (const int last = times->LastToEnd(); last >= 0) {
    out.step_time_s = std::max(0.0, (*times)[last].end);
  }
  // The busiest program's compute stream.
  std::vector<double> busy(programs->list.size(), 0);
  for (int id = 0; id < step.size(); ++id) {
    const Op& op = step.op(id);
    if (op.stream() == COMPUTE) {
      const OpTime t = (*times)[id];
      busy[op.program()] += t.end - t.start;
    }
  }
  out.compute_busy_s = *std::max_element(busy.begin(), busy.end());
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
  return ReplayDigest(StepOps(schedule));
}

uint64_t ReplayDigest(const StepOps& ops) {
  const Schedule& schedule = ops.base();
  std::string why;
  const std::optional<Repeats> r = FindRepeats(ops, &why);
  // Every field but the strategy and the ops, then each op: a step's
  // 10^5 to 10^6 ops are read where they are, not copied (a copy, and
  // freeing it, was a fifth of a 3D plan's time), a memory op copied
  // without its payload.
  google::protobuf::FieldMask rest;
  const google::protobuf::Descriptor* d = Schedule::descriptor();
  for (int f = 0; f < d->field_count(); ++f) {
    const int number = d->field(f)->number();
    if (number != Schedule::kOpsFieldNumber &&
        number != Schedule::kStrategyFieldNumber) {
      rest.add_paths(d->field(f)->name());
    }
  }
  Schedule head;
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(
      schedule, rest, google::protobuf::util::FieldMaskUtil::MergeOptions(),
      &head);
  // A schedule has no map fields: its serialization is deterministic (as
  // periodic.cc and analyze.cc compare schedules).
  std::string bytes = head.SerializeAsString();
  // Each op after its length, as a repeated field has them: ops end
  // where they end whatever their fields.
  Op bare;
  for (const Op& op : schedule.ops()) {
    const Op* read = &op;
    if (op.has_memory()) {
      bare = op;
      bare.mutable_memory()->Clear();
      read = &bare;
    }
    absl::StrAppend(&bytes, "|", read->ByteSizeLong(), ":");
    read->AppendToString(&bytes);
  }
  // A folded step is its base's ops and how they repeat.
  if (const std::optional<Fold>& f = ops.fold()) {
    absl::StrAppend(&bytes, "|fold ", f->r.lo, " ", f->r.hi, " ", f->r.first_op,
                    " ", f->r.period_ops, " ", f->r.stride, " ", f->copies, " ",
                    f->tokens_per_step);
  }
  absl::StrAppend(&bytes, "|repeats ",
                  r ? absl::StrCat(r->lo, " ", r->hi, " ", r->first_op, " ",
                                   r->period_ops, " ", r->stride)
                    : why);
  return std::hash<std::string>()(bytes);
}

}  // namespace shardsim
