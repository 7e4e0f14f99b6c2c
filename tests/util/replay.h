// A step replayed by the engine in a child process (one SimGrid engine per
// process), for tests that read each op's simulated times.
#ifndef SHARDSIM_TESTS_UTIL_REPLAY_H_
#define SHARDSIM_TESTS_UTIL_REPLAY_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/group.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/results.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {
namespace test {

// Each op's start and end (by op id), the breakdown and the step time.
struct Replayed {
  std::vector<std::pair<double, double>> ops;
  Breakdown breakdown;
  double step = 0;
  StepReplay replay;  // how it was replayed
};

// `schedule` replayed on `platform` over `mesh` in fast mode, or the
// replay's error. `every_class`: the dominated classes of degraded GPUs
// replayed too (sim/engine/degraded.h); `collapse`: ReplayStep's;
// `symmetry` false: every node's flows run (no node or network symmetry).
// A folded step (sim/schedule/periodic.h) is replayed as the engine reads
// it, through its fold.
absl::StatusOr<Replayed> ReplayOrError(
    const StepOps& step, const Platform& platform, const Mesh& mesh,
    bool every_class = false, bool collapse = true, bool symmetry = true);
inline absl::StatusOr<Replayed> ReplayOrError(
    const Schedule& schedule, const Platform& platform, const Mesh& mesh,
    bool every_class = false, bool collapse = true, bool symmetry = true) {
  return ReplayOrError(StepOps(schedule), platform, mesh, every_class, collapse,
                       symmetry);
}

// The same, a failure a test failure (and an empty result).
Replayed Replay(const StepOps& step, const Platform& platform, const Mesh& mesh,
                bool every_class = false, bool collapse = true,
                bool symmetry = true);
inline Replayed Replay(const Schedule& schedule, const Platform& platform,
                       const Mesh& mesh, bool every_class = false,
                       bool collapse = true, bool symmetry = true) {
  return Replay(StepOps(schedule), platform, mesh, every_class, collapse,
                symmetry);
}

}  // namespace test
}  // namespace shardsim

#endif  // SHARDSIM_TESTS_UTIL_REPLAY_H_
