// Replays measured collectives in the simulator and reports the error.
#ifndef SHARDSIM_VALIDATE_VALIDATE_H_
#define SHARDSIM_VALIDATE_VALIDATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/results.pb.h"
#include "validate/measurements.h"

namespace shardsim {

// The platform a set runs on: `platform` with only the set's protocol
// when the measurement pinned one (NCCL_PROTO).
absl::StatusOr<Platform> PlatformForSet(const Platform& platform,
                                        const MeasurementSet& set);

// The simulator's rows for `sizes` (ascending) of the set's op, algorithm
// (RING when unknown) and GPU count; one SimulateCollective call when the
// sizes are a geometric series, else one per size.
absl::StatusOr<std::vector<CollectiveRow>> SimulateSizes(
    const Platform& platform, const MeasurementSet& set,
    const std::vector<int64_t>& sizes);

struct ValidationRow {
  std::string file;
  std::string op;
  int gpus = 0;
  int64_t size_bytes = 0;
  double measured_busbw_gbps = 0;
  double predicted_busbw_gbps = 0;
  double relative_error = 0;  // |predicted - measured| / measured (busbw)
  std::string protocol;       // the engine's choice
};

struct FileError {
  std::string file;
  std::string op;
  int gpus = 0;
  double median_relative_error = 0;
  double max_relative_error = 0;
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  std::vector<FileError> files;
};

double Median(std::vector<double> v);

// Every out-of-place point of every set, replayed on `platform`.
absl::StatusOr<ValidationReport> Validate(
    const Platform& platform, const std::vector<MeasurementSet>& sets);

// {"platform": ..., "rows": [{file, op, gpus, size_bytes,
// measured_busbw_gbps, predicted_busbw_gbps, relative_error}],
// "files": [{file, op, gpus, median_relative_error, max_relative_error}]}.
absl::StatusOr<std::string> ValidationJson(const ValidationReport& report,
                                           const std::string& platform);
std::string ValidationTable(const ValidationReport& report);

}  // namespace shardsim

#endif  // SHARDSIM_VALIDATE_VALIDATE_H_
