#include "sim/runner/isolate.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/runner/progress.h"

namespace shardsim {
namespace {

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Child side: 'O' + payload, or 'E' + code byte + message.
[[noreturn]] void RunChild(const ChildTask& task, int fd) {
  absl::StatusOr<std::string> r = task();
  if (r.ok()) {
    WriteAll(fd, "O" + *r);
  } else {
    WriteAll(fd, absl::StrCat(
                     "E", std::string(1, static_cast<char>(r.status().code())),
                     r.status().message()));
  }
  close(fd);
  std::fflush(nullptr);
  _exit(0);
}

absl::StatusOr<std::string> Decode(const std::string& out, int wstatus,
                                   size_t task) {
  if (WIFSIGNALED(wstatus)) {
    return absl::InternalError(absl::StrCat(
        "simulation ", task, " crashed with signal ", WTERMSIG(wstatus)));
  }
  if (out.empty()) {
    return absl::InternalError(
        absl::StrCat("simulation ", task, " exited without a result"));
  }
  if (out[0] == 'O') return out.substr(1);
  if (out.size() < 2) return absl::InternalError("malformed child error");
  return absl::Status(static_cast<absl::StatusCode>(out[1]), out.substr(2));
}

}  // namespace

ChildPool::ChildPool(int jobs) : jobs_(jobs), parent_(getpid()) {}

ChildPool::~ChildPool() {
  for (const size_t id : running()) Kill(id);
}

std::vector<size_t> ChildPool::running() const {
  std::vector<size_t> ids;
  for (const auto& [pid, c] : running_) ids.push_back(c.id);
  return ids;
}

absl::Status ChildPool::Start(size_t id, size_t name, const ChildTask& task) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  std::fflush(nullptr);  // no buffered output duplicated into the child
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    // A child dies with its parent, even if the parent died before the
    // request took effect.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent_) _exit(1);
    RunChild(task, fds[1]);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return absl::InternalError("fork failed");
  }
  running_[pid] = {id, name, fds[0], ""};
  return absl::OkStatus();
}

std::optional<std::pair<size_t, absl::StatusOr<std::string>>> ChildPool::Wait(
    int wait_ms) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until =
      Clock::now() + std::chrono::milliseconds(std::max(0, wait_ms));
  while (!running_.empty()) {
    int ms = -1;
    if (wait_ms >= 0) {
      ms = static_cast<int>(std::ceil(
          std::chrono::duration<double, std::milli>(until - Clock::now())
              .count()));
      if (ms < 0) return std::nullopt;
    }
    std::vector<pollfd> fds;
    for (const auto& [pid, c] : running_) fds.push_back({c.fd, POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), ms);
    if (ready < 0 && errno != EINTR) {
      for (const auto& [pid, c] : running_) kill(pid, SIGKILL);
    }
    if (ready == 0) return std::nullopt;
    // Read what is there; a child whose pipe closed has finished.
    size_t i = 0;
    for (auto it = running_.begin(); it != running_.end(); ++it, ++i) {
      Child& c = it->second;
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[65536];
      ssize_t n = read(c.fd, buf, sizeof buf);
      while (n < 0 && errno == EINTR) n = read(c.fd, buf, sizeof buf);
      if (n > 0) {
        c.out.append(buf, static_cast<size_t>(n));
        continue;
      }
      close(c.fd);
      int wstatus = 0;
      waitpid(it->first, &wstatus, 0);
      std::pair<size_t, absl::StatusOr<std::string>> done(
          c.id, Decode(c.out, wstatus, c.name));
      running_.erase(it);
      return done;
    }
  }
  return std::nullopt;
}

void ChildPool::Kill(size_t id) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->second.id != id) continue;
    kill(it->first, SIGKILL);
    close(it->second.fd);
    waitpid(it->first, nullptr, 0);
    running_.erase(it);
    return;
  }
}

std::vector<absl::StatusOr<std::string>> RunIsolated(
    const std::vector<ChildTask>& tasks, const IsolateOptions& options) {
  using Clock = std::chrono::steady_clock;
  const double time_limit_s = options.time_limit_s;
  auto name = [&](size_t task) {
    return task < options.names.size() ? options.names[task] : task;
  };
  // Its destructor erases the line, whichever way this returns.
  std::optional<Progress> progress;
  if (options.progress) progress.emplace();
  const bool ticking = progress.has_value();
  const Clock::time_point start = Clock::now();
  std::vector<absl::StatusOr<std::string>> results(
      tasks.size(), absl::InternalError("not run"));
  ChildPool pool(options.jobs);
  size_t next = 0, done = 0;
  while (next < tasks.size() || !pool.empty()) {
    for (; next < tasks.size() && !pool.full(); ++next) {
      if (absl::Status s = pool.Start(next, name(next), tasks[next]); !s.ok()) {
        results[next] = s;
      }
    }
    if (pool.empty()) break;
    // Wait for a child to end, at most until the time limit.
    int wait_ms = -1;
    if (time_limit_s > 0) {
      const double left =
          time_limit_s -
          std::chrono::duration<double>(Clock::now() - start).count();
      if (left <= 0) {
        const absl::Status over = absl::DeadlineExceededError(absl::StrCat(
            "time limit of ", time_limit_s, " s reached (--time-limit) with ",
            done, " of ", tasks.size(), " simulations done"));
        for (const size_t t : pool.running()) results[t] = over;
        for (size_t t = next; t < tasks.size(); ++t) results[t] = over;
        return results;  // the pool kills the children still running
      }
      wait_ms = static_cast<int>(std::ceil(left * 1000));
    }
    // Wake once a second to redraw the time left.
    if (ticking && (wait_ms < 0 || wait_ms > 1000)) wait_ms = 1000;
    if (auto ended = pool.Wait(wait_ms)) {
      results[ended->first] = std::move(ended->second);
      ++done;
    }
    if (ticking) progress->Update(done, tasks.size());
  }
  return results;
}

}  // namespace shardsim
