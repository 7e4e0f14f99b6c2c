#include "validate/published.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/text_proto.h"
#include "sim/schema/limits.h"
#include "validate/validate.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Struct;
using google::protobuf::Value;

absl::Status RunError(const std::string& file, const std::string& field,
                      const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": field ", field, ": ", what));
}

// A scenario file is relative to the run's file.
std::string ScenarioFilePath(const std::string& file, const PublishedRun& run) {
  return (fs::path(file).parent_path() / run.scenario_file()).string();
}

absl::StatusOr<PublishedRun> ReadRun(const std::string& file) {
  PublishedRun run;
  if (absl::Status s = ReadTextProtoFile(file, &run); !s.ok()) return s;
  if (run.name().empty()) return RunError(file, "name", "required");
  if (run.source().empty()) {
    return RunError(file, "source", "required: where the number is");
  }
  if (run.framework().empty()) return RunError(file, "framework", "required");
  if (run.quote().empty()) {
    return RunError(file, "quote", "required: the source's own words");
  }
  if (!run.scenario_file().empty()) {
    if (run.has_scenario()) {
      return RunError(file, "scenario_file",
                      "give a scenario or a scenario file, not both");
    }
    if (run.strategy().empty()) {
      return RunError(file, "strategy", "a scenario file's run names one");
    }
    if (run.gpus() < 1 || run.gpus() > limits::kMaxGpus) {
      return RunError(file, "gpus",
                      absl::StrCat("must be in [1, ", limits::kMaxGpus,
                                   "], got ", run.gpus()));
    }
    absl::StatusOr<Scenario> scenario =
        ReadScenario(ScenarioFilePath(file, run));
    if (!scenario.ok()) return scenario.status();
    Scenario* s = run.mutable_scenario();
    *s = *std::move(scenario);
    s->clear_strategies();
    s->add_strategies(run.strategy());
    s->clear_gpus();
    s->add_gpus(run.gpus());
  } else if (!run.strategy().empty() || run.gpus() != 0) {
    return RunError(file, run.strategy().empty() ? "gpus" : "strategy",
                    "only with scenario_file (a scenario names its own)");
  }
  const Scenario& s = run.scenario();
  if (s.strategies_size() != 1) {
    return RunError(
        file, "scenario.strategies",
        absl::StrCat("a run is one strategy, got ", s.strategies_size()));
  }
  if (s.gpus_size() != 1) {
    return RunError(
        file, "scenario.gpus",
        absl::StrCat("a run is one GPU count, got ", s.gpus_size()));
  }
  switch (run.measured_case()) {
    case PublishedRun::kTokensPerGpuPerS:
      if (!(run.tokens_per_gpu_per_s() > 0 &&
            std::isfinite(run.tokens_per_gpu_per_s()))) {
        return RunError(file, "tokens_per_gpu_per_s", "must be > 0");
      }
      break;
    case PublishedRun::kStepTimeS:
      if (!(run.step_time_s() > 0 && std::isfinite(run.step_time_s()))) {
        return RunError(file, "step_time_s", "must be > 0");
      }
      break;
    case PublishedRun::kMfu:
      if (!(run.mfu() > 0 && run.mfu() <= 1)) {
        return RunError(file, "mfu", "must be in (0, 1]");
      }
      break;
    default:
      return RunError(file, "measured",
                      "give tokens_per_gpu_per_s, step_time_s or mfu");
  }
  return run;
}

std::vector<double> AbsErrors(const std::vector<PublishedCheck>& checks) {
  std::vector<double> e;
  for (const PublishedCheck& c : checks) {
    if (!c.oom) e.push_back(std::abs(c.error));
  }
  return e;
}

}  // namespace

double MedianAbsError(const std::vector<PublishedCheck>& checks) {
  return Median(AbsErrors(checks));
}

double WorstAbsError(const std::vector<PublishedCheck>& checks) {
  const std::vector<double> e = AbsErrors(checks);
  return e.empty() ? 0 : *std::max_element(e.begin(), e.end());
}

absl::StatusOr<std::vector<std::string>> PublishedFiles(
    const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
        const std::string f = e.path().string();
        if (e.is_regular_file() && absl::EndsWith(f, ".textproto")) {
          in_dir.push_back(f);
        }
      }
      if (ec) return absl::UnavailableError(absl::StrCat(p, ": cannot list"));
      std::sort(in_dir.begin(), in_dir.end());
      if (in_dir.empty()) {
        return absl::NotFoundError(absl::StrCat(p, ": no .textproto files"));
      }
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      return absl::NotFoundError(
          absl::StrCat(p, ": no such file or directory"));
    }
  }
  return files;
}

absl::StatusOr<std::vector<PublishedCheck>> CheckPublished(
    const std::vector<std::string>& files, const EngineOptions& options) {
  std::vector<PublishedCheck> checks;
  std::vector<Job> jobs;
  jobs.reserve(files.size());
  for (const std::string& file : files) {
    absl::StatusOr<PublishedRun> run = ReadRun(file);
    if (!run.ok()) return run.status();
    // Paths in a scenario file stay relative to it.
    const std::string from =
        run->scenario_file().empty() ? file : ScenarioFilePath(file, *run);
    absl::StatusOr<Job> job = ResolveJob(from, run->scenario());
    if (!job.ok()) return job.status();
    PublishedCheck c;
    c.file = file;
    c.run = *std::move(run);
    c.gpu = job->platform.gpu().name();
    c.strategy = c.run.scenario().strategies(0);
    c.gpus = c.run.scenario().gpus(0);
    checks.push_back(std::move(c));
    jobs.push_back(*std::move(job));
  }
  std::vector<JobPoint> points;
  for (size_t i = 0; i < jobs.size(); ++i) {
    points.push_back({&jobs[i], checks[i].strategy, checks[i].gpus});
  }
  absl::StatusOr<Results> results = SimulatePoints(points, options);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < checks.size(); ++i) {
    PublishedCheck& c = checks[i];
    const ResultRow& row = results->rows(static_cast<int>(i));
    c.oom = row.oom();
    c.metric =
        c.run.measured_case() == PublishedRun::kMfu ? "MFU" : "tokens/s/GPU";
    if (c.run.measured_case() == PublishedRun::kTokensPerGpuPerS) {
      c.measured = c.run.tokens_per_gpu_per_s();
    } else if (c.run.measured_case() == PublishedRun::kMfu) {
      c.measured = c.run.mfu();
    } else if (!c.oom) {
      // Tokens per step over the GPUs, as the simulator counts them (an
      // out-of-memory point has no step: its measurement stays 0, "-").
      c.measured =
          row.tokens_per_gpu_per_s() * row.step_time_s() / c.run.step_time_s();
    }
    if (c.oom) continue;
    c.simulated = c.metric == "MFU" ? row.mfu() : row.tokens_per_gpu_per_s();
    c.error = (c.simulated - c.measured) / c.measured;
    c.mfu = row.mfu();
    c.step_time_s = row.step_time_s();
    c.breakdown = row.breakdown();
  }
  return checks;
}

std::string PublishedTable(const std::vector<PublishedCheck>& checks) {
  std::string out = absl::StrFormat(
      "%-33s %-14s %5s %-24s %-12s %9s %9s %7s %5s %8s %8s %8s %8s\n", "run",
      "gpu", "gpus", "strategy", "metric", "measured", "simulated", "error",
      "mfu", "step s", "compute", "slowdown", "exposed");
  auto value = [](const PublishedCheck& c, double v) {
    if (v <= 0) return std::string("-");
    return c.metric == "MFU" ? absl::StrFormat("%.1f%%", 100 * v)
                             : absl::StrFormat("%.0f", v);
  };

  for (const PublishedCheck& c : checks) {
    const std::string head =
        absl::StrFormat("%-33s %-14s %5d %-24s %-12s %9s", c.run.name(), c.gpu,
                        c.gpus, c.strategy, c.metric, value(c, c.measured));
    if (c.oom) {
      absl::StrAppendFormat(&out, "%s %9s\n", head, "OOM");
      continue;
    }
    const Breakdown& b = c.breakdown;
    absl::StrAppendFormat(
        &out, "%s %9s %+6.1f%% %4.1f%% %8.3f %8.3f %8.3f %8.3f\n", head,
        value(c, c.simulated), 100 * c.error, 100 * c.mfu, c.step_time_s,
        b.compute_s() + b.optimizer_s(), b.compute_slowdown_s(),
        c.step_time_s - b.compute_s() - b.optimizer_s() -
            b.compute_slowdown_s());
  }
  absl::StrAppendFormat(
      &out,
      "# error = (simulated - measured) / measured; mfu: simulated; the "
      "simulated step's critical path in seconds: compute (kernels and "
      "optimizer at their own speed), slowdown (what overlapping collectives "
      "added), exposed (the rest: communication, pipeline, waits)\n"
      "# median |error| %.1f%%, worst %.1f%% over %d runs (checks, not fitting "
      "targets: no parameter is chosen to move them)\n",
      100 * MedianAbsError(checks), 100 * WorstAbsError(checks),
      AbsErrors(checks).size());
  return out;
}

absl::StatusOr<std::string> PublishedJson(
    const std::vector<PublishedCheck>& checks) {
  Struct root;
  auto& fields = *root.mutable_fields();
  Value& rows = fields["rows"];
  for (const PublishedCheck& c : checks) {
    Struct r;
    auto& f = *r.mutable_fields();
    f["file"].set_string_value(c.file);
    f["name"].set_string_value(c.run.name());
    f["source"].set_string_value(c.run.source());
    f["framework"].set_string_value(c.run.framework());
    f["quote"].set_string_value(c.run.quote());
    for (const std::string& a : c.run.assumptions()) {
      f["assumptions"].mutable_list_value()->add_values()->set_string_value(a);
    }
    f["gpu"].set_string_value(c.gpu);
    f["gpus"].set_number_value(c.gpus);
    f["strategy"].set_string_value(c.strategy);
    f["metric"].set_string_value(c.metric);
    f["measured"].set_number_value(c.measured);
    f["oom"].set_bool_value(c.oom);
    if (!c.oom) {
      f["simulated"].set_number_value(c.simulated);
      f["relative_error"].set_number_value(c.error);
      f["mfu"].set_number_value(c.mfu);
      f["step_time_s"].set_number_value(c.step_time_s);
      std::string breakdown;
      google::protobuf::util::JsonPrintOptions names;
      names.preserve_proto_field_names = true;
      if (!google::protobuf::util::MessageToJsonString(c.breakdown, &breakdown,
                                                       names)
               .ok() ||
          !google::protobuf::util::JsonStringToMessage(
               breakdown, f["breakdown"].mutable_struct_value())
               .ok()) {
        return absl::InternalError("cannot print a breakdown");
      }
    }
    *rows.mutable_list_value()->add_values()->mutable_struct_value() = r;
  }
  fields["median_abs_error"].set_number_value(MedianAbsError(checks));
  fields["worst_abs_error"].set_number_value(WorstAbsError(checks));
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  if (!google::protobuf::util::MessageToJsonString(root, &json, o).ok()) {
    return absl::InternalError("cannot print the report");
  }
  return json;
}

}  // namespace shardsim
