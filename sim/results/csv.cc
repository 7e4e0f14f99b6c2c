#include "sim/results/csv.h"

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "sim/results/results.h"

namespace shardsim {
namespace {

using Json = nlohmann::ordered_json;

// RFC 4180: a cell with a comma, a quote or a line break is quoted, its
// quotes doubled.
std::string Cell(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// The JSON object's leaves as (column, text): strings as they are (int64
// fields among them: protobuf's JSON writes them as strings), numbers and
// booleans as JSON writes them, lists as JSON text.
void Flatten(const Json& value, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>* cells) {
  for (const auto& [key, v] : value.items()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (v.is_object()) {
      Flatten(v, name, cells);
    } else if (v.is_string()) {
      cells->emplace_back(name, v.get<std::string>());
    } else {
      cells->emplace_back(name, v.dump());
    }
  }
}

}  // namespace

absl::StatusOr<std::string> ToCsv(const std::vector<CsvRow>& rows) {
  std::vector<std::string> columns;
  std::map<std::string, size_t> index;
  std::vector<std::map<std::string, std::string>> lines;
  for (const CsvRow& row : rows) {
    absl::StatusOr<std::string> json = ToJson(*row.row, /*whitespace=*/false);
    if (!json.ok()) return json.status();
    std::vector<std::pair<std::string, std::string>> cells = row.leading;
    Flatten(Json::parse(*json), "", &cells);
    std::map<std::string, std::string> line;
    for (auto& [name, text] : cells) {
      if (index.emplace(name, columns.size()).second) columns.push_back(name);
      line[name] = std::move(text);
    }
    lines.push_back(std::move(line));
  }
  std::string out;
  absl::StrAppend(&out,
                  absl::StrJoin(columns, ",",
                                [](std::string* o, const std::string& c) {
                                  o->append(Cell(c));
                                }),
                  "\n");
  for (const auto& line : lines) {
    std::vector<std::string> cells;
    for (const std::string& column : columns) {
      auto it = line.find(column);
      cells.push_back(it == line.end() ? "" : Cell(it->second));
    }
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

absl::Status WriteCsv(const std::vector<CsvRow>& rows,
                      const std::string& path) {
  absl::StatusOr<std::string> csv = ToCsv(rows);
  if (!csv.ok()) return csv.status();
  std::ofstream out(path);
  if (!out)
    return absl::InvalidArgumentError(
        absl::StrCat("--csv ", path, ": cannot write"));
  out << *csv;
  out.close();
  if (!out)
    return absl::InvalidArgumentError(
        absl::StrCat("--csv ", path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace shardsim
