// SimGrid keeps one engine per process, so every simulation runs in a child
// process of its own (SIMGRID_NOTES.md: run independent simulations as
// separate processes). The child returns bytes (a serialized proto) or an
// error through a pipe.
#ifndef SHARDSIM_SIM_ENGINE_ISOLATE_H_
#define SHARDSIM_SIM_ENGINE_ISOLATE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardsim {

using ChildTask = std::function<absl::StatusOr<std::string>()>;

// Runs each task in its own child process, at most `jobs` at a time, and
// returns their results in order. A child that crashes gives an error
// naming its task index and signal. Children die with the caller. With a
// `time_limit_s` > 0, the children still running when it is reached are
// killed, and their tasks and those not started fail with
// DeadlineExceeded.
std::vector<absl::StatusOr<std::string>> RunIsolated(
    const std::vector<ChildTask>& tasks, int jobs, double time_limit_s = 0);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_ENGINE_ISOLATE_H_
