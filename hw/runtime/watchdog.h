// A rank's watchdog: a thread that ends the whole job when this rank is
// stuck, so that no failure leaves a hung mpirun behind.
//
// Both backends arm it around every blocking wait (a collective, a barrier,
// a stream synchronize). When an armed wait has not returned after
// `timeout_s`, or when `async_error` reports an error (NCCL's asynchronous
// errors), it prints
//   shardsim-hw: error: rank R: watchdog: no progress for T s waiting on WHAT
// runs `abort_all` (the CUDA backend aborts its NCCL communicators, so no
// kernel spins on), and MPI_Aborts every rank with exit code 3.
//
// MPI_Abort from this thread is outside what MPI_THREAD_SINGLE promises;
// Open MPI 4.1 handles it (the abort goes out through PMIx's own thread).
// Should it hang elsewhere, the process _Exits(3) 10 s later, and mpirun
// ends the job when a rank exits non-zero.
#ifndef SHARDSIM_HW_RUNTIME_WATCHDOG_H_
#define SHARDSIM_HW_RUNTIME_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace shardsim::hw {

class Watchdog {
 public:
  struct Hooks {
    // Before the job is aborted: releases what would keep this process
    // from exiting (e.g. ncclCommAbort). May be empty.
    std::function<void()> abort_all;
    // Polled every 200 ms, armed or not: a non-empty result is fatal.
    std::function<std::string()> async_error;
  };

  Watchdog(int rank, double timeout_s, Hooks hooks = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Arm / Disarm nest; the clock and `what` (said when it fires) are the
  // outermost Arm's.
  void Arm(std::string_view what);
  void Disarm();

  double timeout_s() const { return timeout_s_; }

 private:
  using Clock = std::chrono::steady_clock;

  void Loop();
  [[noreturn]] void Fire(const std::string& why);

  const int rank_;
  const double timeout_s_;
  const Hooks hooks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int depth_ = 0;
  std::string what_;
  Clock::time_point armed_at_;
  std::thread thread_;  // last: starts after the members above exist
};

// Arms a watchdog for the scope's lifetime.
class ArmScope {
 public:
  ArmScope(Watchdog* w, std::string_view what) : w_(w) { w_->Arm(what); }
  ~ArmScope() { w_->Disarm(); }
  ArmScope(const ArmScope&) = delete;
  ArmScope& operator=(const ArmScope&) = delete;

 private:
  Watchdog* w_;
};

}  // namespace shardsim::hw

#endif  // SHARDSIM_HW_RUNTIME_WATCHDOG_H_
