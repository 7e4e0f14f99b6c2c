#include "validate/cli.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/text_format.h"
#include "sim/scenario/scenario.h"
#include "validate/calibrate.h"
#include "validate/kernels.h"
#include "validate/measurements.h"
#include "validate/published.h"
#include "validate/validate.h"

namespace shardsim {

namespace {

absl::StatusOr<std::vector<MeasurementSet>> ReadAll(
    const std::vector<std::string>& specs) {
  if (specs.empty())
    return absl::InvalidArgumentError("--measurements: no files");
  std::vector<MeasurementSet> sets;
  for (const std::string& spec : specs) {
    absl::StatusOr<MeasurementSet> s = ParseMeasurementSpec(spec);
    if (!s.ok()) return s.status();
    sets.push_back(*std::move(s));
  }
  return sets;
}

}  // namespace

absl::Status RunCalibrateCommand(
    const std::string& platform,
    const std::vector<std::string>& measurement_files,
    const std::string& out_path) {
  if (out_path.empty()) return absl::InvalidArgumentError("--out: required");
  absl::StatusOr<Platform> base = LoadPlatform(platform, ".");
  if (!base.ok()) return base.status();
  // Kernel files (PyTorch references, shardsim-hw timelines) fit the
  // kernel model; the others are collective measurements.
  std::vector<std::string> collective_files, kernel_files;
  for (const std::string& f : measurement_files) {
    const std::string path = f.substr(0, f.find(':'));
    (IsKernelFile(path) ? kernel_files : collective_files).push_back(f);
  }
  CalibrationResult calibrated;
  calibrated.platform = *base;
  if (!collective_files.empty()) {
    absl::StatusOr<std::vector<MeasurementSet>> sets =
        ReadAll(collective_files);
    if (!sets.ok()) return sets.status();
    absl::StatusOr<CalibrationResult> c = Calibrate(*base, *sets);
    if (!c.ok()) return c.status();
    calibrated = *std::move(c);
  } else {
    calibrated.comment =
        "# No collective measurements: latencies and bandwidths are the base "
        "platform's.\n";
  }
  if (!kernel_files.empty()) {
    std::vector<KernelSample> samples;
    for (const std::string& spec : kernel_files) {
      absl::StatusOr<std::vector<KernelSample>> s = ReadKernelSamples(spec);
      if (!s.ok()) return s.status();
      samples.insert(samples.end(), s->begin(), s->end());
    }
    absl::StatusOr<KernelFitResult> fit =
        FitKernelModel(calibrated.platform, samples);
    if (!fit.ok()) return fit.status();
    *calibrated.platform.mutable_kernels() = fit->model;
    absl::StrAppend(&calibrated.comment, "# Kernel model:\n");
    for (const FittedParameter& p : fit->parameters) {
      absl::StrAppendFormat(
          &calibrated.comment, "#   %s = %.6g (was %.6g): %s%s\n", p.name,
          p.value, p.base, p.why,
          p.identified ? absl::StrFormat(", %d samples", p.points) : "");
    }
    const std::vector<KernelCheck> checks =
        CheckKernels(calibrated.platform, samples);
    std::cout << KernelCheckTable(checks);
  }
  const CalibrationResult* r = &calibrated;
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(r->platform, &text)) {
    return absl::InternalError("cannot print the platform");
  }
  std::ofstream out(out_path);
  out << r->comment
      << "# proto-file: sim/schema/platform.proto\n"
         "# proto-message: shardsim.Platform\n"
      << text;
  if (!out)
    return absl::UnavailableError(absl::StrCat(out_path, ": cannot write"));
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
  std::vector<std::string> collective_files;
  for (const std::string& spec : files) {
    if (!IsKernelFile(spec.substr(0, spec.find(':')))) {
      collective_files.push_back(spec);
      continue;
    }
    absl::StatusOr<std::vector<KernelSample>> samples = ReadKernelSamples(spec);
    if (!samples.ok()) return samples.status();
    std::vector<KernelCheck> checks = CheckKernels(*p, *samples);
    std::cout << "# platform " << p->name() << ", " << spec << "\n"
              << KernelCheckTable(checks);
    std::vector<double> errors;
    for (const KernelCheck& c : checks) errors.push_back(std::abs(c.error));
    std::sort(errors.begin(), errors.end());
    const double median = errors[errors.size() / 2];
    std::cout << absl::StrFormat("# median |error| %.1f%% over %d samples\n",
                                 100 * median, errors.size());
    if (max_median_error >= 0 && !(median <= max_median_error)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: median relative error %.3g exceeds --max-median-error %.3g",
          spec, median, max_median_error));
    }
  }
  if (collective_files.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<MeasurementSet>> sets = ReadAll(collective_files);
  if (!sets.ok()) return sets.status();
  absl::StatusOr<ValidationReport> report = Validate(*p, *sets);
  if (!report.ok()) return report.status();
  std::cout << "# platform " << p->name() << "\n" << ValidationTable(*report);
  if (!json_path.empty()) {
    absl::StatusOr<std::string> json = ValidationJson(*report, p->name());
    if (!json.ok()) return json.status();
    std::ofstream out(json_path);
    out << *json;
    if (!out)
      return absl::UnavailableError(absl::StrCat(json_path, ": cannot write"));
  }
  if (max_median_error >= 0) {
    for (const FileError& e : report->files) {
      // Written so that a NaN error fails the gate too.
      if (!(e.median_relative_error <= max_median_error)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: median relative error %.3g exceeds --max-median-error %.3g",
            e.file, e.median_relative_error, max_median_error));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RunPublishedCommand(const std::vector<std::string>& paths,
                                 const EngineOptions& options,
                                 double max_median_error,
                                 const std::string& json_path) {
  absl::StatusOr<std::vector<std::string>> files = PublishedFiles(paths);
  if (!files.ok()) return files.status();
  absl::StatusOr<std::vector<PublishedCheck>> checks =
      CheckPublished(*files, options);
  if (!checks.ok()) return checks.status();
  std::cout << PublishedTable(*checks);
  absl::StatusOr<std::string> json = PublishedJson(*checks);
  if (!json.ok()) return json.status();
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << *json;
    if (!out)
      return absl::UnavailableError(absl::StrCat(json_path, ": cannot write"));
  }
  bool compared = false;
  for (const PublishedCheck& c : *checks) compared = compared || !c.oom;
  if (!compared) {
    return absl::FailedPreconditionError(
        "published runs: none fits in memory as simulated, so none was "
        "compared");
  }
  if (max_median_error >= 0) {
    const double median = MedianAbsError(*checks);
    if (!(median <= max_median_error)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "published runs: median |error| %.3g exceeds --max-median-error "
          "%.3g",
          median, max_median_error));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardsim
