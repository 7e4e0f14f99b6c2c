#include "validate/cli.h"

#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/text_format.h"
#include "sim/scenario/scenario.h"
#include "validate/calibrate.h"
#include "validate/measurements.h"
#include "validate/validate.h"

namespace shardsim {

namespace {

absl::StatusOr<std::vector<MeasurementSet>> ReadAll(
    const std::vector<std::string>& specs) {
  if (specs.empty()) return absl::InvalidArgumentError("--measurements: no files");
  std::vector<MeasurementSet> sets;
  for (const std::string& spec : specs) {
    absl::StatusOr<MeasurementSet> s = ParseMeasurementSpec(spec);
    if (!s.ok()) return s.status();
    sets.push_back(*std::move(s));
  }
  return sets;
}

}  // namespace

absl::Status RunCalibrateCommand(const std::string& platform,
                                 const std::vector<std::string>& measurement_files,
                                 const std::string& out_path) {
  if (out_path.empty()) return absl::InvalidArgumentError("--out: required");
  absl::StatusOr<Platform> base = LoadPlatform(platform, ".");
  if (!base.ok()) return base.status();
  absl::StatusOr<std::vector<MeasurementSet>> sets = ReadAll(measurement_files);
  if (!sets.ok()) return sets.status();
  absl::StatusOr<CalibrationResult> r = Calibrate(*base, *sets);
  if (!r.ok()) return r.status();
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(r->platform, &text)) {
    return absl::InternalError("cannot print the platform");
  }
  std::ofstream out(out_path);
  out << r->comment
      << "# proto-file: sim/schema/platform.proto\n"
         "# proto-message: shardsim.Platform\n"
      << text;
  if (!out) return absl::UnavailableError(absl::StrCat(out_path, ": cannot write"));
  std::cout << r->comment;
  std::cout << "wrote " << out_path << "\n";
  return absl::OkStatus();
}

absl::Status RunValidateCommand(const std::string& platform,
                                const std::vector<std::string>& files,
                                double max_median_error,
                                const std::string& json_path) {
  absl::StatusOr<Platform> p = LoadPlatform(platform, ".");
  if (!p.ok()) return p.status();
  absl::StatusOr<std::vector<MeasurementSet>> sets = ReadAll(files);
  if (!sets.ok()) return sets.status();
  absl::StatusOr<ValidationReport> report = Validate(*p, *sets);
  if (!report.ok()) return report.status();
  std::cout << "# platform " << p->name() << "\n" << ValidationTable(*report);
  if (!json_path.empty()) {
    absl::StatusOr<std::string> json = ValidationJson(*report, p->name());
    if (!json.ok()) return json.status();
    std::ofstream out(json_path);
    out << *json;
    if (!out) return absl::UnavailableError(absl::StrCat(json_path, ": cannot write"));
  }
  if (max_median_error >= 0) {
    for (const FileError& e : report->files) {
      if (e.median_relative_error > max_median_error) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: median relative error %.3g exceeds --max-median-error %.3g",
            e.file, e.median_relative_error, max_median_error));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace shardsim
