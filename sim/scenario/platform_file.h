// Platform and GPU model files that start from another one (`base`, see
// sim/schema/platform.proto): the base is loaded, then the file's own
// fields are merged over it.
//
// Merging follows protobuf's MergeFrom (scalars replace, sub-messages
// merge, repeated fields append) but asks the file's text, not the value,
// what is set: proto3 scalars have no presence, so MergeFrom would skip
// `sharp: false` over a base with sharp: true; here, every field the text
// names replaces or extends the base's, zero or not.
#ifndef SHARDSIM_SIM_SCENARIO_PLATFORM_FILE_H_
#define SHARDSIM_SIM_SCENARIO_PLATFORM_FILE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "sim/schema/platform.pb.h"

namespace shardsim {

// What a message type's `base` names.
struct BaseKind {
  std::string noun;     // for errors: "platform", "GPU model"
  std::string shipped;  // its shipped files, under DataDir(): "platforms"
};

// Makes the paths a file at `dir` gives relative to itself absolute, so
// that they keep their meaning once merged into a file elsewhere.
using AbsolutePathsFn =
    std::function<void(const std::string& dir, google::protobuf::Message*)>;

// Reads `path` (text_proto.h); where it sets `base` (a shipped name: DataDir()/
// kind.shipped/NAME.textproto, or a path ending in .textproto, relative to
// `path`'s directory), reads the base the same way, merges the file over
// it as above, and clears `base`. Errors name the file and field: an
// unknown shipped name (listing the nearest), a base that cannot be read,
// and a loop of bases (naming every file of it). `absolute_paths`, if set,
// runs on every base before the merge.
absl::Status ReadWithBase(const std::string& path, const BaseKind& kind,
                          const AbsolutePathsFn& absolute_paths,
                          google::protobuf::Message* out);

// ReadWithBase for platforms (bases in platforms/) and GPU models (bases
// in platforms/gpus/). A base platform's gpu_model path is made absolute
// from the base's directory: ResolveGpuModel reads the merged platform's
// relative paths from the top file's.
absl::Status ReadPlatformWithBase(const std::string& path, Platform* out);
absl::Status ReadGpuModelWithBase(const std::string& path, GpuModel* out);

// Merges the fields `text` (the text format of `over`'s type) sets into
// `over`, as described above. InvalidArgument when `text` does not parse.
absl::Status MergeSetFields(absl::string_view text,
                            google::protobuf::Message* over);

// Stems of the .textproto files in DataDir()/`subdir`, sorted; empty when
// there are none or no data directory.
std::vector<std::string> ShippedNames(absl::string_view subdir);

// `shardsim platform NAME|FILE`: the platform LoadPlatform gives (bases
// merged, GPU model resolved, validated) in text format.
absl::StatusOr<std::string> PlatformText(absl::string_view name_or_path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_PLATFORM_FILE_H_
