#include "sim/scenario/text_proto.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "sim/base/did_you_mean.h"

namespace shardsim {
namespace {

// Collects the parser's first error with its position.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) {
      error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
    }
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

// " (did you mean ...)" for the parser's unknown field,
// 'Message type "shardsim.Scenario" has no field named "strategys".'
std::string FieldHint(absl::string_view error) {
  constexpr absl::string_view kType = "Message type \"";
  constexpr absl::string_view kField = "has no field named \"";
  const size_t type_at = error.find(kType);
  const size_t field_at = error.find(kField);
  if (type_at == error.npos || field_at == error.npos) return "";
  absl::string_view type = error.substr(type_at + kType.size());
  type = type.substr(0, type.find('"'));
  absl::string_view field = error.substr(field_at + kField.size());
  field = field.substr(0, field.find('"'));
  const google::protobuf::Descriptor* message =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(
          std::string(type));
  if (message == nullptr) return "";
  std::vector<std::string> names;
  for (int i = 0; i < message->field_count(); ++i) {
    names.push_back(message->field(i)->name());
  }
  return DidYouMean(field, names);
}

}  // namespace

absl::Status ParseTextProto(absl::string_view text,
                            google::protobuf::Message* message,
                            google::protobuf::TextFormat::ParseInfoTree* tree) {
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (tree != nullptr) parser.WriteLocationsTo(tree);
  if (!parser.ParseFromString(std::string(text), message)) {
    return absl::InvalidArgumentError(
        absl::StrCat(errors.error(), FieldHint(errors.error())));
  }
  return absl::OkStatus();
}

absl::Status ReadTextProtoFile(const std::string& path,
                               google::protobuf::Message* message) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  if (absl::Status s = ParseTextProto(text.str(), message); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ":", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace shardsim
