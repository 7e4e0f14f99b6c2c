// The estimate tier (sim/estimate/estimate.h): hand-derived steps on toy
// platforms, and `shardsim estimate`'s rows against the analysis they share
// with `run`.
#include "sim/estimate/estimate.h"

#include <string>

#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "tests/util/test_util.h"
#include "tests/util/toy_step.h"

namespace shardsim {
namespace {

absl::StatusOr<StepEstimate> Estimate(const Schedule& s, const Mesh& mesh,
                                      const Platform& p) {
  PreparedCalls calls(mesh, p, FlowMode::kFast, p.channels(),
                      /*volumes=*/true);
  return EstimateStep(s, &calls);
}

// A 1 GB all-gather over 2 GPUs: each sends its half, 0.5 GB, at 50 GB/s
// (the better protocol's half of 100 GB/s): 10 ms, the estimate keeping no
// slack (the bound's 1e-4 is the solver's, not the model's). On one
// stream, or chained by a dependency, two take 20 ms; on two streams with
// no dependency, 10 ms. With no compute, all of it is exposed.
TEST(Estimate, CollectivesAloneAtTheirEstimate) {
  const Mesh mesh{2, 1};
  const Platform p = TwoGpuNode();
  Schedule same;
  AllGather(&same, GATHER, {});
  AllGather(&same, GATHER, {});
  absl::StatusOr<StepEstimate> e = Estimate(same, mesh, p);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->step_time_s, 0.020, 1e-12);
  EXPECT_NEAR(e->exposed_comm_s, 0.020, 1e-12);
  EXPECT_EQ(e->compute_s, 0);

  Schedule apart;
  AllGather(&apart, GATHER, {});
  AllGather(&apart, REDUCE, {});
  EXPECT_NEAR(Estimate(apart, mesh, p)->step_time_s, 0.010, 1e-12);

  Schedule chained;
  AllGather(&chained, GATHER, {});
  AllGather(&chained, REDUCE, {0});
  EXPECT_NEAR(Estimate(chained, mesh, p)->step_time_s, 0.020, 1e-12);
}

// The first protocol (fraction 0.5) pays 2 ms of base latency and 1 ms per
// step: 13 ms, against the second's 20 ms. Each call costs the host 5 ms
// to launch: on two streams they start at 5 and 10 ms, the second ends at
// 23 ms. With the host waiting for the first (ends at 18 ms), the second
// is launched by 23 ms and ends at 36 ms.
TEST(Estimate, LatenciesAndTheHost) {
  const Mesh mesh{2, 1};
  const Platform p = LatentTwoGpuNode();
  Schedule two = TwoLaunchedAllGathers();
  EXPECT_NEAR(Estimate(two, mesh, p)->step_time_s, 0.023, 1e-12);
  two.mutable_ops(1)->add_host_waits(0);
  EXPECT_NEAR(Estimate(two, mesh, p)->step_time_s, 0.036, 1e-12);
}

// Beside the 10 ms all-gather, on SlowedTwoGpuNode:
// - a 20 ms GEMM runs its first 10 ms at 1/1.2 of its speed, 8.333 ms of
//   work, and ends at 10 + 11.667 = 21.667 ms; the all-gather, under
//   compute the whole time, is not exposed;
// - a 5 ms memory-bound kernel and then the GEMM: the kernel takes 5.25 ms
//   and the GEMM's first 4.75 ms do 3.958 ms of work: 10 + 16.042 =
//   26.042 ms;
// - with NVLink at half speed under compute, the all-gather's 10 ms of
//   NVSwitch bytes take 20 ms beside the GEMM, which does 16.667 ms of
//   work meanwhile and ends at 23.333 ms.
// The engine runs these exactly so; the bound's tests (search_test.cc)
// derive the same times less its slack. The walks settle to about kSettled
// of the step (estimate.h): the times hold to ten times that.
TEST(Estimate, ComputeAndCollectivesSlowEachOther) {
  const Mesh mesh{2, 1};
  Platform p = SlowedTwoGpuNode();
  Schedule one;
  AllGather(&one, GATHER, {});
  Compute(&one, TwentyMsGemm());
  absl::StatusOr<StepEstimate> e = Estimate(one, mesh, p);
  ASSERT_TRUE(e.ok()) << e.status();
  const double settled = 10 * kSettled * 0.03;
  EXPECT_NEAR(e->step_time_s, 0.010 + (0.020 - 0.010 / 1.2), settled);
  EXPECT_NEAR(e->compute_s, e->step_time_s, settled);
  EXPECT_NEAR(e->exposed_comm_s, 0, 1e-12);

  Schedule two;
  AllGather(&two, GATHER, {});
  Compute(&two, FiveMsVector());
  Compute(&two, TwentyMsGemm());
  EXPECT_NEAR(Estimate(two, mesh, p)->step_time_s,
              0.010 + (0.020 - (0.010 - 0.00525) / 1.2), settled);

  p.mutable_interference()->set_nvlink_under_compute(0.5);
  EXPECT_NEAR(Estimate(one, mesh, p)->step_time_s,
              0.020 + (0.020 - 0.020 / 1.2), settled);
}

// Two nodes of two GPUs, one NIC each (25 GB/s, half of it payload): a
// 1 GB all-gather between the nodes sends 0.5 GB from each member, and both
// groups of its shape go through the same NICs: 1 GB a NIC, 80 ms. Two
// such calls on two streams share the NICs evenly the whole time, each at
// half of them: both end at 160 ms. One after the other, 160 ms too.
TEST(Estimate, CallsCrossingOneNicShareIt) {
  const Mesh mesh{2, 2};
  Platform p = TwoGpuNode();
  p.mutable_network()->set_nics_per_node(1);
  Schedule one = InterNodeAllGather(mesh);
  EXPECT_NEAR(Estimate(one, mesh, p)->step_time_s, 0.080, 1e-12);
  Schedule two = one;
  Op* second = two.add_ops();
  *second = two.ops(0);
  second->set_id(1);
  second->set_stream(REDUCE);
  const double settled = 10 * kSettled * 0.16;
  EXPECT_NEAR(Estimate(two, mesh, p)->step_time_s, 0.160, settled);
  second->set_stream(GATHER);
  EXPECT_NEAR(Estimate(two, mesh, p)->step_time_s, 0.160, 1e-12);
}

// The rows of `shardsim estimate` are the analysis's (memory, traffic,
// OOM) with a step time, each marked; no OOM row is timed.
TEST(Estimate, RowsAreTheAnalysisWithATime) {
  const std::string path = test::SourcePath("scenarios/quickstart.textproto");
  absl::StatusOr<Scenario> scenario = ReadScenario(path);
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  absl::StatusOr<Job> resolved = ResolveJob(path, *scenario);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const Job& job = *resolved;
  absl::StatusOr<Results> est = EstimateJob(job);
  ASSERT_TRUE(est.ok()) << est.status();
  absl::StatusOr<Results> mem = AnalyzeJob(job, Analysis::kMemoryAndTraffic);
  ASSERT_TRUE(mem.ok()) << mem.status();
  ASSERT_EQ(est->rows_size(), mem->rows_size());
  for (int i = 0; i < est->rows_size(); ++i) {
    const ResultRow& r = est->rows(i);
    SCOPED_TRACE(r.strategy());
    EXPECT_EQ(r.peak_memory_bytes(), mem->rows(i).peak_memory_bytes());
    EXPECT_EQ(r.inter_node_bytes(), mem->rows(i).inter_node_bytes());
    EXPECT_EQ(r.oom(), mem->rows(i).oom());
    EXPECT_EQ(r.has_step_time_s(), !r.oom());
    EXPECT_EQ(r.estimate(), !r.oom());
    if (r.oom()) continue;
    EXPECT_GT(r.compute_s(), 0);
    EXPECT_GE(r.step_time_s(), r.compute_s());
  }
}

// The estimate times every part at full speed: a platform with a degraded
// part gets a warning naming it, one without gets none.
TEST(Estimate, SaysWhatItLeavesOut) {
  Platform p = TwoGpuNode();
  EXPECT_EQ(EstimateCaveat(p), "");
  p.mutable_degraded()->add_gpus()->add_ranks(1);
  EXPECT_NE(EstimateCaveat(p).find("platform bound: its degraded parts"),
            std::string::npos)
      << EstimateCaveat(p);
}

}  // namespace
}  // namespace shardsim
