// `shardsim schedule`: one point's step as the schedule IR, op by op.
#include <cstdio>

#include "sim/analyze/analyze.h"
#include "sim/cli/commands.h"
#include "sim/cli/scenario_command.h"
#include "sim/schedule/lower.h"

namespace shardsim {
namespace {

absl::Status ScheduleBody(const Job& job, SweepRanks* /*ranks: never spread*/) {
  const Scenario& s = job.scenario;
  if (s.strategies_size() != 1 || s.gpus_size() != 1) {
    return absl::InvalidArgumentError(
        "schedule prints one point: give one --strategy and one --gpus");
  }
  absl::StatusOr<Point> point = AnalyzePoint(job, s.strategies(0), s.gpus(0));
  if (!point.ok()) return point.status();
  std::fputs(FormatSchedule(*point->schedule).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace

int ScheduleMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, ScheduleBody);
}

}  // namespace shardsim
