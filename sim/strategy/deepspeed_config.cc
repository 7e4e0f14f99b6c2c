#include "sim/strategy/deepspeed_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace shardsim {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(what);
}

std::string ResolvePath(absl::string_view path, absl::string_view base_dir) {
  if (base_dir.empty() || absl::StartsWith(path, "/")) return std::string(path);
  if (absl::EndsWith(base_dir, "/")) return absl::StrCat(base_dir, path);
  return absl::StrCat(base_dir, "/", path);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string KindName(const google::protobuf::Value& v) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNullValue:
      return "null";
    case google::protobuf::Value::kNumberValue:
      return absl::StrCat(v.number_value());
    case google::protobuf::Value::kStringValue:
      return absl::StrCat("string \"", v.string_value(), "\"");
    case google::protobuf::Value::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case google::protobuf::Value::kStructValue:
      return "an object";
    case google::protobuf::Value::kListValue:
      return "a list";
    default:
      return "nothing";
  }
}

absl::Status WrongType(absl::string_view key, absl::string_view want,
                       const google::protobuf::Value& got) {
  return Invalid(absl::StrCat("zero_optimization.", key, " must be ", want,
                              ", got ", KindName(got)));
}

// JSON numbers arrive as doubles; DeepSpeed's integer keys must be whole.
// Sizes (elements) may pass 2^31; JSON numbers are exact to 2^53.
absl::StatusOr<int64_t> Int64Key(const google::protobuf::Struct& zero,
                                 const std::string& key, int64_t fallback) {
  auto it = zero.fields().find(key);
  if (it == zero.fields().end()) return fallback;
  const google::protobuf::Value& v = it->second;
  if (v.kind_case() != google::protobuf::Value::kNumberValue ||
      std::floor(v.number_value()) != v.number_value() ||
      !(std::abs(v.number_value()) <= 9007199254740992.0)) {
    return WrongType(key, "an integer", v);
  }
  return static_cast<int64_t>(v.number_value());
}

// The same for keys that fit an int (stage, partition sizes).
absl::StatusOr<int> IntKey(const google::protobuf::Struct& zero,
                           const std::string& key, int fallback) {
  absl::StatusOr<int64_t> v = Int64Key(zero, key, fallback);
  if (!v.ok()) return v.status();
  if (std::abs(*v) > std::numeric_limits<int>::max()) {
    return WrongType(key, "an integer", zero.fields().at(key));
  }
  return static_cast<int>(*v);
}

absl::StatusOr<bool> BoolKey(const google::protobuf::Struct& zero,
                             const std::string& key, bool fallback) {
  auto it = zero.fields().find(key);
  if (it == zero.fields().end()) return fallback;
  if (it->second.kind_case() != google::protobuf::Value::kBoolValue) {
    return WrongType(key, "true or false", it->second);
  }
  return it->second.bool_value();
}

absl::StatusOr<google::protobuf::Struct> ZeroSection(const std::string& text) {
  google::protobuf::Struct root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(text, &root);
  if (!parsed.ok()) {
    return Invalid(
        absl::StrCat("not valid JSON: ", std::string(parsed.message())));
  }
  auto it = root.fields().find("zero_optimization");
  if (it == root.fields().end()) {
    return Invalid("no zero_optimization section");
  }
  if (it->second.kind_case() != google::protobuf::Value::kStructValue) {
    return Invalid(absl::StrCat("zero_optimization must be an object, got ",
                                KindName(it->second)));
  }
  return it->second.struct_value();
}

// zero_optimization keys -> Execution fields, each only when given.
absl::Status ReadExecutionKeys(const google::protobuf::Struct& zero,
                               Execution* e) {
  const std::pair<const char*, void (Execution::*)(int64_t)> sizes[] = {
      {"stage3_prefetch_bucket_size", &Execution::set_prefetch_bucket_elements},
      {"stage3_max_live_parameters", &Execution::set_max_live_elements},
      {"stage3_param_persistence_threshold",
       &Execution::set_persistence_threshold},
      {"reduce_bucket_size", &Execution::set_reduce_bucket_elements}};
  for (const auto& [key, set] : sizes) {
    const auto it = zero.fields().find(key);
    if (it == zero.fields().end()) continue;
    if (it->second.kind_case() == google::protobuf::Value::kStringValue &&
        it->second.string_value() == "auto") {
      e->add_hf_auto(key);
      continue;
    }
    absl::StatusOr<int64_t> v = Int64Key(zero, key, 0);
    if (!v.ok()) return v.status();
    if (*v < 0) {
      return Invalid(
          absl::StrCat("zero_optimization.", key, " must be >= 0, got ", *v));
    }
    (e->*set)(*v);
  }
  if (zero.fields().contains("overlap_comm")) {
    absl::StatusOr<bool> v = BoolKey(zero, "overlap_comm", false);
    if (!v.ok()) return v.status();
    e->set_overlap_comm(*v);
  }
  // reduce_scatter: false makes stage 3 all-reduce its buckets; stages 1-2
  // all-reduce them either way (use_multi_rank_bucket_allreduce).
  if (zero.fields().contains("reduce_scatter")) {
    absl::StatusOr<bool> v = BoolKey(zero, "reduce_scatter", true);
    if (!v.ok()) return v.status();
    if (!*v) e->set_all_reduce_buckets(true);
  }
  return absl::OkStatus();
}

// Defaults are DeepSpeed's: stage 0, no hpZ, no quantization, no MiCS.
absl::StatusOr<DeepSpeedZero> ReadZeroKeys(
    const google::protobuf::Struct& zero) {
  DeepSpeedZero k;
  for (auto [key, out] : {std::pair<const char*, int*>{"stage", &k.stage},
                          {"zero_hpz_partition_size", &k.hpz},
                          {"mics_shard_size", &k.mics_shard_size}}) {
    absl::StatusOr<int> v = IntKey(zero, key, *out);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  for (auto [key, out] :
       {std::pair<const char*, bool*>{"zero_quantized_weights", &k.qwz},
        {"zero_quantized_gradients", &k.qgz},
        {"mics_hierarchical_params_gather", &k.mics_hierarchical}}) {
    absl::StatusOr<bool> v = BoolKey(zero, key, *out);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (k.stage < 0 || k.stage > 3) {
    return Invalid(absl::StrCat(
        "zero_optimization.stage must be 0, 1, 2 or 3, got ", k.stage));
  }
  if (k.hpz < 0) {
    return Invalid(absl::StrCat(
        "zero_optimization.zero_hpz_partition_size must be >= 0, got ", k.hpz));
  }
  if (absl::Status s = ReadExecutionKeys(zero, &k.execution); !s.ok()) {
    return s;
  }
  return k;
}

}  // namespace

absl::StatusOr<DeepSpeedZero> ReadDeepSpeedConfig(absl::string_view spec,
                                                  absl::string_view base_dir) {
  const std::string path = ResolvePath(spec, base_dir);
  auto in_file = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("DeepSpeed config ", path,
                                                    ": ", status.message()));
  };
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return in_file(text.status());
  absl::StatusOr<google::protobuf::Struct> zero = ZeroSection(*text);
  if (!zero.ok()) return in_file(zero.status());
  absl::StatusOr<DeepSpeedZero> keys = ReadZeroKeys(*zero);
  if (!keys.ok()) return in_file(keys.status());
  keys->path = path;
  return keys;
}

}  // namespace shardsim
