// Results as CSV, for spreadsheets and pandas: one header line, then one
// line per point. The columns are the JSON's fields (results.h, ToJson)
// under the same names, units in the names (_bytes, _s, _per_s): nested
// messages flattened with "." (breakdown.compute_s), a list inside a row
// (its traffic entries) as its JSON text in one cell. A field no row sets
// has no column; a row that leaves a set field unset has an empty cell.
#ifndef SHARDSIM_SIM_RESULTS_CSV_H_
#define SHARDSIM_SIM_RESULTS_CSV_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace shardsim {

// One line of the file: leading columns that place the row (the list of a
// plan it is in; the collective sweep it belongs to), then the row's own.
struct CsvRow {
  std::vector<std::pair<std::string, std::string>> leading;
  const google::protobuf::Message* row = nullptr;
};

absl::StatusOr<std::string> ToCsv(const std::vector<CsvRow>& rows);
absl::Status WriteCsv(const std::vector<CsvRow>& rows, const std::string& path);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RESULTS_CSV_H_
