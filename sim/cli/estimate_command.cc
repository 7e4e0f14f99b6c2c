// `shardsim estimate`: run's rows with each step's times estimated from the
// models, without the engine (sim/estimate/estimate.h): a screen over many
// points, each marked as an estimate.
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/cli/scenario_command.h"
#include "sim/estimate/estimate.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"

namespace shardsim {
namespace {

absl::Status EstimateBody(const Job& job, SweepRanks* /*ranks: never spread*/) {
  absl::StatusOr<Results> results = EstimateJob(job);
  if (!results.ok()) return results.status();
  AddJobWarnings(job, results->mutable_warnings());
  return Emit(FormatRunTable(*results), *results, OutputFilesFromFlags());
}

}  // namespace

int EstimateMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, EstimateBody);
}

}  // namespace shardsim
