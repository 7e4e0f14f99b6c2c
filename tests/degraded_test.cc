// Stragglers, degraded links and mixed GPU generations (platform.proto
// Degraded, sim/engine/degraded.h): steps whose times follow by hand.
#include "sim/engine/degraded.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/base/group.h"
#include "sim/scenario/scenario.h"
#include "tests/util/replay.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

using test::Knobs;
using test::Replay;
using test::Replayed;
using test::TestPlatform;
using ::testing::HasSubstr;

// A GEMM of `seconds` at peak on a 1e15 FLOP/s GPU: 10000 x 10000 x k,
// 2e8 k FLOPs over 2 (2e4 k + 1e8) bytes: 1 ms is k = 5000 and 4e8 B,
// bound by its math at 1e12 B/s of HBM and more.
Kernel GemmOf(double seconds) {
  Kernel g;
  g.set_name("gemm");
  g.mutable_gemm()->set_m(10000);
  g.mutable_gemm()->set_n(10000);
  g.mutable_gemm()->set_k(std::llround(seconds * 1e15 / 2e8));
  return g;
}

// An elementwise kernel moving `bytes` through HBM.
Kernel VectorOf(double bytes) {
  Kernel v;
  v.set_name("vector");
  v.mutable_memory()->set_vector_bytes(static_cast<int64_t>(bytes));
  return v;
}

// A step of alternating compute ops and ring all-gathers of `bytes` over
// `group`: compute, gather, compute, gather, ... one compute op per
// kernel. Each op waits for the one before; with `overlap`, a compute op
// waits for the compute before it only, so each gather runs beside the
// next compute.
Schedule ComputeThenGather(const std::vector<Kernel>& kernels, int64_t bytes,
                           const Group& group, bool overlap = false) {
  Schedule s;
  for (const Kernel& k : kernels) {
    const int id = s.ops_size();
    Op* c = s.add_ops();
    c->set_id(id);
    c->set_stream(COMPUTE);
    c->set_label("compute");
    c->mutable_compute()->set_kind("forward");
    c->mutable_compute()->set_kernel_list(s.kernel_lists_size());
    *s.add_kernel_lists()->add_kernels() = k;
    if (id > 0) c->add_deps(overlap ? id - 2 : id - 1);
    Op* g = s.add_ops();
    g->set_id(id + 1);
    g->set_stream(REDUCE);
    g->set_label("AG P");
    g->add_deps(id);
    CollectiveCall* call = g->mutable_collective();
    call->set_op(ALL_GATHER);
    *call->mutable_group() = group;
    call->set_bytes(bytes);
    call->set_algorithm(RING);
    call->set_tensor("P");
  }
  return s;
}

// TestPlatform's nodes of `gpus` GPUs and as many 10e9 B/s NICs (alpha 20
// us a network step), NICs of `nic` B/s, HBM at `hbm` B/s.
Platform Nodes(int gpus, double hbm = 1e18, double nic = 10e9) {
  Knobs k;
  k.gpus_per_node = gpus;
  k.nics_per_node = gpus;
  k.nic = nic;
  Platform p = TestPlatform(k);
  p.mutable_gpu()->set_hbm_bytes_per_s(hbm);
  return p;
}

// 4 GPUs of one node: NVSwitch 100e9 B/s, alpha 5 us a step, base 0.
Platform OneNodeOfFour() { return Nodes(4); }

constexpr double kC = 1e-3;  // the GEMM, on the platform's GPU
constexpr int64_t kBytes = 400'000'000;
// A ring all-gather of 4e8 B over the node's 4 GPUs: 3 steps of 5 us +
// 1e8 B / 100e9 B/s = 3.015 ms.
constexpr double kGather = 3 * (5e-6 + 1e8 / 100e9);

TEST(Stragglers, ARankAtHalfSpeedDelaysTheGatherByItsExtraCompute) {
  const Mesh mesh{4, 1};
  const Schedule s = ComputeThenGather({GemmOf(kC)}, kBytes, GlobalGroup(mesh));
  const Replayed uniform = Replay(s, OneNodeOfFour(), mesh);
  EXPECT_NEAR(uniform.step, kC + kGather, 1e-9);
  // Rank 2 at half speed: its GEMM takes 2 ms; the gather, which every
  // rank joins, starts when it is done: 2 ms + 3.015 ms.
  Platform p = OneNodeOfFour();
  Degraded::Gpus* slow = p.mutable_degraded()->add_gpus();
  slow->add_ranks(2);
  slow->set_speed(0.5);
  const Replayed r = Replay(s, p, mesh);
  EXPECT_NEAR(r.step, 2 * kC + kGather, 1e-9);
  // The path: 1 ms of compute at the platform's speed, 1 ms waiting on
  // rank 2, then the gather.
  EXPECT_NEAR(r.breakdown.compute_s(), kC, 1e-9);
  EXPECT_NEAR(r.breakdown.straggler_s(), kC, 1e-9);
  ASSERT_EQ(r.breakdown.waited_on().waits_size(), 1);
  EXPECT_EQ(r.breakdown.waited_on().waits(0).rank(), 2);
  EXPECT_NEAR(r.breakdown.waited_on().waits(0).seconds(), kC, 1e-9);
  // Replaying the dominated class too (the other three ranks) changes
  // nothing: two timelines, the gather met by both.
  const Replayed every = Replay(s, p, mesh, /*every_class=*/true);
  EXPECT_NEAR(every.step, r.step, 1e-12);
  EXPECT_THAT(every.replay.full_because(), HasSubstr("2 classes"));
}

TEST(Stragglers, APortAtHalfBandwidthHalvesTheRingsRate) {
  // Rank 2's NVSwitch port at half: each ring step's chunk into and out of
  // rank 2 moves at 50e9 B/s, and the ring goes at its slowest hop:
  // 3 x (5 us + 1e8 / 50e9) = 6.015 ms after the 1 ms GEMM.
  const Mesh mesh{4, 1};
  const Schedule s = ComputeThenGather({GemmOf(kC)}, kBytes, GlobalGroup(mesh));
  Platform p = OneNodeOfFour();
  Degraded::Links* port = p.mutable_degraded()->add_nvlink();
  port->add_ranks(2);
  port->set_bandwidth(0.5);
  const Replayed r = Replay(s, p, mesh);
  EXPECT_NEAR(r.step, kC + 3 * (5e-6 + 1e8 / 50e9), 1e-9);
}

TEST(Stragglers, ARailAtHalfBandwidthSlowsOnlyTheGroupsOnIt) {
  // 2 nodes of 2 GPUs, a NIC each (rail 0, rail 1), 10e9 B/s, alpha 20 us
  // a network step. An all-gather of 2e8 B over the same local rank of
  // both nodes runs as two groups, {0, 2} on rail 0 and {1, 3} on rail 1;
  // each moves one chunk of 1e8 B over its rail: 20 us + 1e8 / 10e9 =
  // 10.02 ms. Rail 1 at half: its group takes 20 us + 1e8 / 5e9 =
  // 20.02 ms, and the call ends with its last group.
  Platform p = Nodes(2);
  const Mesh mesh{2, 2};
  const Schedule s =
      ComputeThenGather({GemmOf(kC)}, 200'000'000, InterGroup(mesh));
  EXPECT_NEAR(Replay(s, p, mesh).step, kC + 20e-6 + 1e8 / 10e9, 1e-9);
  Degraded::Links* rail = p.mutable_degraded()->add_nics();
  rail->add_rails(1);
  rail->set_bandwidth(0.5);
  EXPECT_NEAR(Replay(s, p, mesh).step, kC + 20e-6 + 1e8 / 5e9, 1e-9);
}

// Two nodes of one GPU; node 1's GPU of another model, with half the
// FLOP/s and twice the HBM bandwidth of the platform's.
Platform TwoGenerations() {
  Platform p = Nodes(1, /*hbm=*/1e12);
  Degraded::Gpus* other = p.mutable_degraded()->add_gpus();
  other->add_nodes(1);
  GpuModel* m = other->mutable_model();
  *m->mutable_gpu() = p.gpu();
  m->mutable_gpu()->set_name("other");
  m->mutable_gpu()->set_peak_flops(0.5e15);
  m->mutable_gpu()->set_hbm_bytes_per_s(2e12);
  *m->mutable_kernels() = p.kernels();
  *m->mutable_interference() = p.interference();
  return p;
}

TEST(Stragglers, TwoGenerationsWaitForTheSlowerOneAtEachCollective) {
  // A GEMM of 1 ms (2 ms on the other model: half the FLOP/s), a gather,
  // an elementwise kernel of 1e9 B (1 ms at 1e12 B/s; 0.5 ms on the
  // other's 2e12), a gather. Each gather of 2e8 B over the two nodes:
  // 20 us + 1e8 / 10e9 = 10.02 ms. Each rank waits for the slower at each
  // gather: 2 ms (node 1) + G + 1 ms (node 0) + G, not the 3 ms nor the
  // 2.5 ms of either generation alone.
  const Mesh mesh{1, 2};
  const double G = 20e-6 + 1e8 / 10e9;
  const Schedule s = ComputeThenGather({GemmOf(kC), VectorOf(1e9)}, 200'000'000,
                                       GlobalGroup(mesh));
  const Replayed r = Replay(s, TwoGenerations(), mesh);
  EXPECT_NEAR(r.step, 2e-3 + G + 1e-3 + G, 1e-9);
  EXPECT_THAT(r.replay.full_because(), HasSubstr("2 classes"));
  // The path waits 1 ms on rank 1 (its GEMM beyond the platform's).
  EXPECT_NEAR(r.breakdown.straggler_s(), 1e-3, 1e-9);
  ASSERT_EQ(r.breakdown.waited_on().waits_size(), 1);
  EXPECT_EQ(r.breakdown.waited_on().waits(0).rank(), 1);
}

TEST(Stragglers, FasterGpusNeverMakeTheStepSlower) {
  // Property: for any speed of rank 1, the step is no faster than the
  // uniform one and no slower than everyone at that speed.
  const Mesh mesh{4, 1};
  const Schedule s =
      ComputeThenGather({GemmOf(kC), VectorOf(1e8)}, kBytes, GlobalGroup(mesh));
  const double uniform = Replay(s, OneNodeOfFour(), mesh).step;
  double before = uniform;
  for (double speed : {0.9, 0.6, 0.3}) {
    SCOPED_TRACE(speed);
    Platform p = OneNodeOfFour();
    Degraded::Gpus* g = p.mutable_degraded()->add_gpus();
    g->add_ranks(1);
    g->set_speed(speed);
    const double step = Replay(s, p, mesh).step;
    EXPECT_GE(step, before - 1e-12);
    before = step;
    // Every GPU at that speed.
    Platform all = OneNodeOfFour();
    Degraded::Gpus* every = all.mutable_degraded()->add_gpus();
    every->add_nodes(0);
    every->set_speed(speed);
    EXPECT_LE(step, Replay(s, all, mesh).step + 1e-12);
  }
}

TEST(Stragglers, DrawnSpeedsReplayAsTheirSlowestClass) {
  // A lognormal draw gives every GPU its own speed (the platform's the
  // median); every class replayed and the slowest alone give the same
  // step, the GEMM at the slowest speed: 1 ms / min speed + the gather.
  const Mesh mesh{4, 1};
  const Schedule s = ComputeThenGather({GemmOf(kC)}, kBytes, GlobalGroup(mesh));
  Platform p = OneNodeOfFour();
  p.mutable_degraded()->mutable_drawn()->set_seed(7);
  p.mutable_degraded()->mutable_drawn()->set_gpu_speed_sigma(0.2);
  absl::StatusOr<std::vector<RankClass>> classes =
      ComputeClasses(p, mesh, /*drop_dominated=*/false);
  ASSERT_TRUE(classes.ok()) << classes.status();
  ASSERT_EQ(classes->size(), 4u);  // every GPU its own speed
  double slowest = 1e9;
  for (const RankClass& c : *classes) slowest = std::min(slowest, c.speed);
  const Replayed one = Replay(s, p, mesh);
  const Replayed every = Replay(s, p, mesh, /*every_class=*/true);
  EXPECT_NEAR(one.step, kC / slowest + kGather, 1e-9);
  EXPECT_NEAR(every.step, one.step, 1e-12);
  // The same seed draws the same speeds.
  absl::StatusOr<std::vector<RankClass>> again = ComputeClasses(p, mesh, false);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < classes->size(); ++i) {
    EXPECT_EQ((*again)[i].speed, (*classes)[i].speed);
  }
}

TEST(Stragglers, EveryNicAtHalfIsANicOfHalfTheBandwidth) {
  // Four nodes of one GPU and one NIC, a ring all-gather across them: every
  // NIC degraded to half is the platform with 5e9 B/s NICs, with network
  // symmetry on (the mirrored flows' NIC halves at the same share).
  Platform degraded = Nodes(1);
  Degraded::Links* nics = degraded.mutable_degraded()->add_nics();
  nics->add_rails(0);
  nics->set_bandwidth(0.5);
  const Platform half = Nodes(1, 1e18, /*nic=*/5e9);
  const Mesh mesh{1, 4};
  const Schedule s = ComputeThenGather({GemmOf(kC)}, kBytes, GlobalGroup(mesh));
  const double want = Replay(s, half, mesh).step;
  // 3 steps of 20 us + 1e8 B at 5e9 B/s, after the GEMM.
  EXPECT_NEAR(want, kC + 3 * (20e-6 + 1e8 / 5e9), 1e-9);
  EXPECT_NEAR(Replay(s, degraded, mesh).step, want, 1e-12);
}

TEST(Stragglers, DroppingTheFasterClassIsExactWhereCollectivesHoldNoSms) {
  // Ports slowed to half while compute runs, gathers beside compute: the
  // slow class drives the ports whether the faster one is replayed or not,
  // and, with no SMs held, the faster class never ends an op later.
  const Mesh mesh{4, 1};
  const Schedule s =
      ComputeThenGather({GemmOf(kC), VectorOf(1e8), GemmOf(kC)}, kBytes,
                        GlobalGroup(mesh), /*overlap=*/true);
  Platform p = OneNodeOfFour();
  p.mutable_interference()->set_nvlink_under_compute(0.5);
  Degraded::Gpus* slow = p.mutable_degraded()->add_gpus();
  slow->add_ranks(3);
  slow->set_speed(0.7);
  const Replayed one = Replay(s, p, mesh);
  const Replayed every = Replay(s, p, mesh, /*every_class=*/true);
  EXPECT_NEAR(every.step, one.step, 1e-12);
  EXPECT_NEAR(every.breakdown.straggler_s(), one.breakdown.straggler_s(),
              1e-12);
}

TEST(Stragglers, OutsideTheJobIsAnErrorNamingTheField) {
  const Mesh mesh{4, 1};
  Platform p = OneNodeOfFour();
  p.mutable_degraded()->add_gpus()->add_ranks(9);
  p.mutable_degraded()->mutable_gpus(0)->set_speed(0.5);
  absl::StatusOr<std::vector<RankClass>> c = ComputeClasses(p, mesh, true);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("degraded.gpus[0].ranks: 9 is not one of the job's 4 "
                        "GPUs"));
  Platform q = OneNodeOfFour();
  Degraded::Links* rail = q.mutable_degraded()->add_nics();
  rail->add_rails(5);
  rail->set_bandwidth(0.5);
  absl::StatusOr<LinkShares> l = ComputeLinkShares(q, mesh);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("degraded.nics[0].rails: 5"));
}

TEST(Stragglers, ALinkDownOrASpeedOfZeroIsRefusedWhenRead) {
  Platform p = TestPlatform(Knobs());
  Degraded::Links* down = p.mutable_degraded()->add_nics();
  down->add_nodes(0);
  down->set_bandwidth(0);
  absl::Status s = ValidatePlatform(p, "p.textproto");
  EXPECT_THAT(s.message(), HasSubstr("degraded.nics[0].bandwidth"));
  EXPECT_THAT(s.message(), HasSubstr("a link down is a failure"));
  Platform q = TestPlatform(Knobs());
  q.mutable_degraded()->add_gpus()->add_ranks(0);
  s = ValidatePlatform(q, "q.textproto");
  EXPECT_THAT(s.message(), HasSubstr("degraded.gpus[0].speed"));
  // A seed with nothing to draw is not quietly ignored.
  Platform r = TestPlatform(Knobs());
  r.mutable_degraded()->mutable_drawn()->set_seed(3);
  s = ValidatePlatform(r, "r.textproto");
  EXPECT_THAT(s.message(), HasSubstr("degraded.drawn.seed"));
  // A GPU named twice, through a node and a rank.
  Platform twice = OneNodeOfFour();
  Degraded::Gpus* a = twice.mutable_degraded()->add_gpus();
  a->add_nodes(0);
  a->set_speed(0.5);
  Degraded::Gpus* b = twice.mutable_degraded()->add_gpus();
  b->add_ranks(2);
  b->set_speed(0.9);
  absl::StatusOr<std::vector<RankClass>> c =
      ComputeClasses(twice, Mesh{4, 1}, true);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("degraded.gpus[1].ranks/nodes: rank 2 is named twice"));
}

}  // namespace
}  // namespace shardsim
