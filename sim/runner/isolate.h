// SimGrid keeps one engine per process, so every simulation runs in a child
// process of its own (docs/engine.md §5: run independent simulations as
// separate processes). The child returns bytes (a serialized proto) or an
// error through a pipe.
#ifndef SHARDSIM_SIM_RUNNER_ISOLATE_H_
#define SHARDSIM_SIM_RUNNER_ISOLATE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardsim {

using ChildTask = std::function<absl::StatusOr<std::string>()>;

struct IsolateOptions {
  int jobs = 1;             // children at once
  double time_limit_s = 0;  // > 0: see RunIsolated
  // The number each task goes by in errors ("simulation 7 crashed ...");
  // empty: its index. A rank of a distributed sweep (distribute.h) runs
  // some of the points and names them by their index in the whole sweep,
  // so that its errors read as the serial run's.
  std::vector<size_t> names;
  // A line on stderr with the tasks done and the time left, redrawn as
  // they finish, when stderr is a terminal and the run has taken 2 s
  // (progress.h); erased before RunIsolated returns.
  bool progress = false;
};

// Children running tasks, at most `jobs` at once, whose results come back as
// they end: RunIsolated's, and `shardsim plan`'s, which starts its next
// points while the last of a wave still run (sim/search/search.cc). A
// child dies with the caller, and with the pool: those still running when
// it is destroyed are killed.
class ChildPool {
 public:
  explicit ChildPool(int jobs);
  ~ChildPool();
  ChildPool(const ChildPool&) = delete;
  ChildPool& operator=(const ChildPool&) = delete;

  bool full() const { return static_cast<int>(running_.size()) >= jobs_; }
  bool empty() const { return running_.empty(); }
  // The ids of the children running, in no particular order.
  std::vector<size_t> running() const;

  // Forks a child that runs `task`; call it only while not full(). Its
  // result comes back under `id`; a crash is an error naming it
  // "simulation `name`". Errors: the pipe or the fork failed.
  absl::Status Start(size_t id, size_t name, const ChildTask& task);
  // Waits until a child ends, for at most `wait_ms` (-1: as long as it
  // takes), and returns its id and result; nullopt if none ended by then
  // or none runs.
  std::optional<std::pair<size_t, absl::StatusOr<std::string>>> Wait(
      int wait_ms);
  // Kills the child running `id`, if any; its result never comes.
  void Kill(size_t id);

 private:
  struct Child {
    size_t id;
    size_t name;
    int fd;
    std::string out;
  };
  const int jobs_;
  const int parent_;              // our pid, which a child checks it still has
  std::map<int, Child> running_;  // by pid
};

// Runs each task in its own child process, at most `jobs` at a time, and
// returns their results in order. A child that crashes gives an error
// naming its task and signal. Children die with the caller. With a
// `time_limit_s` > 0, the children still running when it is reached are
// killed, and their tasks and those not started fail with
// DeadlineExceeded.
std::vector<absl::StatusOr<std::string>> RunIsolated(
    const std::vector<ChildTask>& tasks, const IsolateOptions& options);

inline std::vector<absl::StatusOr<std::string>> RunIsolated(
    const std::vector<ChildTask>& tasks, int jobs, double time_limit_s = 0) {
  IsolateOptions options;
  options.jobs = jobs;
  options.time_limit_s = time_limit_s;
  return RunIsolated(tasks, options);
}

// What runs a sweep's tasks: RunIsolated, or a distributed runner that
// returns the same results in the same order (distribute.h).
using TaskRunner = std::function<std::vector<absl::StatusOr<std::string>>(
    const std::vector<ChildTask>&, const IsolateOptions&)>;

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RUNNER_ISOLATE_H_
