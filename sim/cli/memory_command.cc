// `shardsim memory`: each point's memory per GPU, line by line, and
// whether it fits (sim/analyze/analyze.h).
#include "sim/analyze/analyze.h"
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/cli/scenario_command.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"

namespace shardsim {
namespace {

absl::Status MemoryBody(const Job& job, SweepRanks* /*ranks: never spread*/) {
  absl::StatusOr<Results> results = AnalyzeJob(job, Analysis::kMemory);
  if (!results.ok()) return results.status();
  *results->mutable_warnings() = {job.warnings.begin(), job.warnings.end()};
  return Emit(FormatMemoryTable(*results), *results, OutputFilesFromFlags());
}

}  // namespace

int MemoryMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, MemoryBody);
}

}  // namespace shardsim
