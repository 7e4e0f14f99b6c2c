// Progress where stderr is not a terminal (a file, as under ctest): nothing
// in the first 2 s, then whole lines without terminal escapes, at most one
// every Progress::kLineEveryS seconds.
#include "sim/runner/progress.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace shardsim {
namespace {

// Sends stderr to a file while it lives; Text() is what was written.
class StderrToFile {
 public:
  StderrToFile() {
    char name[] = "/tmp/shardsim_progress_XXXXXX";
    const int fd = mkstemp(name);
    path_ = name;
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~StderrToFile() {
    Restore();
    std::remove(path_.c_str());
  }
  std::string Text() {
    Restore();
    std::ifstream in(path_);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

TEST(Progress, WholeLinesEveryFewSecondsWhereStderrIsNotATerminal) {
  StderrToFile file;
  {
    Progress progress;
    progress.Show("quiet");  // before 2 s: nothing
    progress.Update(1, 10);
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));
    progress.Show("plan: 3 of 9 points simulated");
    progress.Show("plan: 4 of 9 points simulated");  // within kLineEveryS
    progress.Update(5, 10);
  }  // the destructor erases nothing: no line is drawn in place
  EXPECT_EQ(file.Text(), "  plan: 3 of 9 points simulated, 0:02 elapsed\n");
}

}  // namespace
}  // namespace shardsim
