// Published training runs against the simulator: each file of
// validate/published/ is a PublishedRun (sim/schema/published.proto), the
// set-up simulated and its measured throughput compared. A check, never a
// fit: nothing here changes a parameter.
#ifndef SHARDSIM_VALIDATE_PUBLISHED_H_
#define SHARDSIM_VALIDATE_PUBLISHED_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schema/published.pb.h"
#include "sim/simulate/simulate.h"

namespace shardsim {

struct PublishedCheck {
  std::string file;
  PublishedRun run;
  std::string gpu;       // the platform's GPU name
  std::string strategy;  // the scenario's one strategy spec
  int gpus = 0;
  // What is compared: "tokens/s/GPU" (measured as such, or from the
  // measured step time) or "MFU"; the error is (simulated - measured) /
  // measured.
  std::string metric;
  double measured = 0;
  double simulated = 0;
  double error = 0;
  double mfu = 0;  // simulated
  bool oom = false;
  // The simulated step's breakdown, for the report's "why".
  Breakdown breakdown;
  double step_time_s = 0;
};

// The .textproto files of `paths`, each a file or a directory (its
// .textproto files, sorted). Every run must name one strategy and one GPU
// count, and its measurement: errors name the file and the field.
absl::StatusOr<std::vector<std::string>> PublishedFiles(
    const std::vector<std::string>& paths);

// Every file's run simulated (side by side, `options.jobs` at once) and
// compared.
absl::StatusOr<std::vector<PublishedCheck>> CheckPublished(
    const std::vector<std::string>& files, const EngineOptions& options);

// The median and the largest |error| over the runs that fit in memory.
double MedianAbsError(const std::vector<PublishedCheck>& checks);
double WorstAbsError(const std::vector<PublishedCheck>& checks);

// One row per run and the median and worst |error|, as text; or as JSON
// ({"rows": [...], "median_abs_error", "worst_abs_error"}).
std::string PublishedTable(const std::vector<PublishedCheck>& checks);
absl::StatusOr<std::string> PublishedJson(
    const std::vector<PublishedCheck>& checks);

}  // namespace shardsim

#endif  // SHARDSIM_VALIDATE_PUBLISHED_H_
