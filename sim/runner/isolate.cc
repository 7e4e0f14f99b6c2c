#include "sim/runner/isolate.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/runner/progress.h"

namespace shardsim {
namespace {

struct Running {
  size_t task;
  int fd;
  std::string out;
};

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

std::vector<absl::StatusOr<std::string>> RunIsolated(
    const std::vector<ChildTask>& tasks, const IsolateOptions& options) {
  using Clock = std::chrono::steady_clock;
  const int jobs = options.jobs;
  const double time_limit_s = options.time_limit_s;
  auto name = [&](size_t task) {
    return task < options.names.size() ? options.names[task] : task;
  };
  // Its destructor erases the line, whichever way this returns.
  std::optional<Progress> progress;
  if (options.progress) progress.emplace();
  const bool ticking = progress && progress->active();
  const Clock::time_point start = Clock::now();
  std::vector<absl::StatusOr<std::string>> results(
      tasks.size(), absl::InternalError("not run"));
  std::map<pid_t, Running> running;
  size_t next = 0, done = 0;
  const pid_t parent = getpid();
  std::fflush(nullptr);  // no buffered output duplicated into children
  while (next < tasks.size() || !running.empty()) {
    while (next < tasks.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0) {
        results[next++] = absl::InternalError("pipe failed");
        continue;
      }
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        // A child dies with its parent, even if the parent died before
        // the request took effect.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        RunChild(tasks[next], fds[1]);
      }
      close(fds[1]);
      if (pid < 0) {
        close(fds[0]);
        results[next++] = absl::InternalError("fork failed");
        continue;
      }
      running[pid] = {next++, fds[0], ""};
    }
    if (running.empty()) break;
    // Wait for output from any child, at most until the time limit.
    int wait_ms = -1;
    if (time_limit_s > 0) {
      const double left =
          time_limit_s -
          std::chrono::duration<double>(Clock::now() - start).count();
      if (left <= 0) {
        const absl::Status over = absl::DeadlineExceededError(absl::StrCat(
            "time limit of ", time_limit_s, " s reached (--time-limit) with ",
            done, " of ", tasks.size(), " simulations done"));
        for (auto& [pid, r] : running) {
          kill(pid, SIGKILL);
          close(r.fd);
          waitpid(pid, nullptr, 0);
          results[r.task] = over;
        }
        for (size_t t = next; t < tasks.size(); ++t) results[t] = over;
        return results;
      }
      wait_ms = static_cast<int>(std::ceil(left * 1000));
    }
    // Wake once a second to redraw the time left.
    if (ticking && (wait_ms < 0 || wait_ms > 1000)) wait_ms = 1000;
    std::vector<pollfd> fds;
    for (const auto& [pid, r] : running) fds.push_back({r.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      for (auto& [pid, r] : running) kill(pid, SIGKILL);
    }
    // Read what is there; a child whose pipe closed has finished.
    size_t i = 0;
    for (auto it = running.begin(); it != running.end(); ++i) {
      Running& r = it->second;
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        ++it;
        continue;
      }
      char buf[65536];
      ssize_t n = read(r.fd, buf, sizeof buf);
      while (n < 0 && errno == EINTR) n = read(r.fd, buf, sizeof buf);
      if (n > 0) {
        r.out.append(buf, static_cast<size_t>(n));
        ++it;
        continue;
      }
      close(r.fd);
      int wstatus = 0;
      waitpid(it->first, &wstatus, 0);
      results[r.task] = Decode(r.out, wstatus, name(r.task));
      ++done;
      it = running.erase(it);
    }
    if (ticking) progress->Update(done, tasks.size());
  }
  return results;
}

}  // namespace shardsim
