#include "validate/validate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sim/collective/sweep.h"
#include "sim/results/results.h"
#include "sim/simulate/simulate.h"

namespace shardsim {

absl::StatusOr<Platform> PlatformForSet(const Platform& platform,
                                        const MeasurementSet& set) {
  if (set.protocol.empty()) return platform;
  Platform p = platform;
  p.clear_protocols();
  for (const Protocol& proto : platform.protocols()) {
    if (absl::AsciiStrToLower(proto.name()) ==
        absl::AsciiStrToLower(set.protocol)) {
      *p.add_protocols() = proto;
    }
  }
  if (p.protocols_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(set.file, ": protocol \"", set.protocol,
                     "\" is not one of platform ", platform.name(), "'s"));
  }
  return p;
}

absl::StatusOr<std::vector<CollectiveRow>> SimulateSizes(
    const Platform& platform, const MeasurementSet& set,
    const std::vector<int64_t>& sizes) {
  absl::StatusOr<Platform> p = PlatformForSet(platform, set);
  if (!p.ok()) return p.status();
  CollectiveSweep sweep;
  sweep.set_op(set.op);
  sweep.set_algorithm(set.algorithm == ALGORITHM_UNSPECIFIED ? RING
                                                             : set.algorithm);
  sweep.set_step_factor(2);  // one size at a time, unless geometric below
  std::vector<CollectiveRow> out;
  if (sizes.empty()) return out;
  auto fail = [&](const absl::Status& s) {
    return absl::Status(
        s.code(),
        absl::StrCat(set.file, ": simulating ", CollectiveOp_Name(set.op),
                     " on ", set.gpus, " GPUs: ", s.message()));
  };
  // One sweep when the sizes are what the engine's sweep would produce.
  bool geometric = sizes.size() >= 2 && sizes[1] > sizes[0];
  const double factor =
      geometric ? static_cast<double>(sizes[1]) / sizes[0] : 0;
  if (geometric) {
    double s = sizes[0];
    for (int64_t want : sizes) {
      if (std::llround(s) != want) geometric = false;
      s *= factor;
    }
  }
  if (geometric) {
    sweep.set_min_bytes(sizes.front());
    sweep.set_max_bytes(sizes.back());
    sweep.set_step_factor(factor);
    absl::StatusOr<CollectiveResults> r =
        SimulateCollective(*p, set.gpus, sweep, {});
    if (!r.ok()) return fail(r.status());
    if (r->rows_size() == static_cast<int>(sizes.size())) {
      return std::vector<CollectiveRow>(r->rows().begin(), r->rows().end());
    }
  }
  for (int64_t size : sizes) {
    sweep.set_min_bytes(size);
    sweep.set_max_bytes(size);
    sweep.set_step_factor(2);
    absl::StatusOr<CollectiveResults> r =
        SimulateCollective(*p, set.gpus, sweep, {});
    if (!r.ok()) return fail(r.status());
    if (r->rows_size() != 1) return absl::InternalError("simulated sweep size");
    out.push_back(r->rows(0));
  }
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

absl::StatusOr<ValidationReport> Validate(
    const Platform& platform, const std::vector<MeasurementSet>& sets) {
  ValidationReport report;
  for (const MeasurementSet& set : sets) {
    const std::vector<MeasurementRow> rows = set.Primary();
    std::vector<int64_t> sizes;
    for (const MeasurementRow& r : rows) sizes.push_back(r.size_bytes);
    absl::StatusOr<std::vector<CollectiveRow>> sim =
        SimulateSizes(platform, set, sizes);
    if (!sim.ok()) return sim.status();
    FileError fe;
    fe.file = set.file;
    fe.op = CollectiveOp_Name(set.op);
    fe.gpus = set.gpus;
    std::vector<double> errors;
    const double bus = BusFactor(set.op, set.gpus);
    for (size_t i = 0; i < rows.size(); ++i) {
      ValidationRow v;
      v.file = set.file;
      v.op = fe.op;
      v.gpus = set.gpus;
      v.size_bytes = rows[i].size_bytes;
      // busbw from size and time: the same definition on both sides.
      v.measured_busbw_gbps =
          rows[i].size_bytes / (rows[i].time_us * 1e-6) / 1e9 * bus;
      v.predicted_busbw_gbps = (*sim)[i].busbw_gbps();
      v.relative_error =
          std::abs(v.predicted_busbw_gbps - v.measured_busbw_gbps) /
          v.measured_busbw_gbps;
      v.protocol = (*sim)[i].protocol();
      errors.push_back(v.relative_error);
      report.rows.push_back(v);
    }
    fe.median_relative_error = Median(errors);
    fe.max_relative_error = *std::max_element(errors.begin(), errors.end());
    report.files.push_back(fe);
  }
  return report;
}

absl::StatusOr<std::string> ValidationJson(const ValidationReport& report,
                                           const std::string& platform) {
  google::protobuf::Struct s;
  auto& f = *s.mutable_fields();
  f["platform"].set_string_value(platform);
  auto* rows = f["rows"].mutable_list_value();
  for (const ValidationRow& v : report.rows) {
    auto& r = *rows->add_values()->mutable_struct_value()->mutable_fields();
    r["file"].set_string_value(v.file);
    r["op"].set_string_value(v.op);
    r["gpus"].set_number_value(v.gpus);
    r["size_bytes"].set_number_value(static_cast<double>(v.size_bytes));
    r["measured_busbw_gbps"].set_number_value(v.measured_busbw_gbps);
    r["predicted_busbw_gbps"].set_number_value(v.predicted_busbw_gbps);
    r["relative_error"].set_number_value(v.relative_error);
  }
  auto* files = f["files"].mutable_list_value();
  for (const FileError& e : report.files) {
    auto& r = *files->add_values()->mutable_struct_value()->mutable_fields();
    r["file"].set_string_value(e.file);
    r["op"].set_string_value(e.op);
    r["gpus"].set_number_value(e.gpus);
    r["median_relative_error"].set_number_value(e.median_relative_error);
    r["max_relative_error"].set_number_value(e.max_relative_error);
  }
  return ToJson(s);
}

std::string ValidationTable(const ValidationReport& report) {
  std::string out;
  std::string file;
  for (const ValidationRow& v : report.rows) {
    if (v.file != file) {
      file = v.file;
      absl::StrAppendFormat(&out, "# %s: %s on %d GPUs\n", v.file, v.op,
                            v.gpus);
      absl::StrAppendFormat(&out, "# %12s %12s %12s %9s  %s\n", "size (B)",
                            "meas busbw", "sim busbw", "error", "protocol");
    }
    absl::StrAppendFormat(&out, "  %12d %12.2f %12.2f %8.1f%%  %s\n",
                          v.size_bytes, v.measured_busbw_gbps,
                          v.predicted_busbw_gbps, 100 * v.relative_error,
                          v.protocol);
  }
  for (const FileError& e : report.files) {
    absl::StrAppendFormat(&out, "# %s: median error %.1f%%, max %.1f%%\n",
                          e.file, 100 * e.median_relative_error,
                          100 * e.max_relative_error);
  }
  return out;
}

}  // namespace shardsim
