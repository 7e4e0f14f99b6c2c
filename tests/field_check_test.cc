// The shared checker of numeric fields, checked multiplication, the sweep
// limits, and the engine's time limit.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "sim/collective/sweep.h"
#include "sim/runner/isolate.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/limits.h"

namespace shardsim {
namespace {

TEST(FieldCheck, NanAndInfinitiesFailARange) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    FieldCheck c("p.textproto");
    c.Real("nvswitch.bandwidth", bad, 1e6, 1e15);
    EXPECT_FALSE(c.ok()) << bad;
  }
  FieldCheck share("p.textproto");
  share.Share("efficiency.nvlink_fraction", std::nan(""));
  EXPECT_FALSE(share.ok());
}

TEST(FieldCheck, TheFirstFailureIsReportedWithFileFieldAndValue) {
  FieldCheck c("p.textproto", "gpu.");
  c.Count("sms", 108, 1, 1024)
      .Real("peak_flops", 1e-300, 1e9, 1e18)
      .Count("memory_bytes", 0, 1, 2);
  EXPECT_EQ(c.status().message(),
            "p.textproto: field gpu.peak_flops: must be a finite number in "
            "[1000000000, 1e+18], got 1e-300");
  FieldCheck nameless("", "model.");
  nameless.Count("layers", 2147483647, 1, 1024);
  EXPECT_EQ(nameless.status().message(),
            "model.layers: must be in [1, 1024], got 2147483647");
}

TEST(FieldCheck, BoundsAreClosedAndSharesHalfOpen) {
  FieldCheck c("f");
  c.Count("a", 1, 1, 2)
      .Count("b", 2, 1, 2)
      .Real("c", 1e15, 1e6, 1e15)
      .Share("d", 1);
  EXPECT_TRUE(c.ok()) << c.status();
  FieldCheck zero("f");
  zero.Share("d", 0);
  EXPECT_FALSE(zero.ok());
}

TEST(CheckedMul, OverflowIsAnError) {
  int64_t out = 0;
  // 2^31 x 2^31 = 2^62 fits; 2^32 x 2^31 = 2^63 does not.
  ASSERT_TRUE(CheckedMul(int64_t{1} << 31, int64_t{1} << 31, "x", &out).ok());
  EXPECT_EQ(out, int64_t{1} << 62);
  const absl::Status s =
      CheckedMul(int64_t{1} << 32, int64_t{1} << 31, "tokens", &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(),
            "tokens: 4294967296 x 2147483648 does not fit in 64 bits");
}

TEST(SweepLimits, SizesStepFactorAndCount) {
  // 1 B .. 1e9 B by 2: 2^0 .. 2^29, 30 sizes.
  CollectiveSweep ok;
  ok.set_op(ALL_GATHER);
  ok.set_algorithm(RING);
  ok.set_min_bytes(1);
  ok.set_max_bytes(1000000000);
  ok.set_step_factor(2);
  EXPECT_TRUE(ValidateSweep(ok, "cmd").ok());
  EXPECT_EQ(SweepCalls(ok, Mesh{8, 2}).size(), 30u);
  // By 1.0000001: floor(ln 1e9 / ln 1.0000001) + 1 = floor(20.7232658 /
  // 9.9999995e-8) + 1 = 207232668 + 1 sizes.
  CollectiveSweep fine = ok;
  fine.set_step_factor(1.0000001);
  EXPECT_EQ(ValidateSweep(fine, "cmd").message(),
            "cmd: field step_factor: from 1 to 1000000000 bytes by 1.0000001 "
            "is 207232669 sizes, beyond the limit of 1000");
  CollectiveSweep one = ok;
  one.set_step_factor(1);
  EXPECT_EQ(ValidateSweep(one, "cmd").message(),
            "cmd: field step_factor: must be > 1");
  CollectiveSweep nan = ok;
  nan.set_step_factor(std::nan(""));
  EXPECT_FALSE(ValidateSweep(nan, "cmd").ok());
  CollectiveSweep huge = ok;
  huge.set_max_bytes((int64_t{1} << 40) + 1);
  EXPECT_FALSE(ValidateSweep(huge, "cmd").ok());
}

TEST(JobMeshLimits, GpuCountsBeyondTheLimitAreRefused) {
  Platform p;
  p.set_name("p");
  p.set_gpus_per_node(8);
  EXPECT_TRUE(JobMesh(p, 16384).ok());
  EXPECT_EQ(JobMesh(p, 16392).status().message(),
            "16392 GPUs: must be in [1, 16384]");
  EXPECT_FALSE(JobMesh(p, 0).ok());
}

TEST(RunIsolatedLimit, ATaskPastTheTimeLimitIsKilledAndNamed) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<ChildTask> tasks = {
      [] { return absl::StatusOr<std::string>("quick"); },
      [] {
        sleep(30);
        return absl::StatusOr<std::string>("never");
      },
      [] { return absl::StatusOr<std::string>("queued"); }};
  // One job at a time: the sleeper holds the slot, the third never starts.
  std::vector<absl::StatusOr<std::string>> r = RunIsolated(tasks, 1, 0.5);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_EQ(r.size(), 3u);
  ASSERT_TRUE(r[0].ok());
  EXPECT_EQ(*r[0], "quick");
  EXPECT_EQ(r[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r[1].status().message(),
            "time limit of 0.5 s reached (--time-limit) with 1 of 3 "
            "simulations done");
  EXPECT_EQ(r[2].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(took, 5);
}

}  // namespace
}  // namespace shardsim
