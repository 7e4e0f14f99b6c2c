// nccl-tests' text table: "#  Rank" lines count the GPUs, the
// "Collective test starting" line names the op, then one line per size with
// the out-of-place and in-place times, and the average bus bandwidth.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "validate/formats.h"

namespace shardsim::formats {

absl::StatusOr<MeasurementSet> ParseNcclTestsText(const std::string& path,
                                                  const std::string& text) {
  MeasurementSet set;
  set.file = path;
  set.format = "nccl-tests";
  int ranks = 0;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    auto err = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": ", what, ": \"", line, "\""));
    };
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (line[0] == '#') {
      absl::string_view body = absl::StripAsciiWhitespace(line.substr(1));
      if (absl::StartsWith(body, "Rank ")) {
        ++ranks;
      } else if (absl::ConsumePrefix(&body, "Collective test starting:")) {
        const CollectiveOp op = GuessOp(std::string(body));
        if (op != OP_UNSPECIFIED) set.op = op;
      } else if (absl::ConsumePrefix(&body, "Avg bus bandwidth")) {
        body = absl::StripAsciiWhitespace(body);
        if (!absl::ConsumePrefix(&body, ":")) return err("bad footer");
        std::vector<std::string> parts =
            absl::StrSplit(body, ' ', absl::SkipWhitespace());
        double bw;
        if (parts.empty() || !absl::SimpleAtod(parts[0], &bw)) {
          return err("bad average bus bandwidth");
        }
        set.avg_busbw_gbps = bw;
      }
      continue;
    }
    // NCCL_DEBUG lines and MPI chatter interleave with the table.
    if (absl::StrContains(line, "NCCL INFO") ||
        absl::StrContains(line, "NCCL WARN")) {
      continue;
    }
    std::vector<std::string> t =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    // size count type [redop [root]] time algbw busbw #wrong time algbw
    // busbw #wrong: 11 (2.x before redop/root), 12 or 13 columns.
    if (t.size() < 11 || t.size() > 13) {
      return err(
          absl::StrCat("expected 11 to 13 columns (size count type "
                       "[redop root] then time algbw busbw #wrong "
                       "out-of-place and in-place), got ",
                       t.size()));
    }
    int64_t size;
    if (!absl::SimpleAtoi(t[0], &size)) return err("size is not an integer");
    const size_t first = t.size() - 8;
    for (int place = 0; place < 2; ++place) {
      MeasurementRow r;
      r.size_bytes = size;
      r.in_place = place == 1;
      const size_t c = first + 4 * place;
      if (!absl::SimpleAtod(t[c], &r.time_us) ||
          !absl::SimpleAtod(t[c + 1], &r.algbw_gbps) ||
          !absl::SimpleAtod(t[c + 2], &r.busbw_gbps)) {
        return err(absl::StrCat(r.in_place ? "in-place" : "out-of-place",
                                " time/algbw/busbw are not numbers"));
      }
      int64_t wrong = 0;
      if (t[c + 3] != "N/A" && absl::SimpleAtoi(t[c + 3], &wrong) &&
          wrong > 0) {
        return err(
            absl::StrCat(wrong, " wrong elements: not a valid measurement"));
      }
      set.rows.push_back(r);
    }
  }
  set.gpus = ranks;
  return set;
}

}  // namespace shardsim::formats
