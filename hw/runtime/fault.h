// Fault injection, a testing aid for shardsim-hw's failure paths
// (tests/hw_fault_test.sh), from `--fault SPEC`:
//   skip:R:N  rank R silently skips its N-th collective run: the others wait
//             on a collective that never completes (the watchdog's case);
//   die:R:N   rank R raises SIGKILL on itself just before its N-th
//             collective run: the others lose a peer mid-collective;
//   corrupt:R:N  rank R adds one to every element of its N-th collective
//             run's result (CPU transport): wrong values its data check
//             must report.
// A collective run is one execution of a collective by a backend: one op of
// a replayed step, one checked run, one warm-up or timed run of
// `collective`; N counts them from 1 over the process's life.
#ifndef SHARDSIM_HW_RUNTIME_FAULT_H_
#define SHARDSIM_HW_RUNTIME_FAULT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardsim::hw {

struct Fault {
  enum Kind { kNone, kSkip, kDie, kCorrupt };
  Kind kind = kNone;
  int rank = -1;
  int64_t run = 0;   // the N-th collective run, from 1
  std::string spec;  // as given, for messages
};

// "" is no fault. Errors name --fault and the value: a kind other than skip,
// die or corrupt, a rank outside [0, world), N < 1, anything malformed.
absl::StatusOr<Fault> ParseFault(absl::string_view spec, int world);

// What a backend consults before each collective run (one call, so the
// backends hold no fault logic).
class FaultInjector {
 public:
  FaultInjector() = default;
  FaultInjector(const Fault& fault, int rank);

  // True when this run is to be skipped: the caller returns as if it had
  // completed. On the die run, prints what it does and raises SIGKILL.
  bool SkipThisRun();

  // After a run: true once, when that run is the one to corrupt.
  bool CorruptThisRun();

 private:
  Fault fault_;
  int64_t runs_ = 0;
  bool corrupt_ = false;
};

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_RUNTIME_FAULT_H_
