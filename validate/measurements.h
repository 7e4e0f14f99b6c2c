// Collective measurements read from nccl-tests (text table or -J JSON) and
// from `shardsim-hw collective --json`, in one form for calibrate/validate.
#ifndef SHARDSIM_VALIDATE_MEASUREMENTS_H_
#define SHARDSIM_VALIDATE_MEASUREMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schema/schedule.pb.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

struct MeasurementRow {
  int64_t size_bytes = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  bool in_place = false;
};

struct MeasurementSet {
  std::string file;
  std::string format;  // "nccl-tests", "nccl-tests-json", "shardsim-hw"
  CollectiveOp op = OP_UNSPECIFIED;
  Algorithm algorithm = ALGORITHM_UNSPECIFIED;  // unknown: RING is assumed
  std::string protocol;  // "" = unknown (the engine picks, as NCCL does)
  int gpus = 0;
  double avg_busbw_gbps = -1;  // the footer's, if any
  std::vector<MeasurementRow> rows;

  // Out-of-place rows (in-place ones where a size has no out-of-place row).
  std::vector<MeasurementRow> Primary() const;
};

// Overrides for what a file does not say; unset fields are ignored.
struct MeasurementHints {
  CollectiveOp op = OP_UNSPECIFIED;
  Algorithm algorithm = ALGORITHM_UNSPECIFIED;
  std::string protocol;
  int gpus = 0;
};

// "all_gather", "allgather", "ALL_GATHER", "all_gather_perf" -> ALL_GATHER.
absl::StatusOr<CollectiveOp> ParseOpName(const std::string& name);
absl::StatusOr<Algorithm> ParseAlgorithmName(const std::string& name);

// Parses one file; the format is detected ('{' first: JSON). Errors name
// the file and, for text, the line.
absl::StatusOr<MeasurementSet> ParseMeasurementFile(
    const std::string& path, const MeasurementHints& hints = {});
// The same from text in memory (`path` for messages and the op guess).
absl::StatusOr<MeasurementSet> ParseMeasurementText(
    const std::string& path, const std::string& text,
    const MeasurementHints& hints = {});

// A command-line spec: PATH[:op=OP][:algo=ALG][:proto=P][:gpus=N].
absl::StatusOr<MeasurementSet> ParseMeasurementSpec(const std::string& spec);

}  // namespace shardsim

#endif  // SHARDSIM_VALIDATE_MEASUREMENTS_H_
