// `shardsim calibrate` and `shardsim validate`.
#ifndef SHARDSIM_VALIDATE_CLI_H_
#define SHARDSIM_VALIDATE_CLI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sim/simulate/simulate.h"

namespace shardsim {

// Files are specs: PATH[:op=OP][:algo=ALG][:proto=P][:gpus=N].
// Writes the calibrated .textproto (comment block on top) to `out_path`
// and prints the fit error per file on stdout.
absl::Status RunCalibrateCommand(
    const std::string& platform,
    const std::vector<std::string>& measurement_files,
    const std::string& out_path);

// Prints predicted vs measured busbw per file and size, and the median and
// max error per file; writes JSON to `json_path` if set. Non-OK (naming
// the file) when a file's median error exceeds `max_median_error` (>= 0).
absl::Status RunValidateCommand(const std::string& platform,
                                const std::vector<std::string>& files,
                                double max_median_error,
                                const std::string& json_path);

// `validate --published`: the runs of `paths` (files or directories,
// validate/published.h) simulated and compared, a table on stdout and JSON
// to `json_path` if set. Non-OK when the median |error| exceeds
// `max_median_error` (>= 0).
absl::Status RunPublishedCommand(const std::vector<std::string>& paths,
                                 const EngineOptions& options,
                                 double max_median_error,
                                 const std::string& json_path);

}  // namespace shardsim

#endif  // SHARDSIM_VALIDATE_CLI_H_
