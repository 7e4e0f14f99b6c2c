#include "sim/base/did_you_mean.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardsim {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without
// repeated edits of one substring): a swapped pair of letters, the
// commonest typo, is one edit.
int EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::optional<std::string> ClosestName(absl::string_view word,
                                       const std::vector<std::string>& known) {
  const std::string w = absl::AsciiStrToLower(word);
  const int limit = std::max<int>(2, static_cast<int>(w.size()) / 3);
  std::optional<std::string> best;
  int best_distance = limit + 1;
  for (const std::string& name : known) {
    const int d = EditDistance(w, absl::AsciiStrToLower(name));
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

std::string DidYouMean(absl::string_view word,
                       const std::vector<std::string>& known) {
  const std::optional<std::string> best = ClosestName(word, known);
  if (!best.has_value()) return "";
  // Every name as near as the nearest: "zero4" is as near zero1 as zero3.
  const std::string w = absl::AsciiStrToLower(word);
  const int d = EditDistance(w, absl::AsciiStrToLower(*best));
  std::vector<std::string> tied;
  for (const std::string& name : known) {
    if (EditDistance(w, absl::AsciiStrToLower(name)) == d) {
      tied.push_back(absl::StrCat("\"", name, "\""));
    }
  }
  if (tied.size() > 3) return "";  // too many to be a hint
  if (tied.size() == 1) return absl::StrCat(" (did you mean ", tied[0], "?)");
  const std::string last = tied.back();
  tied.pop_back();
  return absl::StrCat(" (did you mean ", absl::StrJoin(tied, ", "), " or ",
                      last, "?)");
}

}  // namespace shardsim
