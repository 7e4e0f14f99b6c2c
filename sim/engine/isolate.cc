#include "sim/engine/isolate.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"

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
    WriteAll(fd, absl::StrCat("E", std::string(1, static_cast<char>(
                                                      r.status().code())),
                              r.status().message()));
  }
  close(fd);
  std::fflush(nullptr);
  _exit(0);
}

absl::StatusOr<std::string> Decode(const std::string& out, int wstatus,
                                   size_t task) {
  if (WIFSIGNALED(wstatus)) {
    return absl::InternalError(absl::StrCat("simulation ", task,
                                            " crashed with signal ",
                                            WTERMSIG(wstatus)));
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
    const std::vector<ChildTask>& tasks, int jobs) {
  std::vector<absl::StatusOr<std::string>> results(
      tasks.size(), absl::InternalError("not run"));
  std::map<pid_t, Running> running;
  size_t next = 0;
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
    // Drain every running child's pipe, then reap whichever has finished.
    // Children write their result only at exit, so reading one pipe to EOF
    // at a time is enough.
    auto it = running.begin();
    Running& r = it->second;
    char buf[65536];
    ssize_t n;
    while ((n = read(r.fd, buf, sizeof buf)) != 0) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      r.out.append(buf, static_cast<size_t>(n));
    }
    close(r.fd);
    int wstatus = 0;
    waitpid(it->first, &wstatus, 0);
    results[r.task] = Decode(r.out, wstatus, r.task);
    running.erase(it);
  }
  return results;
}

}  // namespace shardsim
