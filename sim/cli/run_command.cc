// `shardsim run`: every strategy x GPU count of a job simulated, one row
// each (sim/simulate/simulate.h), with --breakdown the critical path by
// cause.
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/cli/scenario_command.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"

namespace shardsim {
namespace {

absl::Status RunBody(const Job& job, SweepRanks* ranks) {
  absl::StatusOr<EngineOptions> options = EngineOptionsFromFlags(ranks);
  if (!options.ok()) return options.status();
  absl::StatusOr<Results> results = SimulateJob(job, *options);
  if (!results.ok()) return results.status();
  // Only rank 0 has the rows, and only it prints.
  if (ranks != nullptr && !ranks->is_root()) return absl::OkStatus();
  std::string table = FormatRunTable(*results);
  if (absl::GetFlag(FLAGS_breakdown)) {
    table += "\n" + FormatBreakdownTable(*results);
  }
  *results->mutable_warnings() = {job.warnings.begin(), job.warnings.end()};
  return Emit(table, *results, OutputFilesFromFlags());
}

}  // namespace

int RunMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, RunBody);
}

}  // namespace shardsim
