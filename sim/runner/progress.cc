#include "sim/runner/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

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

void Progress::Update(size_t done, size_t total) {
  if (!tty_ || done >= total) return;
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - start_).count();
  if (elapsed < kQuietS) return;
  std::string line = absl::StrFormat("\r  %d/%d points", done, total);
  if (done > 0) {
    const double left =
        elapsed / static_cast<double>(done) * static_cast<double>(total - done);
    absl::StrAppend(&line, ", ", MinutesSeconds(left), " left");
  }
  Draw(std::move(line));
}

void Progress::Show(const std::string& what) {
  if (!tty_) return;
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - start_).count();
  if (elapsed < kQuietS) return;
  Draw(absl::StrCat("\r  ", what, ", ", MinutesSeconds(elapsed), " elapsed"));
}

void Progress::Draw(std::string line) {
  if (shown_ && line == last_) return;
  last_ = line;
  // Clear to the end of the line: the previous one may have been longer.
  line += "\033[K";
  std::fputs(line.c_str(), stderr);
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
