// The failure-path pieces that need no MPI job: --fault's parsing and
// counting, and the watchdog (MPI is not initialized here, so it ends the
// process with _Exit(3) where a job would MPI_Abort).
#include "hw/runtime/fault.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "hw/runtime/watchdog.h"

namespace shardsim::hw {
namespace {

TEST(ParseFault, EmptyIsNone) {
  absl::StatusOr<Fault> f = ParseFault("", 4);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, Fault::kNone);
}

TEST(ParseFault, SkipAndDie) {
  absl::StatusOr<Fault> skip = ParseFault("skip:3:7", 4);
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ(skip->kind, Fault::kSkip);
  EXPECT_EQ(skip->rank, 3);
  EXPECT_EQ(skip->run, 7);
  absl::StatusOr<Fault> die = ParseFault("die:0:1", 4);
  ASSERT_TRUE(die.ok()) << die.status();
  EXPECT_EQ(die->kind, Fault::kDie);
}

TEST(ParseFault, BadSpecsNameTheFlagAndValue) {
  for (const char* spec :
       {"bogus", "skip:1", "skip:1:2:3", "kill:0:1", "skip:4:1", "skip:-1:1",
        "skip:x:1", "die:0:0", "die:0:y", "die::1"}) {
    absl::StatusOr<Fault> f = ParseFault(spec, 4);
    ASSERT_FALSE(f.ok()) << spec;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(
        f.status().message().find(std::string("--fault: \"") + spec + "\""),
        absl::string_view::npos)
        << f.status();
  }
}

TEST(FaultInjector, SkipsTheNthRunOfItsRankOnly) {
  const Fault f = *ParseFault("skip:1:3", 4);
  FaultInjector mine(f, 1), other(f, 2);
  for (int run = 1; run <= 5; ++run) {
    EXPECT_EQ(mine.SkipThisRun(), run == 3) << run;
    EXPECT_FALSE(other.SkipThisRun()) << run;
  }
  FaultInjector none;
  EXPECT_FALSE(none.SkipThisRun());
}

TEST(FaultInjectorDeathTest, DiesBeforeTheNthRun) {
  const Fault f = *ParseFault("die:0:2", 1);
  EXPECT_EXIT(
      {
        FaultInjector mine(f, 0);
        mine.SkipThisRun();
        mine.SkipThisRun();
      },
      testing::KilledBySignal(SIGKILL),
      "rank 0 raises SIGKILL before its collective run 2");
}

TEST(Watchdog, ArmedWaitsThatReturnDoNotFire) {
  Watchdog w(0, 0.3);
  for (int i = 0; i < 5; ++i) {
    ArmScope arm(&w, "a short wait");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Disarmed: no clock runs.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
}

TEST(WatchdogDeathTest, NamesTheRankTheWaitAndTheTimeout) {
  EXPECT_EXIT(
      {
        Watchdog w(5, 0.3);
        ArmScope arm(&w, "op 17: ALL_GATHER RING");
        std::this_thread::sleep_for(std::chrono::seconds(10));
      },
      testing::ExitedWithCode(3),
      "rank 5: watchdog: no progress for 0.3 s waiting on op 17: ALL_GATHER "
      "RING");
}

TEST(WatchdogDeathTest, AsyncErrorsFireAndAbortAllRuns) {
  EXPECT_EXIT(
      {
        Watchdog w(2, 100,
                   Watchdog::Hooks{
                       [] { std::fputs("communicators aborted\n", stderr); },
                       [] { return std::string("remote process exited"); }});
        std::this_thread::sleep_for(std::chrono::seconds(10));
      },
      testing::ExitedWithCode(3),
      "rank 2: watchdog: NCCL error \\(remote process exited\\).*"
      "communicators aborted");
}

}  // namespace
}  // namespace shardsim::hw
