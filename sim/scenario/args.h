// Command-line helpers shared by shardsim (sim/cli) and shardsim-hw (hw/):
// dashed flag spellings, enum and byte-count flag values. Header-only and
// free of Abseil flags, so the core library does not depend on them; the
// flags both binaries share are defined once in sim/scenario/flags.h
// (the shardsim_flags library, outside the core).
#ifndef SHARDSIM_SIM_SCENARIO_ARGS_H_
#define SHARDSIM_SIM_SCENARIO_ARGS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/schema/limits.h"

namespace shardsim {

// Abseil flag names are identifiers; accept the dashed spellings too:
// "--micro-batch-size=4" becomes "--micro_batch_size=4". The rewritten
// arguments live in `keep`; the returned pointers point into it. Where
// `names` is given, it gets the (rewritten) name of every "--" argument.
inline std::vector<char*> Undash(int argc, char** argv,
                                 std::vector<std::string>* keep,
                                 std::vector<std::string>* names = nullptr) {
  keep->reserve(argc);
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      const size_t end = std::min(arg.find('='), arg.size());
      for (size_t k = 2; k < end; ++k) {
        if (arg[k] == '-') arg[k] = '_';
      }
      if (names != nullptr) names->push_back(arg.substr(2, end - 2));
    }
    keep->push_back(std::move(arg));
  }
  std::vector<char*> out;
  for (std::string& s : *keep) out.push_back(s.data());
  return out;
}

// A protobuf enum value by name, any case; the UNSPECIFIED (0) value is
// refused. `parse` is the generated Enum_Parse.
template <typename Enum>
absl::StatusOr<Enum> ParseEnum(const char* flag, const std::string& text,
                               bool (*parse)(const std::string&, Enum*)) {
  Enum value;
  if (!parse(absl::AsciiStrToUpper(text), &value) ||
      static_cast<int>(value) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": unknown value \"", text, "\""));
  }
  return value;
}

// A byte count in [1, limits::kMaxCollectiveBytes] ("1048576", "1e6").
inline absl::StatusOr<int64_t> ParseBytes(const char* flag,
                                          const std::string& text) {
  double value;
  if (!absl::SimpleAtod(text, &value) || !(value >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": \"", text, "\" is not a byte count"));
  }
  // Checked before the cast: a double beyond int64 does not convert.
  if (value > static_cast<double>(limits::kMaxCollectiveBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", text, " bytes is beyond the limit of ",
                     limits::kMaxCollectiveBytes, " (1 TiB)"));
  }
  return static_cast<int64_t>(value);
}

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCENARIO_ARGS_H_
