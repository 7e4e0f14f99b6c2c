// `shardsim volume`: the bytes each point's lowered step sends, inside
// nodes and between them (sim/traffic/traffic.h).
#include "absl/flags/flag.h"
#include "sim/analyze/analyze.h"
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/cli/scenario_command.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"

namespace shardsim {
namespace {

absl::Status VolumeBody(const Job& job, SweepRanks* /*ranks: never spread*/) {
  absl::StatusOr<Results> results =
      AnalyzeJob(job, Analysis::kMemoryAndTraffic);
  if (!results.ok()) return results.status();
  *results->mutable_warnings() = {job.warnings.begin(), job.warnings.end()};
  return Emit(FormatVolumeTable(*results, absl::GetFlag(FLAGS_detail)),
              *results, OutputFilesFromFlags());
}

}  // namespace

int VolumeMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, VolumeBody);
}

}  // namespace shardsim
