// "Did you mean": the known name closest to a misspelt one, for errors
// about strategy, model, platform, flag, field and config-key names.
#ifndef SHARDSIM_SIM_BASE_DID_YOU_MEAN_H_
#define SHARDSIM_SIM_BASE_DID_YOU_MEAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardsim {

// The name in `known` nearest to `word` by edit distance (insertions,
// deletions, substitutions and swaps of neighbours, case ignored), if it
// is close enough to be a typo: at most max(2, |word| / 3) edits. Ties go
// to the earlier name in `known`.
std::optional<std::string> ClosestName(absl::string_view word,
                                       const std::vector<std::string>& known);

// " (did you mean \"NAME\"?)" for ClosestName's answer, naming every
// name as near (up to three: " (did you mean \"zero1\", \"zero2\" or
// \"zero3\"?)"), or "" when none is near or too many are, to append to
// an error message.
std::string DidYouMean(absl::string_view word,
                       const std::vector<std::string>& known);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_BASE_DID_YOU_MEAN_H_
