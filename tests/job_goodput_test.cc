// A simulated point's goodput (sim/goodput/job_goodput.h): the parts it
// runs on, its checkpoint's size and costs, derived by hand.
#include "sim/goodput/job_goodput.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

using ::testing::HasSubstr;

// dgx_h100 as shipped (its reliability and storage) and LLaMA-7B; each
// test gives the simulated row it reads.
Job H100Job() {
  Job job;
  job.path = "job.textproto";
  job.platform = test::ShippedPlatform("dgx_h100");
  job.model = test::BuiltinOrFail("llama-7b");
  job.scenario.set_optimizer_bytes_per_param(12);
  return job;
}

// Each GPU holds 3e9 bytes of parameters and 1e9 of optimizer states.
ResultRow Row(int gpus, double step_s, double tokens_per_gpu_per_s) {
  ResultRow row;
  row.set_param_bytes(3'000'000'000);
  row.set_optimizer_bytes(1'000'000'000);
  row.set_strategy("zero3");
  row.set_gpus(gpus);
  row.set_step_time_s(step_s);
  row.set_tokens_per_gpu_per_s(tokens_per_gpu_per_s);
  return row;
}

TEST(JobGoodput, TheJobsSwitchesAreItsLeavesAndSpines) {
  // dgx_h100: 32 NICs a leaf, rail-optimised (each of the 8 rails on
  // leaves of its own), non-blocking: 32 up-links a leaf, so 32 spines.
  const Platform p = test::ShippedPlatform("dgx_h100");
  // 512 nodes: each rail's 512 NICs fill 16 leaves: 128 leaves + 32.
  EXPECT_EQ(FatTreeSwitches(p, 512), 128 + 32);
  // 4 nodes: a leaf per rail, 4 of its ports used: 8 leaves + 32.
  EXPECT_EQ(FatTreeSwitches(p, 4), 8 + 32);
  // One switch for every NIC: nics_per_leaf 0.
  Platform one = p;
  one.mutable_network()->set_nics_per_leaf(0);
  EXPECT_EQ(FatTreeSwitches(one, 64), 1);
  // Not rail-optimised, 5 nodes' 40 NICs fill 2 leaves: 2 + 32.
  Platform flat = p;
  flat.mutable_network()->set_rail_optimized(false);
  EXPECT_EQ(FatTreeSwitches(flat, 5), 2 + 32);
}

TEST(JobGoodput, CheckpointAndRestartFollowFromTheStatesAndTheStore) {
  const Job job = H100Job();
  const double psi = static_cast<double>(TotalParams(job.model));
  // 64 GPUs = 8 nodes; a step of 2 s moving 1000 tokens/s per GPU.
  const ResultRow row = Row(64, 2.0, 1000);
  GoodputOptions o;
  o.days = 1;
  absl::StatusOr<GoodputResult> g = PointGoodput(job, row, 2.0, o);
  ASSERT_TRUE(g.ok()) << g.status();
  // Each parameter once in bf16 and its 12 optimizer bytes: 14 psi bytes,
  // written by 8 nodes at 0.98e9 B/s each. A restart: relaunch 600 s,
  // init 150 s, and each node's 8 GPUs reading back the 4e9 bytes each
  // holds at 0.98e9 B/s.
  const double bytes = 14 * psi;
  EXPECT_DOUBLE_EQ(g->checkpoint_bytes(), bytes);
  EXPECT_DOUBLE_EQ(g->checkpoint_write_s(), bytes / (8 * 0.98e9));
  EXPECT_DOUBLE_EQ(g->checkpoint_block_s(), g->checkpoint_write_s());
  EXPECT_DOUBLE_EQ(g->restart_s(), 600 + 150 + 8 * 4e9 / 0.98e9);
  // One day of steps of 2 s: 43,200 steps, 86,400 s of work.
  EXPECT_DOUBLE_EQ(g->steps(), 43200);
  EXPECT_DOUBLE_EQ(g->work_s(), 86400);
  // The job's failure rate: 64 GPUs x 1.26e-5 + 8 nodes x (1.73e-5 +
  // 2.37e-5 software) + 64 NICs x 3.3e-7 + 40 switches (a leaf for each
  // of the 8 rails, and 32 spines) x 2.33e-5 per hour.
  const double per_hour =
      64 * 1.26e-5 + 8 * (1.73e-5 + 2.37e-5) + 64 * 3.3e-7 + 40 * 2.33e-5;
  EXPECT_NEAR(g->mtbf_s(), 3600 / per_hour, 1e-6 * g->mtbf_s());
  ASSERT_EQ(g->parts_size(), 5);
  EXPECT_EQ(g->parts(0).part(), "gpu");
  EXPECT_EQ(g->parts(0).count(), 64);
  // Expected failures split as each part's share of the rate.
  EXPECT_NEAR(g->parts(0).failures() / g->parts(3).failures(),
              64 * 1.26e-5 / (40 * 2.33e-5), 1e-9);
  // The parts of the wall time sum to it.
  EXPECT_NEAR(g->work_s() + g->checkpoint_s() + g->rework_s() +
                  g->lost_restart_s() + g->straggler_s(),
              g->wall_s(), 1e-6 * g->wall_s());
}

TEST(JobGoodput, AsyncBlocksForTheCopyOverPcieAndTokensSetTheSteps) {
  const Job job = H100Job();
  GoodputOptions o;
  o.tokens = 1e9;
  o.async_checkpoint = true;
  // 32 GPUs at 1000 tokens/s each for 4 s: 128,000 tokens a step.
  absl::StatusOr<GoodputResult> g = PointGoodput(job, Row(32, 4, 1000), 4, o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_DOUBLE_EQ(g->steps(), 1e9 / 128000);
  // Each GPU copies the 4e9 bytes it holds at dgx_h100's 55.06e9 B/s.
  EXPECT_DOUBLE_EQ(g->checkpoint_block_s(), 4e9 / 55.06e9);
  EXPECT_TRUE(g->async_checkpoint());
}

TEST(JobGoodput, AStragglerStretchesEveryStep) {
  const Job job = H100Job();
  GoodputOptions o;
  o.days = 1;
  // A step of 2.5 s where the uniform one takes 2: s = 0.25, and with no
  // failure the kept steps' stretch is 0.25 x 86,400 s.
  Job calm = job;
  calm.platform.mutable_reliability()->set_gpu_failures_per_hour(1e-12);
  calm.platform.mutable_reliability()->set_node_failures_per_hour(0);
  calm.platform.mutable_reliability()->set_nic_failures_per_hour(0);
  calm.platform.mutable_reliability()->set_switch_failures_per_hour(0);
  calm.platform.mutable_reliability()->set_software_failures_per_hour(0);
  absl::StatusOr<GoodputResult> g =
      PointGoodput(calm, Row(64, 2.5, 800), 2.0, o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(g->straggler_s(), 0.25 * 86400, 1e-3);
}

TEST(JobGoodput, APlatformWithoutReliabilityOrStorageIsAnError) {
  Job job = H100Job();
  job.platform.clear_reliability();
  GoodputOptions o;
  o.days = 1;
  absl::StatusOr<GoodputResult> g = PointGoodput(job, Row(8, 1, 1), 1, o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(),
              HasSubstr("reliability.*_failures_per_hour are all 0"));
  job = H100Job();
  job.platform.mutable_storage()->set_node_read_bytes_per_s(0);
  g = PointGoodput(job, Row(8, 1, 1), 1, o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("node_read_bytes_per_s"));
}

}  // namespace
}  // namespace shardsim
