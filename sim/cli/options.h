// The flags of `shardsim` alone (the ones shardsim-hw shares are in
// sim/scenario/flags.h), and what the commands make of them.
#ifndef SHARDSIM_SIM_CLI_OPTIONS_H_
#define SHARDSIM_SIM_CLI_OPTIONS_H_

#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/results/sink.h"
#include "sim/runner/distribute.h"
#include "sim/simulate/simulate.h"

ABSL_DECLARE_FLAG(std::string, csv);
ABSL_DECLARE_FLAG(bool, breakdown);
ABSL_DECLARE_FLAG(bool, collapse);
ABSL_DECLARE_FLAG(int, jobs);
ABSL_DECLARE_FLAG(bool, replay_stages);
ABSL_DECLARE_FLAG(bool, network_symmetry);
ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(double, time_limit);
ABSL_DECLARE_FLAG(bool, detail);
ABSL_DECLARE_FLAG(std::optional<double>, memory_cap);
ABSL_DECLARE_FLAG(int, top);
ABSL_DECLARE_FLAG(std::string, figure);
ABSL_DECLARE_FLAG(bool, exhaustive);
ABSL_DECLARE_FLAG(bool, algorithms);
ABSL_DECLARE_FLAG(bool, settings);
ABSL_DECLARE_FLAG(bool, search_parallelism);
ABSL_DECLARE_FLAG(bool, deployable);
ABSL_DECLARE_FLAG(std::string, measurements);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(double, max_median_error);
ABSL_DECLARE_FLAG(bool, published);

namespace shardsim {

// The engine of `run` and `plan`: --mode, --jobs, --collapse,
// --replay-stages, --network-symmetry, --time-limit, --trace, each checked.
// `ranks`: this rank's part in points spread over MPI ranks, or null.
absl::StatusOr<EngineOptions> EngineOptionsFromFlags(SweepRanks* ranks);

// A collective sweep's engine: --mode, --replay-stages,
// --network-symmetry and --time-limit.
absl::StatusOr<EngineOptions> CollectiveEngineOptions();

// --json and --csv.
OutputFiles OutputFilesFromFlags();

// The overview of every command (commands.h's Usage), built once.
const std::string& UsageText();

// Prints "shardsim: error: MESSAGE" and returns 1: a command's exit code
// for an error (commands.h).
int Fail(const absl::Status& status);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_CLI_OPTIONS_H_
