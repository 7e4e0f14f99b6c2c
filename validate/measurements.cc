#include "validate/measurements.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sim/schema/limits.h"

namespace shardsim {

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

std::string Normalize(std::string s) {
  s = absl::AsciiStrToLower(s);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  s.erase(std::remove(s.begin(), s.end(), '-'), s.end());
  return s;
}

// The op a file name or program name mentions, if any.
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

// A JSON number as a count in [lo, hi], checked before the cast: a double
// beyond the integer's range does not convert.
bool AsCount(double v, int64_t lo, int64_t hi, int64_t* out) {
  if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi))) {
    return false;
  }
  *out = static_cast<int64_t>(v);
  return true;
}

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

absl::StatusOr<MeasurementSet> ParseText(const std::string& path,
                                         const std::string& text,
                                         const MeasurementHints& hints) {
  MeasurementSet set;
  set.file = path;
  set.format = "nccl-tests";
  int ranks = 0;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    auto err = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": ", what, ": \"", line, "\""));
    };
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (line[0] == '#') {
      absl::string_view body = absl::StripAsciiWhitespace(line.substr(1));
      if (absl::StartsWith(body, "Rank ")) {
        ++ranks;
      } else if (absl::ConsumePrefix(&body, "Collective test starting:")) {
        const CollectiveOp op = GuessOp(std::string(body));
        if (op != OP_UNSPECIFIED) set.op = op;
      } else if (absl::ConsumePrefix(&body, "Avg bus bandwidth")) {
        body = absl::StripAsciiWhitespace(body);
        if (!absl::ConsumePrefix(&body, ":")) return err("bad footer");
        std::vector<std::string> parts =
            absl::StrSplit(body, ' ', absl::SkipWhitespace());
        double bw;
        if (parts.empty() || !absl::SimpleAtod(parts[0], &bw)) {
          return err("bad average bus bandwidth");
        }
        set.avg_busbw_gbps = bw;
      }
      continue;
    }
    // NCCL_DEBUG lines and MPI chatter interleave with the table.
    if (absl::StrContains(line, "NCCL INFO") ||
        absl::StrContains(line, "NCCL WARN")) {
      continue;
    }
    std::vector<std::string> t =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    // size count type [redop [root]] time algbw busbw #wrong time algbw
    // busbw #wrong: 11 (2.x before redop/root), 12 or 13 columns.
    if (t.size() < 11 || t.size() > 13) {
      return err(
          absl::StrCat("expected 11 to 13 columns (size count type "
                       "[redop root] then time algbw busbw #wrong "
                       "out-of-place and in-place), got ",
                       t.size()));
    }
    int64_t size;
    if (!absl::SimpleAtoi(t[0], &size)) return err("size is not an integer");
    const size_t first = t.size() - 8;
    for (int place = 0; place < 2; ++place) {
      MeasurementRow r;
      r.size_bytes = size;
      r.in_place = place == 1;
      const size_t c = first + 4 * place;
      if (!absl::SimpleAtod(t[c], &r.time_us) ||
          !absl::SimpleAtod(t[c + 1], &r.algbw_gbps) ||
          !absl::SimpleAtod(t[c + 2], &r.busbw_gbps)) {
        return err(absl::StrCat(r.in_place ? "in-place" : "out-of-place",
                                " time/algbw/busbw are not numbers"));
      }
      int64_t wrong = 0;
      if (t[c + 3] != "N/A" && absl::SimpleAtoi(t[c + 3], &wrong) &&
          wrong > 0) {
        return err(
            absl::StrCat(wrong, " wrong elements: not a valid measurement"));
      }
      set.rows.push_back(r);
    }
  }
  set.gpus = ranks;
  if (absl::Status s = Finish(hints, &set); !s.ok()) return s;
  return set;
}

// nccl-tests -J output, JSON_FILE_VERSION 2 (nccl-tests 2.17, src/util.cu):
// {"version": 2, "args": [...], "env": ["K=V", ...], "config": {"ngpus",
// "devices": [{"rank", ...}]}, "results": [{"size", "count", "type",
// "redop", "root", "out_of_place": {"time"|"cpu_time", "alg_bw", "bus_bw",
// "nwrong"}, "in_place": {...}}], "average_bus_bandwidth": {"bandwidth"}}.
// shardsim-hw: {"op", "algorithm", "gpus", "rows": [{"size_bytes",
// "time_us", "algbw_gbps", "busbw_gbps", "checked", "wrong"}]}.
const Value* Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

bool Number(const Struct& s, const std::string& key, double* out) {
  const Value* v = Field(s, key);
  if (v == nullptr) return false;
  if (v->kind_case() == Value::kNumberValue) {
    *out = v->number_value();
    return true;
  }
  if (v->kind_case() == Value::kStringValue) {
    return absl::SimpleAtod(v->string_value(), out);
  }
  return false;
}

absl::StatusOr<MeasurementSet> ParseJson(const std::string& path,
                                         const std::string& text,
                                         const MeasurementHints& hints) {
  Struct doc;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto st =
          google::protobuf::util::JsonStringToMessage(text, &doc, options);
      !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not valid JSON: ", st.message().as_string()));
  }
  MeasurementSet set;
  set.file = path;
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (const Value* rows = Field(doc, "rows")) {  // shardsim-hw
    set.format = "shardsim-hw";
    double gpus = 0;
    int64_t count = 0;
    if (Number(doc, "gpus", &gpus)) {
      if (!AsCount(gpus, 1, limits::kMaxGpus, &count)) {
        return bad(absl::StrCat("\"gpus\": must be in [1, ", limits::kMaxGpus,
                                "], got ", gpus));
      }
      set.gpus = static_cast<int>(count);
    }
    if (const Value* op = Field(doc, "op")) {
      absl::StatusOr<CollectiveOp> o = ParseOpName(op->string_value());
      if (!o.ok()) return bad(std::string(o.status().message()));
      set.op = *o;
    }
    if (const Value* a = Field(doc, "algorithm")) {
      absl::StatusOr<Algorithm> al = ParseAlgorithmName(a->string_value());
      if (!al.ok()) return bad(std::string(al.status().message()));
      set.algorithm = *al;
    }
    if (rows->kind_case() != Value::kListValue)
      return bad("\"rows\" is not a list");
    int i = 0;
    for (const Value& v : rows->list_value().values()) {
      const std::string where = absl::StrCat("rows[", i++, "]");
      if (v.kind_case() != Value::kStructValue)
        return bad(where + " is not an object");
      const Struct& r = v.struct_value();
      MeasurementRow row;
      double size = 0, wrong = 0;
      if (!Number(r, "size_bytes", &size) ||
          !Number(r, "time_us", &row.time_us)) {
        return bad(where + ": needs size_bytes and time_us");
      }
      if (!AsCount(size, 1, limits::kMaxCollectiveBytes, &row.size_bytes)) {
        return bad(absl::StrCat(where, ": size_bytes must be in [1, ",
                                limits::kMaxCollectiveBytes, "], got ", size));
      }
      Number(r, "algbw_gbps", &row.algbw_gbps);
      Number(r, "busbw_gbps", &row.busbw_gbps);
      if (Number(r, "wrong", &wrong) && wrong > 0) {
        return bad(absl::StrCat(where, ": ", wrong, " wrong elements"));
      }
      set.rows.push_back(row);
    }
  } else if (const Value* results = Field(doc, "results")) {  // nccl-tests -J
    set.format = "nccl-tests-json";
    double version = 0;
    if (Number(doc, "version", &version) && version != 2) {
      return bad(absl::StrCat("nccl-tests JSON version ", version,
                              ": only version 2 is supported"));
    }
    if (const Value* args = Field(doc, "args");
        args != nullptr && args->kind_case() == Value::kListValue &&
        args->list_value().values_size() > 0) {
      set.op = GuessOp(Basename(args->list_value().values(0).string_value()));
    }
    if (const Value* env = Field(doc, "env");
        env != nullptr && env->kind_case() == Value::kListValue) {
      for (const Value& e : env->list_value().values()) {
        absl::string_view kv = e.string_value();
        if (absl::ConsumePrefix(&kv, "NCCL_PROTO=") &&
            !absl::StrContains(kv, ",")) {
          set.protocol = std::string(kv);
        } else if (absl::ConsumePrefix(&kv, "NCCL_ALGO=")) {
          absl::StatusOr<Algorithm> a = ParseAlgorithmName(std::string(kv));
          if (a.ok()) set.algorithm = *a;
        }
      }
    }
    if (const Value* config = Field(doc, "config");
        config != nullptr && config->kind_case() == Value::kStructValue) {
      if (const Value* devices = Field(config->struct_value(), "devices");
          devices != nullptr && devices->kind_case() == Value::kListValue) {
        set.gpus = devices->list_value().values_size();
      }
    }
    if (const Value* avg = Field(doc, "average_bus_bandwidth");
        avg != nullptr && avg->kind_case() == Value::kStructValue) {
      Number(avg->struct_value(), "bandwidth", &set.avg_busbw_gbps);
    }
    if (results->kind_case() != Value::kListValue)
      return bad("\"results\" is not a list");
    int i = 0;
    for (const Value& v : results->list_value().values()) {
      const std::string where = absl::StrCat("results[", i++, "]");
      if (v.kind_case() != Value::kStructValue)
        return bad(where + " is not an object");
      const Struct& r = v.struct_value();
      double size = 0;
      int64_t bytes = 0;
      if (!Number(r, "size", &size)) return bad(where + ": no \"size\"");
      if (!AsCount(size, 1, limits::kMaxCollectiveBytes, &bytes)) {
        return bad(absl::StrCat(where, ": size must be in [1, ",
                                limits::kMaxCollectiveBytes, "], got ", size));
      }
      if (const Value* n = Field(r, "experiment_name");
          n != nullptr && set.op == OP_UNSPECIFIED) {
        set.op = GuessOp(n->string_value());
      }
      for (const char* key : {"out_of_place", "in_place"}) {
        const Value* p = Field(r, key);
        if (p == nullptr || p->kind_case() != Value::kStructValue) continue;
        const Struct& m = p->struct_value();
        MeasurementRow row;
        row.size_bytes = bytes;
        row.in_place = std::string(key) == "in_place";
        if (!Number(m, "time", &row.time_us) &&
            !Number(m, "cpu_time", &row.time_us)) {
          return bad(absl::StrCat(where, ".", key, ": no \"time\""));
        }
        Number(m, "alg_bw", &row.algbw_gbps);
        Number(m, "bus_bw", &row.busbw_gbps);
        double wrong = 0;
        if (Number(m, "nwrong", &wrong) && wrong > 0) {
          return bad(
              absl::StrCat(where, ".", key, ": ", wrong, " wrong elements"));
        }
        set.rows.push_back(row);
      }
    }
  } else {
    return bad(
        "JSON with neither \"results\" (nccl-tests -J) nor \"rows\" "
        "(shardsim-hw collective --json)");
  }
  if (absl::Status s = Finish(hints, &set); !s.ok()) return s;
  return set;
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
  const CollectiveOp op = GuessOp(name);
  if (op == OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown collective \"", name,
                     "\" (all_gather, reduce_scatter, all_reduce, broadcast)"));
  }
  return op;
}

absl::StatusOr<Algorithm> ParseAlgorithmName(const std::string& name) {
  const std::string n = Normalize(name);
  for (int a = RING; a <= SHARP; ++a) {
    if (!Algorithm_IsValid(a)) continue;
    if (Normalize(Algorithm_Name(static_cast<Algorithm>(a))) == n) {
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
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    return ParseJson(path, text, hints);
  }
  return ParseText(path, text, hints);
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
