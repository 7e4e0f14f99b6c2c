#include "hw/runtime/watchdog.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardsim::hw {

Watchdog::Watchdog(int rank, double timeout_s, Hooks hooks)
    : rank_(rank),
      timeout_s_(timeout_s),
      hooks_(std::move(hooks)),
      thread_([this] { Loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Arm(std::string_view what) {
  std::lock_guard<std::mutex> l(mu_);
  if (depth_++ == 0) {
    armed_at_ = Clock::now();
    what_.assign(what);
  }
}

void Watchdog::Disarm() {
  std::lock_guard<std::mutex> l(mu_);
  if (depth_ > 0) --depth_;
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(200));
    if (stop_) break;
    const std::string error = hooks_.async_error ? hooks_.async_error() : "";
    const std::string waiting =
        depth_ > 0 ? absl::StrCat(" waiting on ", what_) : "";
    if (!error.empty()) {
      Fire(absl::StrCat("NCCL error (", error, ")", waiting));
    }
    if (depth_ == 0) continue;
    const double idle =
        std::chrono::duration<double>(Clock::now() - armed_at_).count();
    if (idle > timeout_s_) {
      Fire(absl::StrCat("no progress for ", timeout_s_, " s", waiting,
                        " (--watchdog-s)"));
    }
  }
}

void Watchdog::Fire(const std::string& why) {
  std::fprintf(stderr,
               "shardsim-hw: error: rank %d: watchdog: %s; aborting every "
               "rank\n",
               rank_, why.c_str());
  std::fflush(stderr);
  if (hooks_.abort_all) hooks_.abort_all();
  // The last resort, should MPI_Abort hang.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(3);
  }).detach();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

}  // namespace shardsim::hw
