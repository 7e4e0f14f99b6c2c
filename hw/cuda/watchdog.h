// The CUDA backend's watchdog: a thread that aborts every communicator and
// exits the process when an armed wait makes no progress for too long, or
// when NCCL reports an asynchronous error.
#ifndef SHARDSIM_HW_CUDA_WATCHDOG_H_
#define SHARDSIM_HW_CUDA_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace shardsim::hw {

// Aborts every communicator (abort_all) and exits (status 3) when an armed
// wait makes no progress for `timeout_s`, or when async_error() returns a
// non-empty NCCL error. Arm / Disarm nest.
class Watchdog {
 public:
  Watchdog(int rank, double timeout_s, std::function<void()> abort_all,
           std::function<std::string()> async_error);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void Arm();
  void Disarm();

 private:
  using Clock = std::chrono::steady_clock;

  void Loop();

  const int rank_;
  const double timeout_s_;
  std::function<void()> abort_all_;
  std::function<std::string()> async_error_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int depth_ = 0;
  Clock::time_point armed_at_;
  std::thread thread_;  // last: starts after the members above exist
};

// Arms a watchdog for the scope's lifetime.
class ArmScope {
 public:
  explicit ArmScope(Watchdog* w) : w_(w) { w_->Arm(); }
  ~ArmScope() { w_->Disarm(); }
  ArmScope(const ArmScope&) = delete;
  ArmScope& operator=(const ArmScope&) = delete;

 private:
  Watchdog* w_;
};

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_CUDA_WATCHDOG_H_
