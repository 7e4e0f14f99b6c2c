// The measurement formats measurements.h reads, one parser each (one file
// each), and what they share. Internal to validate/.
#ifndef SHARDSIM_VALIDATE_FORMATS_H_
#define SHARDSIM_VALIDATE_FORMATS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"
#include "validate/measurements.h"

namespace shardsim::formats {

// nccl-tests' text table (nccl_tests_text.cc).
absl::StatusOr<MeasurementSet> ParseNcclTestsText(const std::string& path,
                                                  const std::string& text);
// nccl-tests' -J JSON, read as a Struct (nccl_tests_json.cc).
absl::StatusOr<MeasurementSet> ParseNcclTestsJson(
    const std::string& path, const google::protobuf::Struct& doc);
// `shardsim-hw collective --json`: CollectiveResults (shardsim_hw_json.cc).
absl::StatusOr<MeasurementSet> ParseShardsimHwJson(const std::string& path,
                                                   const std::string& text);

// Lower case, without '_' and '-'.
std::string Normalize(std::string s);
// The op a file name or program name mentions, if any.
CollectiveOp GuessOp(const std::string& text);
std::string Basename(const std::string& path);
// A JSON number as a count in [lo, hi], checked before the cast: a double
// beyond the integer's range does not convert.
bool AsCount(double v, int64_t lo, int64_t hi, int64_t* out);

}  // namespace shardsim::formats

#endif  // SHARDSIM_VALIDATE_FORMATS_H_
