// `shardsim-hw collective --json`: a CollectiveResults message
// (sim/schema/results.proto), read with its own schema.
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "sim/schema/limits.h"
#include "sim/schema/results.pb.h"
#include "validate/formats.h"

namespace shardsim::formats {

absl::StatusOr<MeasurementSet> ParseShardsimHwJson(const std::string& path,
                                                   const std::string& text) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  CollectiveResults results;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // newer writers may add fields
  if (auto st =
          google::protobuf::util::JsonStringToMessage(text, &results, options);
      !st.ok()) {
    return bad(absl::StrCat("not a shardsim-hw CollectiveResults: ",
                            st.message().as_string()));
  }
  MeasurementSet set;
  set.file = path;
  set.format = "shardsim-hw";
  set.op = results.op();
  set.algorithm = results.algorithm();
  if (results.gpus() != 0) {
    if (results.gpus() < 1 || results.gpus() > limits::kMaxGpus) {
      return bad(absl::StrCat("field gpus: must be in [1, ", limits::kMaxGpus,
                              "], got ", results.gpus()));
    }
    set.gpus = results.gpus();
  }
  int i = 0;
  for (const CollectiveRow& r : results.rows()) {
    const std::string where = absl::StrCat("rows[", i++, "]");
    if (r.wrong() > 0) {
      return bad(absl::StrCat(where, ": ", r.wrong(), " wrong elements"));
    }
    MeasurementRow row;
    row.size_bytes = r.size_bytes();
    row.time_us = r.time_us();
    row.algbw_gbps = r.algbw_gbps();
    row.busbw_gbps = r.busbw_gbps();
    set.rows.push_back(row);
  }
  return set;
}

}  // namespace shardsim::formats
