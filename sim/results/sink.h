// Where every command's results go: the table on stdout, then the files
// the user asked for (JSON whole, CSV one row per line). `shardsim` and
// `shardsim-hw` both write through here, so each kind of results has one
// table, one JSON and one CSV layout.
#ifndef SHARDSIM_SIM_RESULTS_SINK_H_
#define SHARDSIM_SIM_RESULTS_SINK_H_

#include <string>

#include "absl/status/status.h"
#include "sim/schema/results.pb.h"

namespace shardsim {

// The files to write; an empty path writes none.
struct OutputFiles {
  std::string json;
  std::string csv;
};

// Prints `table` to stdout (flushed, so that it comes before anything a
// later step writes), then writes `results` to the files. The CSV rows:
// Results' rows; a plan's rows led by the list each is in ("best",
// "presets", "pruned_presets", "pareto"), every GPU count's in turn for a
// plan at several; a sweep's rows led by what the
// sweep ran (platform, op, algorithm, gpus, channels).
absl::Status Emit(const std::string& table, const Results& results,
                  const OutputFiles& files);
absl::Status Emit(const std::string& table, const SearchResults& results,
                  const OutputFiles& files);
absl::Status Emit(const std::string& table, const PlanSweep& results,
                  const OutputFiles& files);
absl::Status Emit(const std::string& table, const CollectiveResults& results,
                  const OutputFiles& files);
absl::Status Emit(const std::string& table, const CollectiveBenchmark& results,
                  const OutputFiles& files);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RESULTS_SINK_H_
