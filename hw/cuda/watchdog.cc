#include "hw/cuda/watchdog.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardsim::hw {

Watchdog::Watchdog(int rank, double timeout_s,
                   std::function<void()> abort_all,
                   std::function<std::string()> async_error)
    : rank_(rank),
      timeout_s_(timeout_s),
      abort_all_(std::move(abort_all)),
      async_error_(std::move(async_error)),
      thread_([this] { Loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Arm() {
  std::lock_guard<std::mutex> l(mu_);
  if (depth_++ == 0) armed_at_ = Clock::now();
}

void Watchdog::Disarm() {
  std::lock_guard<std::mutex> l(mu_);
  if (depth_ > 0) --depth_;
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(200));
    if (stop_ || depth_ == 0) continue;
    const double idle =
        std::chrono::duration<double>(Clock::now() - armed_at_).count();
    const std::string error = async_error_();
    if (error.empty() && idle <= timeout_s_) continue;
    std::string why =
        error.empty()
            ? absl::StrCat("rank ", rank_, ": watchdog: no progress for ",
                           timeout_s_, " s, communicators aborted")
            : absl::StrCat("rank ", rank_, ": watchdog: NCCL error (", error,
                           "), communicators aborted");
    abort_all_();
    std::fprintf(stderr, "%s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(3);
  }
}

}  // namespace shardsim::hw
