// HRING, TORUS2D and HORING (sim/collective/hierarchical.cc, horing.cc):
// every op runs correctly on real data (CheckPlan) over many shapes, counts,
// channels and roots; traffic and step counts match hand-derived numbers.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/collective/executor.h"
#include "sim/collective/plan.h"

namespace shardsim {
namespace {

PlanRequest Request(Algorithm algorithm, CollectiveOp op, int per_node,
                    int nodes, int64_t count, int channels = 1, int root = 0) {
  PlanRequest r;
  r.op = op;
  r.algorithm = algorithm;
  r.shape.per_node = per_node;
  r.shape.nodes = nodes;
  r.count = count;
  r.channels = channels;
  r.root = root;
  return r;
}

// ---- correctness over shapes x counts x channels x roots -------------------

using Case = std::tuple<Algorithm, CollectiveOp, std::pair<int, int>>;

class HierPlanTest : public testing::TestWithParam<Case> {};

TEST_P(HierPlanTest, ProducesTheContractResult) {
  const auto [algorithm, op, shape] = GetParam();
  const auto [per_node, nodes] = shape;
  const int p = per_node * nodes;
  // Roots: the first member, the last, and a non-leader of a middle node.
  const int middle = std::min(p - 1, (nodes / 2) * per_node + per_node / 2);
  std::set<int> roots = {0, p - 1, middle};
  std::vector<int64_t> counts = {1, p - 1, 7 * p + 5};
  std::vector<int> channel_counts = {1, 2};
  if (p >= 1024) {
    // An all-gather over p members is ~p^2 chunk transfers (1M here, ~0.15 s
    // to build): one run, with an uneven count, 2 channels and a root that
    // is no leader, covers what the small shapes do not.
    counts = {p + 3};
    channel_counts = {2};
    roots = {middle};
  }
  if (op != BROADCAST) roots = {0};
  for (int64_t count : counts) {
    for (int channels : channel_counts) {
      for (int root : roots) {
        SCOPED_TRACE(absl::StrCat("count ", count, " channels ", channels,
                                  " root ", root));
        absl::StatusOr<Plan> plan = MakePlan(
            Request(algorithm, op, per_node, nodes, count, channels, root));
        ASSERT_TRUE(plan.ok()) << plan.status();
        const absl::Status check = CheckPlan(*plan);
        EXPECT_TRUE(check.ok()) << check;
        for (const Transfer& t : ExpandTransfers(*plan)) {
          ASSERT_LT(t.step, plan->num_steps);
        }
      }
    }
  }
}

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  const auto [algorithm, op, shape] = info.param;
  return absl::StrCat(Algorithm_Name(algorithm), "_", CollectiveOp_Name(op),
                      "_", shape.first, "x", shape.second);
}

INSTANTIATE_TEST_SUITE_P(
    Hier, HierPlanTest,
    testing::Combine(
        testing::Values(HRING, TORUS2D, HORING),
        testing::Values(ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE, BROADCAST),
        // per_node x nodes. 3x3 is PaRO's drawing: 9 GPUs in 3 groups.
        testing::Values(std::pair{2, 2}, std::pair{3, 3}, std::pair{3, 5},
                        std::pair{5, 3}, std::pair{2, 8}, std::pair{8, 2},
                        std::pair{16, 8}, std::pair{8, 16}, std::pair{1, 7},
                        std::pair{7, 1}, std::pair{8, 128})),
    CaseName);

// ---- structure --------------------------------------------------------------

Plan MustPlan(const PlanRequest& request) {
  absl::StatusOr<Plan> plan = MakePlan(request);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : Plan();
}

TEST(HierStructure, ChannelsSplitEveryChunkAndShareSteps) {
  for (Algorithm a : {HRING, TORUS2D, HORING}) {
    for (CollectiveOp op :
         {ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE, BROADCAST}) {
      SCOPED_TRACE(absl::StrCat(Algorithm_Name(a), " ", CollectiveOp_Name(op)));
      const int64_t count = 15 * 1000 + 7;
      const Plan one = MustPlan(Request(a, op, 3, 5, count, 1, 4));
      const Plan three = MustPlan(Request(a, op, 3, 5, count, 3, 4));
      EXPECT_EQ(one.num_steps, three.num_steps);
      const PlanVolume v1 = CountVolume(one);
      const PlanVolume v3 = CountVolume(three);
      EXPECT_EQ(v1.intra_node, v3.intra_node);
      EXPECT_EQ(v1.inter_node, v3.inter_node);
      // Channel c only touches sub-range c of the chunks.
      std::vector<int> channel_of(count);
      for (int m = 0; m < 15; ++m) {
        const Range chunk = ChunkRange(count, 15, m);
        for (int c = 0; c < 3; ++c) {
          const Range sub = ChunkRange(chunk.count, 3, c);
          for (int64_t e = 0; e < sub.count; ++e) {
            channel_of[chunk.offset + sub.offset + e] = c;
          }
        }
      }
      for (const Transfer& t : ExpandTransfers(three)) {
        for (int64_t e = t.offset; e < t.offset + t.count; ++e) {
          ASSERT_EQ(channel_of[e], t.channel) << "step " << t.step;
        }
      }
    }
  }
}

TEST(HierStructure, OneLevelShapesAreTheFlatRing) {
  // 1x7 and 7x1: a ring of 7, 6 steps for an all-gather.
  for (Algorithm a : {HRING, TORUS2D, HORING}) {
    EXPECT_EQ(MustPlan(Request(a, ALL_GATHER, 1, 7, 70)).num_steps, 6);
    EXPECT_EQ(MustPlan(Request(a, ALL_GATHER, 7, 1, 70)).num_steps, 6);
    EXPECT_EQ(MustPlan(Request(a, ALL_REDUCE, 7, 1, 70)).num_steps, 12);
  }
}

TEST(HierStructure, OnlyLeadersUseTheNetworkInHring) {
  for (CollectiveOp op : {ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE, BROADCAST}) {
    const Plan plan = MustPlan(Request(HRING, op, 4, 3, 1200, 2, 6));
    for (const Transfer& t : ExpandTransfers(plan)) {
      if (t.src / 4 != t.dst / 4) {
        EXPECT_EQ(t.src % 4, 0) << CollectiveOp_Name(op);
        EXPECT_EQ(t.dst % 4, 0) << CollectiveOp_Name(op);
      }
    }
  }
}

TEST(HierStructure, EveryGpuUsesTheNetworkInTorusAndHoring) {
  for (Algorithm a : {TORUS2D, HORING}) {
    for (CollectiveOp op : {ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE}) {
      const Plan plan = MustPlan(Request(a, op, 4, 3, 1200));
      std::set<int> senders;
      for (const Transfer& t : ExpandTransfers(plan)) {
        if (t.src / 4 != t.dst / 4) senders.insert(t.src);
      }
      EXPECT_EQ(senders.size(), 12u) << Algorithm_Name(a);
    }
  }
}

TEST(HierErrors, UnknownOpIsRejected) {
  for (Algorithm a : {HRING, TORUS2D, HORING}) {
    absl::StatusOr<Plan> plan =
        MakePlan(Request(a, static_cast<CollectiveOp>(99), 2, 2, 8));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find("op"), std::string::npos);
  }
}

// ---- volumes and steps on 8 per node x 8 nodes -----------------------------
//
// N = 64 GPUs, M = 8 per node, g = 8 nodes, count S = 64000: chunk c = 1000,
// node block B = M*c = 8000, column piece = g*c = 8000.

constexpr int kM = 8;
constexpr int kG = 8;
constexpr int kN = kM * kG;
constexpr int64_t kChunk = 1000;
constexpr int64_t kCount = kN * kChunk;
constexpr int64_t kBlock = kM * kChunk;

Plan Plan8x8(Algorithm a, CollectiveOp op, int root = 0) {
  return MustPlan(Request(a, op, kM, kG, kCount, 1, root));
}

// Steps with both an intra-node and an inter-node transfer.
int StepsUsingBothLevels(const Plan& plan) {
  std::map<int, std::pair<bool, bool>> levels;  // step -> (intra, inter)
  for (const Transfer& t : ExpandTransfers(plan)) {
    const bool inter = plan.shape.NodeOf(t.src) != plan.shape.NodeOf(t.dst);
    (inter ? levels[t.step].second : levels[t.step].first) = true;
  }
  int both = 0;
  for (const auto& [step, used] : levels) both += used.first && used.second;
  return both;
}

// Per step, the most elements one GPU sends on one level (NVLink or NIC),
// summed over steps: the plan's time when both levels have the same
// bandwidth, every GPU has one port per level, and the levels work in
// parallel. It shows what overlapping buys; step counts do not.
int64_t BusiestPortSum(const Plan& plan) {
  std::vector<std::map<std::pair<int, bool>, int64_t>> sent(plan.num_steps);
  for (const Transfer& t : ExpandTransfers(plan)) {
    const bool inter = plan.shape.NodeOf(t.src) != plan.shape.NodeOf(t.dst);
    sent[t.step][{t.src, inter}] += t.count;
  }
  int64_t total = 0;
  for (const auto& step : sent) {
    int64_t busiest = 0;
    for (const auto& [port, elements] : step) {
      busiest = std::max(busiest, elements);
    }
    total += busiest;
  }
  return total;
}

TEST(HierVolume, Torus2dAllGather) {
  const Plan plan = Plan8x8(TORUS2D, ALL_GATHER);
  const PlanVolume v = CountVolume(plan);
  // Inter: every GPU sends g-1 chunks on its column ring: 64*7*1000.
  EXPECT_EQ(v.inter_node, kN * (kG - 1) * kChunk);
  EXPECT_EQ(v.inter_node, 448'000);
  // Intra: every GPU sends M-1 column pieces of g chunks: 64*7*8*1000.
  EXPECT_EQ(v.intra_node, kN * (kM - 1) * kG * kChunk);
  EXPECT_EQ(v.intra_node, 3'584'000);
  // (g-1) column steps, then (M-1) node steps.
  EXPECT_EQ(plan.num_steps, (kG - 1) + (kM - 1));
}

TEST(HierVolume, HoringAllGatherMovesWhatTorusMovesButOverlaps) {
  const Plan horing = Plan8x8(HORING, ALL_GATHER);
  const Plan torus = Plan8x8(TORUS2D, ALL_GATHER);
  const PlanVolume h = CountVolume(horing);
  const PlanVolume t = CountVolume(torus);
  EXPECT_EQ(h.inter_node, t.inter_node);
  EXPECT_EQ(h.intra_node, t.intra_node);
  // Inter steps 0..g-2; row j's intra ring at steps j..j+M-2; the last row
  // (j = g-1) ends at step g+M-3: g+M-2 = 14 steps. TORUS2D's sequential
  // phases also take (g-1)+(M-1) = 14; each of its intra steps moves g
  // chunks per GPU, where HO-Ring's spread over the whole plan.
  EXPECT_EQ(horing.num_steps, kG + kM - 2);
  EXPECT_EQ(torus.num_steps, 14);
  // The overlap is real: steps 0..g-2 carry an inter step and at least one
  // row's intra ring; TORUS2D never drives both levels in one step.
  EXPECT_EQ(StepsUsingBothLevels(horing), kG - 1);
  EXPECT_EQ(StepsUsingBothLevels(torus), 0);
  // Busiest-port sum. TORUS2D: 7 inter steps of 1 chunk + 7 intra steps of
  // g = 8 chunks = 63 chunks. HO-Ring: at step t the busiest GPU sends one
  // chunk per active row on NVLink and 1 on its NIC; rows active per step
  // 1,2,..,7,7,6,..,1 = 56 = g*(M-1) chunks: the NIC time is hidden.
  EXPECT_EQ(BusiestPortSum(torus), 63 * kChunk);
  EXPECT_EQ(BusiestPortSum(horing), 56 * kChunk);
}

TEST(HierVolume, HringAllGather) {
  const Plan plan = Plan8x8(HRING, ALL_GATHER);
  const PlanVolume v = CountVolume(plan);
  // Inter: g leaders each send g-1 node blocks: 8*7*8000. The same total as
  // TORUS2D, but on 8 NICs instead of 64.
  EXPECT_EQ(v.inter_node, kG * (kG - 1) * kBlock);
  EXPECT_EQ(v.inter_node, 448'000);
  // Intra: node ring all-gather, g*M*(M-1)*c = 448000, plus the chain: per
  // node M-1 hops of g-1 blocks, g*(M-1)*(g-1)*B = 3136000.
  EXPECT_EQ(v.intra_node,
            kG * kM * (kM - 1) * kChunk + kG * (kM - 1) * (kG - 1) * kBlock);
  EXPECT_EQ(v.intra_node, 3'584'000);
  // (M-1) intra + (g-1) leader ring + chain of g-1 pieces over M-1 hops.
  EXPECT_EQ(plan.num_steps, (kM - 1) + (kG - 1) + (kG - 1) + (kM - 1) - 1);
}

TEST(HierVolume, ReduceScatters) {
  // TORUS2D and HO-Ring: the all-gather mirrored, same volume and steps.
  for (Algorithm a : {TORUS2D, HORING}) {
    const Plan plan = Plan8x8(a, REDUCE_SCATTER);
    const PlanVolume v = CountVolume(plan);
    EXPECT_EQ(v.inter_node, 448'000) << Algorithm_Name(a);
    EXPECT_EQ(v.intra_node, 3'584'000) << Algorithm_Name(a);
    EXPECT_EQ(plan.num_steps, 14) << Algorithm_Name(a);
  }
  EXPECT_EQ(BusiestPortSum(Plan8x8(HORING, REDUCE_SCATTER)), 56 * kChunk);
  // HRING: intra ring reduce-scatter of column pieces 8*8*7*8000 = 3584000,
  // gather to the leader 8*7*8000 = 448000, scatter 8*7*1000 = 56000; inter
  // the leader ring, 8*7*8000 = 448000. Steps 7 + 1 + 7 + 1.
  const Plan hring = Plan8x8(HRING, REDUCE_SCATTER);
  const PlanVolume v = CountVolume(hring);
  EXPECT_EQ(v.inter_node, 448'000);
  EXPECT_EQ(v.intra_node, 3'584'000 + 448'000 + 56'000);
  EXPECT_EQ(hring.num_steps, 16);
}

TEST(HierVolume, AllReduces) {
  // TORUS2D and HO-Ring: reduce-scatter then all-gather, twice each level.
  for (Algorithm a : {TORUS2D, HORING}) {
    const Plan plan = Plan8x8(a, ALL_REDUCE);
    const PlanVolume v = CountVolume(plan);
    EXPECT_EQ(v.inter_node, 2 * 448'000) << Algorithm_Name(a);
    EXPECT_EQ(v.intra_node, 2 * 3'584'000) << Algorithm_Name(a);
    EXPECT_EQ(plan.num_steps, 28) << Algorithm_Name(a);
  }
  // HRING: reduce to leader 3584000 + 448000, leader all-reduce 2*448000,
  // chain broadcast of the whole buffer: 8 nodes * 7 hops * 64000. Steps:
  // 7 + 1 + 14 + (8 pieces + 8 members - 2).
  const Plan hring = Plan8x8(HRING, ALL_REDUCE);
  const PlanVolume v = CountVolume(hring);
  EXPECT_EQ(v.inter_node, 896'000);
  EXPECT_EQ(v.intra_node, 3'584'000 + 448'000 + kG * (kM - 1) * kCount);
  EXPECT_EQ(hring.num_steps, 36);
}

TEST(HierVolume, Broadcasts) {
  // TORUS2D and HO-Ring from root 0: scatter of 7 column pieces (56000),
  // 8 column chains of 7 hops carrying 8000 each (448000 inter), ring
  // all-gather of the column pieces in 8 nodes (8*8*7*8000 = 3584000).
  // Steps: 1 + (8 pieces + 8 hops - 2) + 7 = 22 for both; HO-Ring's intra
  // rings run while the chains still move.
  for (Algorithm a : {TORUS2D, HORING}) {
    const Plan plan = Plan8x8(a, BROADCAST);
    const PlanVolume v = CountVolume(plan);
    EXPECT_EQ(v.inter_node, 448'000) << Algorithm_Name(a);
    EXPECT_EQ(v.intra_node, 56'000 + 3'584'000) << Algorithm_Name(a);
    EXPECT_EQ(plan.num_steps, 22) << Algorithm_Name(a);
  }
  // TORUS2D: scatter (step 0), chains only (1..14), intra only (15..21).
  // HO-Ring: a node's row rings start as its rows arrive: the root's node
  // all-gathers its rows at steps 1..7, the other nodes from step 2 on,
  // while the chains run at steps 1..14; so steps 1..14 carry both.
  // (BusiestPortSum does not show this gain: the chain staggers the nodes
  // by hop, and it takes each step's maximum over nodes that are out of
  // phase with each other, as a global barrier per step would.)
  EXPECT_EQ(StepsUsingBothLevels(Plan8x8(TORUS2D, BROADCAST)), 0);
  EXPECT_EQ(StepsUsingBothLevels(Plan8x8(HORING, BROADCAST)), 14);
  // HRING from a non-leader root 9 (node 1, local 1): 64000 to its leader,
  // a leader chain of 7 hops (7*64000 inter), intra chains: 7 nodes * 7 hops
  // + the root's node, which skips the root, 6 hops, of 64000 each.
  const Plan hring = Plan8x8(HRING, BROADCAST, 9);
  const PlanVolume v = CountVolume(hring);
  EXPECT_EQ(v.inter_node, 7 * kCount);
  EXPECT_EQ(v.intra_node, kCount + (7 * 7 + 6) * kCount);
  // 1 + (8 node blocks + 8 leaders - 2) + (8 column pieces + 8 members - 2).
  EXPECT_EQ(hring.num_steps, 29);
}

}  // namespace
}  // namespace shardsim
