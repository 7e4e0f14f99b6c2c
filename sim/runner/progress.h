// A one-line progress report for long sweeps: "  37/112 points, 0:42 left"
// on stderr, redrawn in place.
//
// It is drawn only when stderr is a terminal, so output redirected to a
// file or a pipe (tests, scripts, CI) is never changed by it, and only once
// the sweep has run for 2 s, so short runs print nothing at all. The line
// is erased when the sweep ends, before any result is printed.
#ifndef SHARDSIM_SIM_RUNNER_PROGRESS_H_
#define SHARDSIM_SIM_RUNNER_PROGRESS_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace shardsim {

class Progress {
 public:
  // Starts the clock; decides once whether stderr is a terminal.
  Progress();
  // Erases the line if it is shown.
  ~Progress();

  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Whether Update can ever draw (stderr is a terminal). A caller that
  // polls may wake up once a second to let the estimate count down.
  bool active() const { return tty_; }

  // `done` of `total` points are finished. The time left is the mean time
  // per finished point so far times the points left.
  void Update(size_t done, size_t total);

  // Draws "  `what`, M:SS elapsed": for a task whose total is not known
  // ahead (`shardsim plan`, which prunes as it goes). The same rules as
  // Update's: a terminal only, after 2 s.
  void Show(const std::string& what);

  // Erases the line if it is shown; a later Update may draw it again.
  void Clear();

 private:
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start_;
  const bool tty_;
  bool shown_ = false;
  std::string last_;            // what is shown; not drawn again
  void Draw(std::string line);  // "\r..." unless shown already
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RUNNER_PROGRESS_H_
