// What the scenario commands (run, plan, memory, volume, schedule) share:
// a job from one scenario file, or from the flags alone, and the checks
// of their command line.
#ifndef SHARDSIM_SIM_CLI_SCENARIO_COMMAND_H_
#define SHARDSIM_SIM_CLI_SCENARIO_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "sim/cli/commands.h"
#include "sim/runner/distribute.h"
#include "sim/scenario/scenario.h"

namespace shardsim {

// The command's work on its job. `ranks`: this rank's part in a `run` or
// `plan` spread over MPI ranks, or null.
using ScenarioBody = absl::Status (*)(const Job& job, SweepRanks* ranks);

// Checks the command line (at most one scenario file; a file or --model),
// loads the job (the file with the flags' overrides, or the flags alone:
// ScenarioFromFlags), prints its warnings on stderr, and runs `body`.
// `run` and `plan` under several MPI ranks spread their points over them
// (sim/runner/distribute.h); every rank exits as rank 0 does.
int RunScenarioCommand(const Invocation& invocation, ScenarioBody body);

// A body's own warnings (`warnings`, from the search or the estimate)
// printed on stderr as the job's were, then the job's put before them, so
// that the JSON lists both, the scenario's first.
void AddJobWarnings(const Job& job,
                    google::protobuf::RepeatedPtrField<std::string>* warnings);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_CLI_SCENARIO_COMMAND_H_
