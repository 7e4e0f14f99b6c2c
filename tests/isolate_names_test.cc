// RunIsolated names a task by the number it is given (a rank of a
// distributed sweep runs some points and names them as the whole sweep
// does), and its progress line never draws when stderr is not a terminal.
#include <csignal>

#include "gtest/gtest.h"
#include "sim/runner/isolate.h"

namespace shardsim {
namespace {

TEST(RunIsolatedNames, ACrashNamesTheTaskByItsGivenNumber) {
  std::vector<ChildTask> tasks = {
      [] { return absl::StatusOr<std::string>("row"); },
      []() -> absl::StatusOr<std::string> {
        std::raise(SIGKILL);
        return "never";
      }};
  IsolateOptions options;
  options.jobs = 2;
  options.names = {4, 7};
  options.progress = true;  // stderr is not a terminal under ctest
  std::vector<absl::StatusOr<std::string>> r = RunIsolated(tasks, options);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r[0].ok());
  EXPECT_EQ(*r[0], "row");
  EXPECT_EQ(r[1].status().message(), "simulation 7 crashed with signal 9");
  // Without names, the index.
  r = RunIsolated(tasks, 1);
  EXPECT_EQ(r[1].status().message(), "simulation 1 crashed with signal 9");
}

}  // namespace
}  // namespace shardsim
