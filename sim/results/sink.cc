#include "sim/results/sink.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/results/csv.h"
#include "sim/results/results.h"

namespace shardsim {
namespace {

std::vector<CsvRow> CsvRowsOf(const Results& results) {
  std::vector<CsvRow> rows;
  for (const ResultRow& row : results.rows()) rows.push_back({{}, &row});
  return rows;
}

std::vector<CsvRow> CsvRowsOf(const SearchResults& plan) {
  std::vector<CsvRow> rows;
  for (const auto& [list, entries] :
       {std::pair<const char*,
                  const google::protobuf::RepeatedPtrField<ResultRow>*>{
            "best", &plan.best()},
        {"presets", &plan.presets()},
        {"pruned_presets", &plan.pruned_presets()},
        {"pareto", &plan.pareto()}}) {
    for (const ResultRow& row : *entries)
      rows.push_back({{{"list", list}}, &row});
  }
  return rows;
}

std::vector<CsvRow> CsvRowsOf(const PlanSweep& sweep) {
  std::vector<CsvRow> rows;
  for (const SearchResults& plan : sweep.plans()) {
    for (CsvRow& row : CsvRowsOf(plan)) rows.push_back(std::move(row));
  }
  return rows;
}

void AddCsvRows(const CollectiveResults& results, std::vector<CsvRow>* rows) {
  for (const CollectiveRow& row : results.rows()) {
    rows->push_back({{{"platform", results.platform()},
                      {"op", CollectiveOp_Name(results.op())},
                      {"algorithm", Algorithm_Name(results.algorithm())},
                      {"gpus", absl::StrCat(results.gpus())},
                      {"channels", absl::StrCat(results.channels())}},
                     &row});
  }
}

std::vector<CsvRow> CsvRowsOf(const CollectiveResults& results) {
  std::vector<CsvRow> rows;
  AddCsvRows(results, &rows);
  return rows;
}

std::vector<CsvRow> CsvRowsOf(const CollectiveBenchmark& benchmark) {
  std::vector<CsvRow> rows;
  for (const CollectiveResults& run : benchmark.runs()) AddCsvRows(run, &rows);
  return rows;
}

template <typename R>
absl::Status EmitAny(const std::string& table, const R& results,
                     const OutputFiles& files) {
  std::fputs(table.c_str(), stdout);
  std::fflush(stdout);
  if (!files.json.empty()) {
    if (absl::Status s = WriteJson(results, files.json); !s.ok()) return s;
  }
  if (!files.csv.empty()) return WriteCsv(CsvRowsOf(results), files.csv);
  return absl::OkStatus();
}

}  // namespace

absl::Status Emit(const std::string& table, const Results& results,
                  const OutputFiles& files) {
  return EmitAny(table, results, files);
}
absl::Status Emit(const std::string& table, const SearchResults& results,
                  const OutputFiles& files) {
  return EmitAny(table, results, files);
}
absl::Status Emit(const std::string& table, const PlanSweep& results,
                  const OutputFiles& files) {
  return EmitAny(table, results, files);
}
absl::Status Emit(const std::string& table, const CollectiveResults& results,
                  const OutputFiles& files) {
  return EmitAny(table, results, files);
}
absl::Status Emit(const std::string& table, const CollectiveBenchmark& results,
                  const OutputFiles& files) {
  return EmitAny(table, results, files);
}

}  // namespace shardsim
