#include "sim/scenario/framework_inputs.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "sim/scenario/megatron_args.h"
#include "sim/scenario/torchtitan_config.h"

namespace shardsim {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string FieldText(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  std::vector<std::string> values;
  const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
  for (int i = 0; i < n; ++i) {
    std::string v;
    google::protobuf::TextFormat::PrintFieldValueToString(
        m, f, f->is_repeated() ? i : -1, &v);
    values.push_back(v);
  }
  return f->is_repeated() ? absl::StrCat("[", absl::StrJoin(values, ", "), "]")
                          : values[0];
}

bool IsSet(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  return f->is_repeated() ? r->FieldSize(m, f) > 0 : r->HasField(m, f);
}

// The scenario field that is given instead of `field` (its pair): a model
// by name or inline, micro-batches by count or by tokens.
const char* OtherOf(absl::string_view field) {
  if (field == "model_def") return "model";
  if (field == "micro_batches") return "global_batch_tokens";
  if (field == "global_batch_tokens") return "micro_batches";
  return nullptr;
}

// Checks that every field `from` sets is unset in `into` or equal to it,
// submessages field by field (the model whole).
absl::Status CheckAgree(const Message& from, const Message& into,
                        const std::string& prefix, absl::string_view path,
                        absl::string_view file) {
  std::vector<const FieldDescriptor*> fields;
  from.GetReflection()->ListFields(from, &fields);
  const Reflection* r = into.GetReflection();
  for (const FieldDescriptor* f : fields) {
    const std::string name = prefix + f->name();
    auto conflict = [&](absl::string_view field, absl::string_view ours) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": field ", field, ": the scenario gives ", ours,
                       " but ", file, " sets ", name, " ", FieldText(from, f),
                       ": give it in one place, or the same"));
    };
    if (const char* other = OtherOf(name); prefix.empty() && other) {
      const FieldDescriptor* o = into.GetDescriptor()->FindFieldByName(other);
      if (IsSet(into, o)) return conflict(other, FieldText(into, o));
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
        !f->is_repeated() && name != "model_def") {
      if (absl::Status s =
              CheckAgree(from.GetReflection()->GetMessage(from, f),
                         r->GetMessage(into, f), name + ".", path, file);
          !s.ok()) {
        return s;
      }
      continue;
    }
    if (IsSet(into, f) && FieldText(into, f) != FieldText(from, f)) {
      return conflict(name, FieldText(into, f));
    }
  }
  return absl::OkStatus();
}

// Sets what `from` gives; repeated fields replace (they agree or were
// empty).
void SetFrom(const Scenario& from, Scenario* into) {
  Scenario given = from;
  if (given.strategies_size() > 0) into->clear_strategies();
  into->MergeFrom(given);
}

absl::Status Apply(const FrameworkInput& in, absl::string_view field,
                   absl::string_view what, absl::string_view path,
                   Scenario* scenario, std::vector<std::string>* warnings) {
  const std::string file = absl::StrCat(what, " ", in.path);
  if (absl::Status s = CheckAgree(in.scenario, *scenario, "", path, file);
      !s.ok()) {
    return s;
  }
  if (!in.unmodelled.empty() && !scenario->allow_unmodelled()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field ", field, ": ", file,
                     ": not modelled: ", absl::StrJoin(in.unmodelled, "; "),
                     " (--allow-unmodelled simulates the file without them)"));
  }
  for (const std::string& u : in.unmodelled) {
    warnings->push_back(absl::StrCat(file, ": not modelled: ", u));
  }
  SetFrom(in.scenario, scenario);
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyFrameworkInputs(absl::string_view path,
                                  absl::string_view base_dir,
                                  Scenario* scenario,
                                  std::vector<std::string>* warnings) {
  if (!scenario->megatron_args().empty()) {
    absl::StatusOr<FrameworkInput> in =
        ReadMegatronArgs(scenario->megatron_args(), base_dir);
    if (!in.ok()) {
      return absl::Status(
          in.status().code(),
          absl::StrCat(path, ": field megatron_args: ", in.status().message()));
    }
    if (absl::Status s = Apply(*in, "megatron_args", "Megatron-LM arguments",
                               path, scenario, warnings);
        !s.ok()) {
      return s;
    }
  }
  if (!scenario->torchtitan_config().empty()) {
    absl::StatusOr<FrameworkInput> in =
        ReadTorchtitanConfig(scenario->torchtitan_config(), base_dir);
    if (!in.ok()) {
      return absl::Status(in.status().code(),
                          absl::StrCat(path, ": field torchtitan_config: ",
                                       in.status().message()));
    }
    if (absl::Status s = Apply(*in, "torchtitan_config", "torchtitan config",
                               path, scenario, warnings);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace shardsim
