// A progress report for long sweeps on stderr: "  37/112 points, 0:42
// left". On a terminal it is one line redrawn in place and erased when the
// sweep ends, before any result is printed; elsewhere (a file, a pipe, a
// CI log) it is a line of its own every kLineEveryS seconds, so a script
// that waits on a long `plan` still sees what it is doing. Either way
// nothing is drawn until the sweep has run for 2 s: short runs print
// nothing at all.
#ifndef SHARDSIM_SIM_RUNNER_PROGRESS_H_
#define SHARDSIM_SIM_RUNNER_PROGRESS_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace shardsim {

class Progress {
 public:
  // Seconds between two lines where stderr is not a terminal.
  static constexpr double kLineEveryS = 5;

  // Starts the clock; decides once whether stderr is a terminal.
  Progress();
  // Erases the line if it is shown.
  ~Progress();

  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of `total` points are finished. The time left is the mean time
  // per finished point so far times the points left.
  void Update(size_t done, size_t total);

  // Draws "  `what`, M:SS elapsed": for a task whose total is not known
  // ahead (`shardsim plan`, which prunes as it goes). The same rules as
  // Update's: after 2 s, redrawn on a terminal, a line every kLineEveryS
  // elsewhere.
  void Show(const std::string& what);

  // Erases the line if it is shown on a terminal; a later Update may draw
  // it again.
  void Clear();

 private:
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start_;
  const bool tty_;
  bool shown_ = false;             // a line drawn on the terminal
  std::string last_;               // what is shown; not drawn again
  Clock::time_point last_line_{};  // when a line was last written, elsewhere
  double Elapsed() const;
  void Draw(const std::string& line);
};

}  // namespace shardsim

#endif  // SHARDSIM_SIM_RUNNER_PROGRESS_H_
