// `shardsim calibrate` and `shardsim validate`: a platform against
// measurements (validate/cli.h), fitted or checked.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/scenario/data_dir.h"
#include "sim/scenario/flags.h"
#include "validate/cli.h"

namespace shardsim {
namespace {

// Both take flags only: the platform, the measurement files, and each
// its own (--out; --max-median-error, --json).
int MeasurementsMain(const Invocation& inv) {
  const std::string& command = inv.command;
  if (!inv.args.empty()) {
    std::fprintf(stderr, "shardsim %s takes flags only\n\n%s", command.c_str(),
                 UsageText().c_str());
    return 2;
  }
  const std::optional<std::string> platform = absl::GetFlag(FLAGS_platform);
  const std::vector<std::string> files =
      absl::StrSplit(absl::GetFlag(FLAGS_measurements), ',', absl::SkipEmpty());
  absl::Status s;
  if (!platform) {
    s = absl::InvalidArgumentError("--platform: required");
  } else if (files.empty()) {
    s = absl::InvalidArgumentError("--measurements: give at least one file");
  } else if (const double e = absl::GetFlag(FLAGS_max_median_error);
             !(e >= 0 && e <= 1e6) && e != -1) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "--max-median-error: must be a finite number >= 0, got ", e));
  } else if (command == "calibrate") {
    s = absl::GetFlag(FLAGS_out).empty()
            ? absl::InvalidArgumentError("--out: required")
            : RunCalibrateCommand(*platform, files, absl::GetFlag(FLAGS_out));
  } else {
    s = RunValidateCommand(*platform, files,
                           absl::GetFlag(FLAGS_max_median_error),
                           absl::GetFlag(FLAGS_json));
  }
  return s.ok() ? 0 : Fail(s);
}

// `validate --published [PATH ...]`: the runs simulated on their own
// platforms (no --platform, no --measurements).
int PublishedMain(const Invocation& inv) {
  absl::Status s;
  std::vector<std::string> paths = inv.args;
  if (absl::GetFlag(FLAGS_platform) ||
      !absl::GetFlag(FLAGS_measurements).empty()) {
    s = absl::InvalidArgumentError(
        "--published: each run names its own platform; give no --platform "
        "or --measurements");
  } else if (const int jobs = absl::GetFlag(FLAGS_jobs);
             jobs < 1 || jobs > 256) {
    s = absl::InvalidArgumentError(
        absl::StrCat("--jobs: must be in [1, 256], got ", jobs));
  } else if (const double e = absl::GetFlag(FLAGS_max_median_error);
             !(e >= 0 && e <= 1e6) && e != -1) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "--max-median-error: must be a finite number >= 0, got ", e));
  } else if (paths.empty()) {
    absl::StatusOr<std::string> data = DataDir();
    if (data.ok()) {
      paths.push_back(*data + "/validate/published");
    } else {
      s = data.status();
    }
  }
  if (s.ok()) {
    EngineOptions options;
    options.jobs = absl::GetFlag(FLAGS_jobs);
    s = RunPublishedCommand(paths, options,
                            absl::GetFlag(FLAGS_max_median_error),
                            absl::GetFlag(FLAGS_json));
  }
  return s.ok() ? 0 : Fail(s);
}

}  // namespace

int CalibrateMain(const Invocation& invocation) {
  return MeasurementsMain(invocation);
}
int ValidateMain(const Invocation& invocation) {
  if (absl::GetFlag(FLAGS_published)) return PublishedMain(invocation);
  return MeasurementsMain(invocation);
}

}  // namespace shardsim
