#include "validate/measurements.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sim/schema/limits.h"
#include "validate/formats.h"

namespace shardsim {
namespace formats {

std::string Normalize(std::string s) {
  s = absl::AsciiStrToLower(s);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  s.erase(std::remove(s.begin(), s.end(), '-'), s.end());
  return s;
}

CollectiveOp GuessOp(const std::string& text) {
  const std::string n = Normalize(text);
  if (absl::StrContains(n, "allgather")) return ALL_GATHER;
  if (absl::StrContains(n, "reducescatter")) return REDUCE_SCATTER;
  if (absl::StrContains(n, "allreduce")) return ALL_REDUCE;
  if (absl::StrContains(n, "broadcast")) return BROADCAST;
  return OP_UNSPECIFIED;
}

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool AsCount(double v, int64_t lo, int64_t hi, int64_t* out) {
  if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi))) {
    return false;
  }
  *out = static_cast<int64_t>(v);
  return true;
}

}  // namespace formats

namespace {

using formats::Basename;
using formats::GuessOp;

// What every format shares: the hints applied, then the set checked.
absl::Status Finish(const MeasurementHints& hints, MeasurementSet* set) {
  if (hints.op != OP_UNSPECIFIED) set->op = hints.op;
  if (hints.algorithm != ALGORITHM_UNSPECIFIED)
    set->algorithm = hints.algorithm;
  if (!hints.protocol.empty()) set->protocol = hints.protocol;
  if (hints.gpus > 0) set->gpus = hints.gpus;
  if (set->op == OP_UNSPECIFIED) set->op = GuessOp(Basename(set->file));
  if (set->op == OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat(set->file,
                     ": unknown collective: name the file after it "
                     "(all_gather_perf.txt) or give :op=all_gather"));
  }
  if (set->gpus < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        set->file, ": unknown GPU count: no \"#  Rank\" lines; give :gpus=N"));
  }
  if (set->rows.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(set->file, ": no measurement rows"));
  }
  // A collective takes at least a nanosecond and at most 1000 s: a time
  // outside would make an infinite or zero bandwidth, and a NaN error.
  FieldCheck check(set->file);
  check.Count("gpus", set->gpus, 2, limits::kMaxGpus);
  for (const MeasurementRow& r : set->rows) {
    const std::string at = absl::StrCat("size ", r.size_bytes, " ");
    check.Count(at + "size", r.size_bytes, 1, limits::kMaxCollectiveBytes)
        .Real(at + "time_us", r.time_us, 1e-3, 1e9);
  }
  return check.status();
}

}  // namespace

std::vector<MeasurementRow> MeasurementSet::Primary() const {
  std::map<int64_t, MeasurementRow> by_size;
  for (const MeasurementRow& r : rows) {
    auto it = by_size.find(r.size_bytes);
    if (it == by_size.end() || (it->second.in_place && !r.in_place)) {
      by_size[r.size_bytes] = r;
    }
  }
  std::vector<MeasurementRow> out;
  for (const auto& [size, r] : by_size) out.push_back(r);
  return out;
}

absl::StatusOr<CollectiveOp> ParseOpName(const std::string& name) {
  const CollectiveOp op = formats::GuessOp(name);
  if (op == OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown collective \"", name,
                     "\" (all_gather, reduce_scatter, all_reduce, broadcast)"));
  }
  return op;
}

absl::StatusOr<Algorithm> ParseAlgorithmName(const std::string& name) {
  const std::string n = formats::Normalize(name);
  for (int a = RING; a <= SHARP; ++a) {
    if (!Algorithm_IsValid(a)) continue;
    if (formats::Normalize(Algorithm_Name(static_cast<Algorithm>(a))) == n) {
      return static_cast<Algorithm>(a);
    }
  }
  if (n == "collnet" || n == "collnetdirect" || n == "collnetchain" ||
      n == "nvls") {
    return SHARP;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown algorithm \"", name, "\""));
}

absl::StatusOr<MeasurementSet> ParseMeasurementText(
    const std::string& path, const std::string& text,
    const MeasurementHints& hints) {
  // The format by its first character, then by its top-level key.
  absl::StatusOr<MeasurementSet> set;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') {
    set = formats::ParseNcclTestsText(path, text);
  } else {
    google::protobuf::Struct doc;
    google::protobuf::util::JsonParseOptions options;
    if (auto st =
            google::protobuf::util::JsonStringToMessage(text, &doc, options);
        !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not valid JSON: ", st.message().as_string()));
    }
    if (doc.fields().contains("rows")) {
      set = formats::ParseShardsimHwJson(path, text);
    } else if (doc.fields().contains("results")) {
      set = formats::ParseNcclTestsJson(path, doc);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": JSON with neither \"results\" (nccl-tests -J) nor \"rows\" "
          "(shardsim-hw collective --json)"));
    }
  }
  if (!set.ok()) return set.status();
  if (absl::Status s = Finish(hints, &*set); !s.ok()) return s;
  return set;
}

absl::StatusOr<MeasurementSet> ParseMeasurementFile(
    const std::string& path, const MeasurementHints& hints) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseMeasurementText(path, ss.str(), hints);
}

absl::StatusOr<MeasurementSet> ParseMeasurementSpec(const std::string& spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  MeasurementHints hints;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(parts[i], '=');
    const std::string where = absl::StrCat(spec, ": \"", parts[i], "\": ");
    if (kv.first == "op") {
      absl::StatusOr<CollectiveOp> op = ParseOpName(kv.second);
      if (!op.ok())
        return absl::InvalidArgumentError(where +
                                          std::string(op.status().message()));
      hints.op = *op;
    } else if (kv.first == "algo" || kv.first == "algorithm") {
      absl::StatusOr<Algorithm> a = ParseAlgorithmName(kv.second);
      if (!a.ok())
        return absl::InvalidArgumentError(where +
                                          std::string(a.status().message()));
      hints.algorithm = *a;
    } else if (kv.first == "proto" || kv.first == "protocol") {
      hints.protocol = kv.second;
    } else if (kv.first == "gpus") {
      if (!absl::SimpleAtoi(kv.second, &hints.gpus) || hints.gpus < 1 ||
          hints.gpus > limits::kMaxGpus) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "gpus must be in [1, ", limits::kMaxGpus, "]"));
      }
    } else {
      return absl::InvalidArgumentError(where +
                                        "expected op=, algo=, proto= or gpus=");
    }
  }
  return ParseMeasurementFile(parts[0], hints);
}

}  // namespace shardsim
