#include "sim/runner/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardsim {
namespace {

// Sweeps shorter than this print nothing.
constexpr double kQuietS = 2;

std::string MinutesSeconds(double s) {
  const long t = std::lround(s);
  if (t >= 3600) {
    return absl::StrFormat("%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  }
  return absl::StrFormat("%d:%02d", t / 60, t % 60);
}

}  // namespace

Progress::Progress() : start_(Clock::now()), tty_(isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { Clear(); }

double Progress::Elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Progress::Update(size_t done, size_t total) {
  if (done >= total) return;
  const double elapsed = Elapsed();
  if (elapsed < kQuietS) return;
  std::string line = absl::StrFormat("  %d/%d points", done, total);
  if (done > 0) {
    const double left =
        elapsed / static_cast<double>(done) * static_cast<double>(total - done);
    absl::StrAppend(&line, ", ", MinutesSeconds(left), " left");
  }
  Draw(line);
}

void Progress::Show(const std::string& what) {
  const double elapsed = Elapsed();
  if (elapsed < kQuietS) return;
  Draw(absl::StrCat("  ", what, ", ", MinutesSeconds(elapsed), " elapsed"));
}

void Progress::Draw(const std::string& line) {
  if (!tty_) {
    const Clock::time_point now = Clock::now();
    if (last_line_ != Clock::time_point{} &&
        std::chrono::duration<double>(now - last_line_).count() < kLineEveryS) {
      return;
    }
    last_line_ = now;
    std::fputs(absl::StrCat(line, "\n").c_str(), stderr);
    std::fflush(stderr);
    return;
  }
  if (shown_ && line == last_) return;
  last_ = line;
  // Clear to the end of the line: the previous one may have been longer.
  std::fputs(absl::StrCat("\r", line, "\033[K").c_str(), stderr);
  std::fflush(stderr);
  shown_ = true;
}

void Progress::Clear() {
  if (!shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace shardsim
