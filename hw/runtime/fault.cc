#include "hw/runtime/fault.h"

#include <csignal>
#include <cstdio>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardsim::hw {

absl::StatusOr<Fault> ParseFault(absl::string_view spec, int world) {
  Fault f;
  if (spec.empty()) return f;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fault: \"", spec, "\": ", why));
  };
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  if (parts.size() != 3) return bad("expected KIND:RANK:N");
  if (parts[0] == "skip") {
    f.kind = Fault::kSkip;
  } else if (parts[0] == "die") {
    f.kind = Fault::kDie;
  } else if (parts[0] == "corrupt") {
    f.kind = Fault::kCorrupt;
  } else {
    return bad(
        absl::StrCat("unknown kind \"", parts[0], "\" (skip, die or corrupt)"));
  }
  if (!absl::SimpleAtoi(parts[1], &f.rank) || f.rank < 0 || f.rank >= world) {
    return bad(
        absl::StrCat("RANK must be a rank of the world, 0..", world - 1));
  }
  if (!absl::SimpleAtoi(parts[2], &f.run) || f.run < 1) {
    return bad("N must be a collective run number >= 1");
  }
  f.spec = std::string(spec);
  return f;
}

FaultInjector::FaultInjector(const Fault& fault, int rank) {
  if (fault.rank == rank) fault_ = fault;
}

bool FaultInjector::SkipThisRun() {
  if (fault_.kind == Fault::kNone || ++runs_ != fault_.run) return false;
  const bool skip = fault_.kind == Fault::kSkip;
  const bool corrupt = fault_.kind == Fault::kCorrupt;
  std::fprintf(stderr,
               "shardsim-hw: fault injection (--fault %s): rank %d %s its "
               "collective run %lld\n",
               fault_.spec.c_str(), fault_.rank,
               skip      ? "skips"
               : corrupt ? "adds one to every element of the result of"
                         : "raises SIGKILL before",
               static_cast<long long>(runs_));
  std::fflush(stderr);
  if (skip) return true;
  if (corrupt) {
    corrupt_ = true;
    return false;
  }
  std::raise(SIGKILL);
  return false;  // not reached
}

bool FaultInjector::CorruptThisRun() {
  const bool c = corrupt_;
  corrupt_ = false;
  return c;
}

}  // namespace shardsim::hw
