#include "sim/strategy/deepspeed_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "sim/base/did_you_mean.h"
#include "sim/strategy/deepspeed_keys.h"

namespace shardsim {
namespace {

// Keeps the file's key order, so messages list keys as the user wrote them.
using Json = nlohmann::ordered_json;

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

std::string Show(const Json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "a list";
  if (v.is_string()) return absl::StrCat("string ", v.dump());
  return v.dump();
}

absl::Status WrongType(absl::string_view path, absl::string_view want,
                       const Json& got) {
  return Invalid(absl::StrCat(path, " must be ", want, ", got ", Show(got)));
}

// Python's json.load, which DeepSpeed reads with, takes no trailing commas
// or comments; nor does nlohmann's parser. A key given twice, which both
// would take silently (the last wins), is an error here.
absl::StatusOr<Json> ParseStrict(const std::string& text) {
  std::vector<std::set<std::string>> open;
  std::string twice;
  const Json::parser_callback_t note_keys = [&](int, Json::parse_event_t event,
                                                Json& parsed) {
    if (event == Json::parse_event_t::object_start) open.emplace_back();
    if (event == Json::parse_event_t::object_end && !open.empty()) {
      open.pop_back();
    }
    if (event == Json::parse_event_t::key && !open.empty() &&
        !open.back().insert(parsed.get<std::string>()).second &&
        twice.empty()) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text, note_keys);
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 4, column 3:
    // syntax error while parsing object key - unexpected '}'; ...", or
    // a number out of range ("[json.exception.out_of_range.406] number
    // overflow parsing '1e999'"): every exception of the parser.
    absl::string_view what = e.what();
    if (const size_t end = what.find("] "); end != what.npos) {
      what.remove_prefix(end + 2);
    }
    return Invalid(absl::StrCat("not valid JSON: ", what));
  }
  if (!twice.empty()) {
    return Invalid(absl::StrCat("key \"", twice, "\" is given twice"));
  }
  if (!root.is_object()) return WrongType("the config", "an object", root);
  return root;
}

// ---- the schema walk ----

// " (did you mean ...)" for an unknown key: a sibling close to it, or the
// same name in another section.
std::string Suggest(absl::string_view section, absl::string_view key) {
  std::string hint = DidYouMean(key, DeepSpeedKeysUnder(section));
  if (!hint.empty()) return hint;
  for (const DeepSpeedKey& k : DeepSpeedKeys()) {
    if (absl::EndsWith(k.path, absl::StrCat(".", key)) || k.path == key) {
      return absl::StrCat(" (did you mean \"", k.path, "\"?)");
    }
  }
  return "";
}

bool TurnedOff(const Json& v) {
  if (v.is_null() || (v.is_object() && v.empty())) return true;
  return v.is_object() && v.contains("enabled") && v["enabled"] == false;
}

// Checks every key of `object` (at `section`) against DeepSpeed's schema
// and notes those not modelled.
absl::Status CheckKeys(const Json& object, const std::string& section,
                       std::vector<std::string>* unmodelled) {
  for (const auto& [key, value] : object.items()) {
    const std::string path = section.empty() ? key : section + "." + key;
    const DeepSpeedKey* k = FindDeepSpeedKey(path);
    if (k == nullptr) {
      return Invalid(absl::StrCat("unknown key ", path,
                                  ": not in DeepSpeed's config schema",
                                  Suggest(section, key)));
    }
    switch (k->kind) {
      case DeepSpeedKeyKind::kSection:
        if (value.is_null()) break;
        if (!value.is_object()) return WrongType(path, "an object", value);
        if (absl::Status s = CheckKeys(value, path, unmodelled); !s.ok()) {
          return s;
        }
        break;
      case DeepSpeedKeyKind::kUnmodelled:
        if (value != Json::parse(std::string(k->default_json))) {
          unmodelled->push_back(
              absl::StrCat(path, " = ", value.dump(), ": ", k->what));
        }
        break;
      case DeepSpeedKeyKind::kOpaqueUnmodelled:
        if (!TurnedOff(value)) {
          unmodelled->push_back(absl::StrCat(path, ": ", k->what));
        }
        break;
      case DeepSpeedKeyKind::kModelled:
      case DeepSpeedKeyKind::kNoCost:
      case DeepSpeedKeyKind::kOpaqueNoCost:
        break;
    }
  }
  return absl::OkStatus();
}

// ---- typed keys ----

bool IsAuto(const Json& v) { return v.is_string() && v == "auto"; }

// JSON numbers DeepSpeed takes as integers must be whole (5e8 is);
// JSON numbers are exact to 2^53.
absl::StatusOr<std::optional<int64_t>> Int64At(const Json& object,
                                               absl::string_view section,
                                               const std::string& key) {
  if (!object.contains(key)) return std::optional<int64_t>();
  const Json& v = object[key];
  const std::string path =
      section.empty() ? key : absl::StrCat(section, ".", key);
  if (!v.is_number()) return WrongType(path, "an integer", v);
  const double d = v.get<double>();
  if (std::floor(d) != d || !(std::abs(d) <= 9007199254740992.0)) {
    return WrongType(path, "an integer", v);
  }
  return std::optional<int64_t>(v.is_number_float() ? static_cast<int64_t>(d)
                                                    : v.get<int64_t>());
}

absl::Status IntKey(const Json& zero, const std::string& key, int* out) {
  absl::StatusOr<std::optional<int64_t>> v =
      Int64At(zero, "zero_optimization", key);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return absl::OkStatus();
  if (std::abs(**v) > std::numeric_limits<int>::max()) {
    return WrongType(absl::StrCat("zero_optimization.", key), "an integer",
                     zero[key]);
  }
  *out = static_cast<int>(**v);
  return absl::OkStatus();
}

absl::Status BoolKey(const Json& zero, const std::string& key, bool* out) {
  if (!zero.contains(key)) return absl::OkStatus();
  if (!zero[key].is_boolean()) {
    return WrongType(absl::StrCat("zero_optimization.", key), "true or false",
                     zero[key]);
  }
  *out = zero[key].get<bool>();
  return absl::OkStatus();
}

// A size key under its name or its alias (DeepSpeedZeroConfig takes
// both), not both; `name` is what HF's Trainer fills in for "auto".
absl::Status SizeKey(const Json& zero, const std::string& name,
                     const std::string& alias, Execution* e,
                     void (Execution::*set)(int64_t)) {
  if (!alias.empty() && zero.contains(name) && zero.contains(alias)) {
    return Invalid(absl::StrCat("zero_optimization.", name, " and ", alias,
                                " are one key: give one"));
  }
  const std::string key = zero.contains(alias) ? alias : name;
  if (!zero.contains(key)) return absl::OkStatus();
  if (IsAuto(zero[key])) {
    e->add_hf_auto(name);
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<int64_t>> v =
      Int64At(zero, "zero_optimization", key);
  if (!v.ok()) return v.status();
  if (**v < 0) {
    return Invalid(
        absl::StrCat("zero_optimization.", key, " must be >= 0, got ", **v));
  }
  (e->*set)(**v);
  return absl::OkStatus();
}

// zero_optimization keys -> Execution fields, each only when given.
absl::Status ReadExecutionKeys(const Json& zero, Execution* e) {
  struct Size {
    const char* name;   // as HF's Trainer names it
    const char* alias;  // the other spelling, or ""
    void (Execution::*set)(int64_t);
  };
  const Size sizes[] = {
      {"stage3_prefetch_bucket_size", "prefetch_bucket_size",
       &Execution::set_prefetch_bucket_elements},
      {"stage3_max_live_parameters", "max_live_parameters",
       &Execution::set_max_live_elements},
      {"stage3_param_persistence_threshold", "param_persistence_threshold",
       &Execution::set_persistence_threshold},
      {"reduce_bucket_size", "", &Execution::set_reduce_bucket_elements}};
  for (const Size& s : sizes) {
    if (absl::Status st = SizeKey(zero, s.name, s.alias, e, s.set); !st.ok()) {
      return st;
    }
  }
  if (zero.contains("overlap_comm")) {
    bool v = false;
    if (absl::Status s = BoolKey(zero, "overlap_comm", &v); !s.ok()) return s;
    e->set_overlap_comm(v);
  }
  // reduce_scatter: false makes stage 3 all-reduce its buckets; stages 1-2
  // all-reduce them either way (use_multi_rank_bucket_allreduce).
  bool reduce_scatter = true;
  if (absl::Status s = BoolKey(zero, "reduce_scatter", &reduce_scatter);
      !s.ok()) {
    return s;
  }
  if (!reduce_scatter) e->set_all_reduce_buckets(true);
  // offload_optimizer.device (runtime/zero/offload_config.py,
  // OffloadDeviceEnum): "cpu" is ZeRO-Offload; NVMe (ZeRO-Infinity) swaps
  // the states out through files, which is not modelled.
  if (zero.contains("offload_optimizer") &&
      zero["offload_optimizer"].is_object() &&
      zero["offload_optimizer"].contains("device")) {
    const Json& device = zero["offload_optimizer"]["device"];
    if (device == "cpu") {
      e->set_offload_optimizer(true);
    } else if (device == "nvme") {
      return Invalid(
          "zero_optimization.offload_optimizer.device \"nvme\": NVMe "
          "offload (ZeRO-Infinity) is not modelled; \"cpu\" is");
    } else if (device != "none" && !device.is_null()) {
      return Invalid(absl::StrCat(
          "zero_optimization.offload_optimizer.device must be \"none\", "
          "\"cpu\" or \"nvme\", got ",
          device.dump()));
    }
  }
  return absl::OkStatus();
}

// Defaults are DeepSpeed's: stage 0, no hpZ, no quantization, no MiCS.
absl::Status ReadZeroKeys(const Json& zero, DeepSpeedZero* k) {
  for (auto [key, out] : {std::pair<const char*, int*>{"stage", &k->stage},
                          {"zero_hpz_partition_size", &k->hpz},
                          {"mics_shard_size", &k->mics_shard_size}}) {
    if (absl::Status s = IntKey(zero, key, out); !s.ok()) return s;
  }
  for (auto [key, out] :
       {std::pair<const char*, bool*>{"zero_quantized_weights", &k->qwz},
        {"zero_quantized_gradients", &k->qgz},
        {"mics_hierarchical_params_gather", &k->mics_hierarchical}}) {
    if (absl::Status s = BoolKey(zero, key, out); !s.ok()) return s;
  }
  if (k->stage < 0 || k->stage > 3) {
    return Invalid(absl::StrCat(
        "zero_optimization.stage must be 0, 1, 2 or 3, got ", k->stage));
  }
  if (k->hpz < 0) {
    return Invalid(
        absl::StrCat("zero_optimization.zero_hpz_partition_size must be >= 0, "
                     "got ",
                     k->hpz));
  }
  return ReadExecutionKeys(zero, &k->execution);
}

// train_batch_size, train_micro_batch_size_per_gpu and
// gradient_accumulation_steps: whole numbers >= 1, or "auto".
absl::Status ReadBatchKeys(const Json& root, DeepSpeedZero* k) {
  for (auto [key, out] :
       {std::pair<const char*, std::optional<int64_t>*>{"train_batch_size",
                                                        &k->train_batch_size},
        {"train_micro_batch_size_per_gpu", &k->micro_batch_size},
        {"gradient_accumulation_steps", &k->gradient_accumulation_steps}}) {
    if (root.contains(key) && IsAuto(root[key])) continue;
    absl::StatusOr<std::optional<int64_t>> v = Int64At(root, "", key);
    if (!v.ok()) return v.status();
    if (v->has_value() && **v < 1) {
      return Invalid(absl::StrCat(key, " must be >= 1, got ", **v));
    }
    *out = *v;
  }
  return absl::OkStatus();
}

// 16-bit mixed precision is what shardsim models; without bf16 or fp16
// DeepSpeed trains in fp32. HF's Trainer fills "auto" from its --bf16 or
// --fp16, which a config run through it is for. Stages 1-2 check the
// gradients for overflow before the update as bf16.check_grad_overflow
// says (default true), and always in fp16 (engine.py
// _configure_zero_optimizer); stage 3 only in fp16, over its flat gradient
// buffer, which is not modelled.
absl::Status ReadPrecision(const Json& root, DeepSpeedZero* k) {
  // SECTION.enabled: true, or "auto" (the Trainer's flag decides).
  auto enabled = [&](const char* section) -> absl::StatusOr<bool> {
    if (!root.contains(section) || !root[section].is_object() ||
        !root[section].contains("enabled")) {
      return false;
    }
    const Json& v = root[section]["enabled"];
    if (!v.is_boolean() && !IsAuto(v)) {
      return WrongType(absl::StrCat(section, ".enabled"),
                       "true, false or \"auto\"", v);
    }
    return IsAuto(v) || v.get<bool>();
  };
  const absl::StatusOr<bool> bf16 = enabled("bf16");
  if (!bf16.ok()) return bf16.status();
  const absl::StatusOr<bool> fp16 = enabled("fp16");
  if (!fp16.ok()) return fp16.status();
  if (*bf16 && root["bf16"].contains("check_grad_overflow")) {
    const Json& check = root["bf16"]["check_grad_overflow"];
    if (!check.is_boolean()) {
      return WrongType("bf16.check_grad_overflow", "true or false", check);
    }
    if (k->stage < 3) k->execution.set_overflow_check(check.get<bool>());
  }
  if (*fp16 && !*bf16 && k->stage == 3) {
    k->unmodelled.push_back(
        "fp16.enabled at stage 3: the overflow check over the flat gradient "
        "buffer before each update (stage3.py has_overflow)");
  }
  if (!*bf16 && !*fp16) {
    k->unmodelled.push_back(
        "bf16.enabled, fp16.enabled not true: DeepSpeed trains in fp32 "
        "(4-byte parameters, gradients and collectives), shardsim in 16-bit "
        "mixed precision");
  }
  return absl::OkStatus();
}

// Adam's fp32 master copy and two moments are the scenario's
// optimizer_bytes_per_param (12); another optimizer keeps other states.
absl::Status ReadOptimizer(const Json& root, DeepSpeedZero* k) {
  if (!root.contains("optimizer") || !root["optimizer"].is_object() ||
      !root["optimizer"].contains("type")) {
    return absl::OkStatus();
  }
  const Json& type = root["optimizer"]["type"];
  if (!type.is_string()) return WrongType("optimizer.type", "a name", type);
  const std::string name = absl::AsciiStrToLower(type.get<std::string>());
  if (name != "adam" && name != "adamw" && name != "auto") {
    k->unmodelled.push_back(absl::StrCat(
        "optimizer.type = ", type.dump(),
        ": keeps other states than Adam's (optimizer_bytes_per_param)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeepSpeedZero> ReadConfig(const std::string& text) {
  absl::StatusOr<Json> root = ParseStrict(text);
  if (!root.ok()) return root.status();
  DeepSpeedZero k;
  if (absl::Status s = CheckKeys(*root, "", &k.unmodelled); !s.ok()) return s;
  if (!root->contains("zero_optimization")) {
    return Invalid("no zero_optimization section");
  }
  const Json& zero = (*root)["zero_optimization"];
  if (!zero.is_object()) {
    return WrongType("zero_optimization", "an object", zero);
  }
  if (absl::Status s = ReadZeroKeys(zero, &k); !s.ok()) return s;
  if (absl::Status s = ReadBatchKeys(*root, &k); !s.ok()) return s;
  if (absl::Status s = ReadPrecision(*root, &k); !s.ok()) return s;
  if (absl::Status s = ReadOptimizer(*root, &k); !s.ok()) return s;
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
  absl::StatusOr<DeepSpeedZero> keys = ReadConfig(*text);
  if (!keys.ok()) return in_file(keys.status());
  keys->path = path;
  return keys;
}

}  // namespace shardsim
