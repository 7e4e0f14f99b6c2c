// nccl-tests -J output, JSON_FILE_VERSION 2 (nccl-tests 2.17, src/util.cu):
// {"version": 2, "args": [...], "env": ["K=V", ...], "config": {"ngpus",
// "devices": [{"rank", ...}]}, "results": [{"size", "count", "type",
// "redop", "root", "out_of_place": {"time"|"cpu_time", "alg_bw", "bus_bw",
// "nwrong"}, "in_place": {...}}], "average_bus_bandwidth": {"bandwidth"}}.
// Read as a google.protobuf.Struct: the schema is nccl-tests', not ours.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/struct.pb.h"
#include "sim/schema/limits.h"
#include "validate/formats.h"

namespace shardsim::formats {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

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

}  // namespace

absl::StatusOr<MeasurementSet> ParseNcclTestsJson(const std::string& path,
                                                  const Struct& doc) {
  MeasurementSet set;
  set.file = path;
  set.format = "nccl-tests-json";
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  const Value* results = Field(doc, "results");
  if (results == nullptr) return bad("no \"results\"");
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
  return set;
}

}  // namespace shardsim::formats
