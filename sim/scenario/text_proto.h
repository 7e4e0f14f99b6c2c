// The one reader of text-format files (scenarios, models, platforms, GPU
// models): errors give LINE:COLUMN, and an unknown field the nearest
// field the message has ("did you mean").
#ifndef SHARDSIM_SIM_SCENARIO_TEXT_PROTO_H_
#define SHARDSIM_SIM_SCENARIO_TEXT_PROTO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace shardsim {

// Parses `text` into `message`; with `tree`, also where each field was
// written (what a platform's `base` merge needs). Errors read
// "LINE:COLUMN: what (did you mean \"FIELD\"?)", for the caller to put
// the file's name before.
absl::Status ParseTextProto(
    absl::string_view text, google::protobuf::Message* message,
    google::protobuf::TextFormat::ParseInfoTree* tree = nullptr);

// The file at `path` parsed into `message`: NotFound "PATH: cannot open",
// or ParseTextProto's error after "PATH:".
absl::Status ReadTextProtoFile(const std::string& path,
                               google::protobuf::Message* message);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_TEXT_PROTO_H_
