#include "validate/compute.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace shardsim {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double Number(const google::protobuf::Struct& s, const std::string& key) {
  const auto it = s.fields().find(key);
  return it == s.fields().end() ? 0 : it->second.number_value();
}

}  // namespace

bool IsTimelineFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  return text.ok() && text->find("\"traceEvents\"") != std::string::npos;
}

absl::StatusOr<std::vector<ComputeFit>> FitComputeEfficiency(
    const std::string& path, const Platform& platform) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  google::protobuf::Struct trace;
  if (auto s = google::protobuf::util::JsonStringToMessage(*text, &trace);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a Chrome trace: ", s.ToString()));
  }
  const auto events = trace.fields().find("traceEvents");
  if (events == trace.fields().end()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no traceEvents"));
  }
  const double peak = platform.gpu().peak_flops();
  std::map<std::string, std::vector<double>> by_kind;
  for (const auto& v : events->second.list_value().values()) {
    const google::protobuf::Struct& e = v.struct_value();
    const auto ph = e.fields().find("ph");
    const auto args = e.fields().find("args");
    const auto name = e.fields().find("name");
    if (ph == e.fields().end() || ph->second.string_value() != "X" ||
        args == e.fields().end() || name == e.fields().end()) {
      continue;
    }
    const double flops = Number(args->second.struct_value(), "flops");
    const double seconds = Number(e, "dur") / 1e6;  // trace time is in us
    if (flops <= 0 || seconds <= 0) continue;
    // The IR labels compute ops "KIND LAYER" (sim/schedule/lower.cc).
    const std::string& label = name->second.string_value();
    const std::string kind = label.substr(0, label.find(' '));
    if (kind == "optimizer") continue;
    by_kind[kind].push_back(flops / (seconds * peak));
  }
  if (by_kind.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no timed compute ops with FLOPs (a shardsim-hw run --trace "
              "file is expected)"));
  }
  std::vector<ComputeFit> fits;
  for (auto& [kind, shares] : by_kind) {
    std::sort(shares.begin(), shares.end());
    ComputeFit f;
    f.kind = kind;
    f.ops = static_cast<int>(shares.size());
    f.low = shares.front();
    f.high = shares.back();
    f.efficiency = shares[shares.size() / 2];
    fits.push_back(f);
  }
  return fits;
}

}  // namespace shardsim
