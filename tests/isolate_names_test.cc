// RunIsolated names a task by the number it is given (a rank of a
// distributed sweep runs some points and names them as the whole sweep
// does).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <string>
#include <vector>

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

// A pool hands back each child's result as it ends; a child it kills never
// reports, and a child still running when the pool goes is killed.
TEST(ChildPool, ResultsComeAsChildrenEndAndKilledOnesNever) {
  const auto start = std::chrono::steady_clock::now();
  ChildPool pool(2);
  ASSERT_TRUE(pool.Start(5, 5,
                         [] {
                           sleep(30);
                           return absl::StatusOr<std::string>("slow");
                         })
                  .ok());
  ASSERT_TRUE(
      pool.Start(8, 8, [] { return absl::StatusOr<std::string>("quick"); })
          .ok());
  EXPECT_TRUE(pool.full());
  auto ended = pool.Wait(-1);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->first, 8u);
  ASSERT_TRUE(ended->second.ok());
  EXPECT_EQ(*ended->second, "quick");
  EXPECT_FALSE(pool.full());
  EXPECT_EQ(pool.running(), std::vector<size_t>{5});
  EXPECT_FALSE(pool.Wait(10).has_value());  // still asleep
  pool.Kill(5);
  EXPECT_TRUE(pool.empty());
  EXPECT_FALSE(pool.Wait(10).has_value());

  // The pool's end kills its children: one tells its pid, then sleeps.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = 0;
  {
    ChildPool going(1);
    ASSERT_TRUE(going
                    .Start(0, 0,
                           [&] {
                             const pid_t me = getpid();
                             (void)!write(fds[1], &me, sizeof me);
                             sleep(30);
                             return absl::StatusOr<std::string>("never");
                           })
                    .ok());
    ASSERT_EQ(read(fds[0], &child, sizeof child),
              static_cast<ssize_t>(sizeof child));
  }
  EXPECT_EQ(kill(child, 0), -1);  // killed and reaped
  EXPECT_EQ(errno, ESRCH);
  close(fds[0]);
  close(fds[1]);
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      10);
}

}  // namespace
}  // namespace shardsim
