// `shardsim estimate`: run's rows with each step's times estimated from the
// models, without the engine (sim/estimate/estimate.h): a screen over many
// points, each marked as an estimate.
#include <cstdio>
#include <string>
#include <utility>

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
  // Its own warnings on stderr (the scenario's were, scenario_command.cc);
  // in the JSON, the scenario's first.
  google::protobuf::RepeatedPtrField<std::string> warnings(job.warnings.begin(),
                                                           job.warnings.end());
  for (const std::string& warning : results->warnings()) {
    std::fprintf(stderr, "shardsim: warning: %s\n", warning.c_str());
    *warnings.Add() = warning;
  }
  *results->mutable_warnings() = std::move(warnings);
  return Emit(FormatRunTable(*results), *results, OutputFilesFromFlags());
}

}  // namespace

int EstimateMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, EstimateBody);
}

}  // namespace shardsim
