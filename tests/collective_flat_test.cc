// Flat collective algorithms (ring, direct, tree, SHARP): every op proven
// on real data by CheckPlan over many shapes, counts, channels and roots,
// plus traffic volumes derived by hand.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/collective/executor.h"
#include "sim/collective/plan.h"
#include "sim/collective/ring.h"

namespace shardsim {
namespace {

constexpr CollectiveOp kOps[] = {ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE,
                                 BROADCAST};

// per_node x nodes, as in the brief. 8x128 is 1024 members.
const std::vector<PlanShape> kSmallShapes = {
    {1, 2}, {2, 1}, {3, 3}, {8, 2}, {2, 8}};

PlanRequest Request(Algorithm algorithm, CollectiveOp op, PlanShape shape,
                    int64_t count, int channels = 1, int root = 0) {
  PlanRequest r;
  r.op = op;
  r.algorithm = algorithm;
  r.shape = shape;
  r.count = count;
  r.channels = channels;
  r.root = root;
  return r;
}

std::string Describe(const PlanRequest& r) {
  return absl::StrCat(Algorithm_Name(r.algorithm), " ", CollectiveOp_Name(r.op),
                      " on ", r.shape.per_node, "x", r.shape.nodes, " count ",
                      r.count, " channels ", r.channels, " root ", r.root);
}

void ExpectCorrect(const PlanRequest& request) {
  SCOPED_TRACE(Describe(request));
  absl::StatusOr<Plan> plan = MakePlan(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const absl::Status check = CheckPlan(*plan);
  EXPECT_TRUE(check.ok()) << check;
  for (const Transfer& t : ExpandTransfers(*plan)) {
    ASSERT_GE(t.step, 0);
    ASSERT_LT(t.step, plan->num_steps);
  }
}

// Counts that divide and counts that do not, including fewer elements than
// members (so that some chunks are empty).
std::vector<int64_t> Counts(int p) {
  return {0, 1, p - 1 > 0 ? p - 1 : 2, p + 3, 7 * p + 5, 4 * p};
}

std::vector<int> Roots(int p) {
  std::set<int> roots = {0, p / 2, p - 1};
  return {roots.begin(), roots.end()};
}

bool SharpRefuses(PlanShape shape) {
  return shape.nodes == 1 && shape.size() > 1;
}

// Every op over the small shapes, every count, the given channels and every
// root.
void ExpectCorrectOnSmallShapes(Algorithm algorithm,
                                const std::vector<int>& channels) {
  for (PlanShape shape : kSmallShapes) {
    if (algorithm == SHARP && SharpRefuses(shape)) continue;
    const int p = shape.size();
    for (CollectiveOp op : kOps) {
      for (int64_t count : Counts(p)) {
        for (int k : channels) {
          const std::vector<int> roots =
              op == BROADCAST ? Roots(p) : std::vector<int>{0};
          for (int root : roots) {
            ExpectCorrect(Request(algorithm, op, shape, count, k, root));
          }
        }
      }
    }
  }
}

// The larger shapes, count p + 3, every op; broadcast from a middle root.
void ExpectCorrectOnLargeShapes(Algorithm algorithm,
                                const std::vector<int>& channels) {
  for (PlanShape shape : {PlanShape{8, 16}, PlanShape{8, 128}}) {
    const int p = shape.size();
    for (CollectiveOp op : kOps) {
      for (int k : channels) {
        ExpectCorrect(Request(algorithm, op, shape, p + 3, k,
                              op == BROADCAST ? p / 2 + 1 : 0));
      }
    }
  }
}

// --- correctness ------------------------------------------------------------

TEST(FlatRing, AllOpsSmallShapes) {
  ExpectCorrectOnSmallShapes(RING, {1, 2, 4});
}
TEST(FlatRing, AllOpsLargeShapes) { ExpectCorrectOnLargeShapes(RING, {1, 4}); }
TEST(FlatDirect, AllOpsSmallShapes) {
  ExpectCorrectOnSmallShapes(DIRECT, {1, 2});
}
TEST(FlatDirect, AllOpsLargeShapes) { ExpectCorrectOnLargeShapes(DIRECT, {1}); }
TEST(FlatDirect, PassesAreStoredAsWhatTheyAre) {
  // An all-to-all across 32 nodes: one pass of 256 chunks, not
  // 255 x 256 x 8 = 522,240 transfers, which expanding lists (qgZ across
  // 2048 nodes would be 33.5 million). count 256 x 80: every channel of
  // every chunk moves 10 elements.
  absl::StatusOr<Plan> plan =
      MakePlan(Request(DIRECT, REDUCE_SCATTER, {8, 32}, 256 * 80, 8));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->transfers.empty());
  ASSERT_EQ(plan->directs.size(), 1u);
  EXPECT_EQ(plan->directs[0].chunks.size(), 256u);
  EXPECT_EQ(plan->num_steps, 255);
  const std::vector<Transfer> all = ExpandTransfers(*plan);
  EXPECT_EQ(all.size(), 255u * 256 * 8);
  // Step 4 (t = 5): member 254 adds chunk (254 + 5) mod 256 = 3 into 3.
  const Transfer& x = all[4 * 256 * 8 + 254 * 8 + 7];  // channel 7
  EXPECT_EQ(x.step, 4);
  EXPECT_EQ(x.src, 254);
  EXPECT_EQ(x.dst, 3);
  EXPECT_EQ(x.offset, 3 * 80 + 70);
  EXPECT_EQ(x.count, 10);
  EXPECT_TRUE(x.reduce);
}

TEST(FlatTree, AllOpsSmallShapes) {
  ExpectCorrectOnSmallShapes(TREE, {1, 2, 3});
}
TEST(FlatTree, AllOpsLargeShapes) { ExpectCorrectOnLargeShapes(TREE, {1, 2}); }
TEST(FlatSharp, AllOpsSmallShapes) {
  ExpectCorrectOnSmallShapes(SHARP, {1, 2});
}
TEST(FlatSharp, AllOpsLargeShapes) {
  ExpectCorrectOnLargeShapes(SHARP, {1, 2});
}

TEST(FlatAll, OddSizesAndTinyCounts) {
  // Odd member counts exercise the shifted second tree; count 1 leaves all
  // but one chunk empty.
  for (Algorithm a : {RING, DIRECT, TREE, SHARP}) {
    for (PlanShape shape : {PlanShape{1, 5}, PlanShape{1, 13}, PlanShape{7, 2},
                            PlanShape{5, 3}}) {
      for (CollectiveOp op : kOps) {
        for (int64_t count : {int64_t{1}, int64_t{2 * shape.size() + 1}}) {
          ExpectCorrect(Request(a, op, shape, count, 3, shape.size() - 2));
        }
      }
    }
  }
}

TEST(FlatSharp, RefusesAGroupInsideOneNode) {
  for (PlanShape shape : {PlanShape{2, 1}, PlanShape{8, 1}}) {
    for (CollectiveOp op : kOps) {
      absl::StatusOr<Plan> plan = MakePlan(Request(SHARP, op, shape, 16));
      ASSERT_FALSE(plan.ok());
      EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(plan.status().message(),
                "sharp: the group lies inside one node; in-network reduction "
                "needs a group that spans nodes");
    }
  }
  // One member needs no switch and moves nothing.
  absl::StatusOr<Plan> one = MakePlan(Request(SHARP, ALL_REDUCE, {1, 1}, 16));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(ExpandTransfers(*one).empty());
}

// --- ring helpers (ring.h), as the hierarchical algorithms use them ----------

TEST(FlatRingHelpers, RingOverAnArbitraryMemberList) {
  // Members 5, 2, 7 of an 8-member group form a ring; position r owns a
  // range that is neither contiguous with the others nor in member order.
  const std::vector<int> order = {5, 2, 7};
  const std::vector<Range> ranges = {{10, 3}, {0, 4}, {20, 5}};
  Plan plan;
  plan.shape = {8, 1};
  plan.count = 32;
  EXPECT_EQ(internal::AppendRingAllReduce(order, ranges, 4, 1, &plan), 4);
  std::vector<std::vector<int64_t>> buffers(8, std::vector<int64_t>(32));
  for (int m = 0; m < 8; ++m) {
    for (int e = 0; e < 32; ++e) buffers[m][e] = 100 * m + e;
  }
  for (const Transfer& t : ExpandTransfers(plan)) {
    EXPECT_GE(t.step, 4);
    EXPECT_LT(t.step, 8);
    EXPECT_EQ(t.channel, 1);
  }
  ASSERT_TRUE(ExecutePlan(plan, &buffers).ok());
  for (int m : order) {
    for (const Range& r : ranges) {
      for (int64_t e = r.offset; e < r.offset + r.count; ++e) {
        EXPECT_EQ(buffers[m][e], (500 + 200 + 700) + 3 * e) << m << " " << e;
      }
    }
  }
  // Members outside the ring are untouched.
  EXPECT_EQ(buffers[0][0], 0);
}

TEST(FlatRingHelpers, FlatRingOrderRotatesInsideNodes) {
  // As many channels as GPUs per node (or more): channel c starts at c.
  EXPECT_EQ(internal::FlatRingOrder({4, 2}, 0, 8),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(internal::FlatRingOrder({4, 2}, 1, 8),
            (std::vector<int>{1, 2, 3, 0, 5, 6, 7, 4}));
  EXPECT_EQ(internal::FlatRingOrder({4, 2}, 6, 8),
            (std::vector<int>{2, 3, 0, 1, 6, 7, 4, 5}));
}

TEST(FlatRingHelpers, FewChannelsSpreadTheirCrossingsOverTheNode) {
  // 4 channels on 8 GPUs per node start at 0, 2, 4, 6, so they leave a node
  // from locals 7, 1, 3, 5: with two GPUs per NIC (0-1, 2-3, ...), four
  // different NICs, where starting at 0, 1, 2, 3 would leave from 7, 0, 1,
  // 2 and put two channels on NIC 0.
  std::vector<int> leaving;
  for (int c = 0; c < 4; ++c) {
    leaving.push_back(internal::FlatRingOrder({8, 2}, c, 4)[7]);
  }
  EXPECT_EQ(leaving, (std::vector<int>{7, 1, 3, 5}));
}

// --- volumes -----------------------------------------------------------------

PlanVolume Volume(const PlanRequest& request) {
  absl::StatusOr<Plan> plan = MakePlan(request);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? CountVolume(*plan) : PlanVolume{};
}

TEST(FlatVolume, RingMovesTheTextbookAmount) {
  // 8x8, N = 64 members, count = 64 * 1000: chunks of 1000. Every member
  // sends p - 1 = 63 chunks, so each of the 64 ring edges carries 63000.
  // g = 8 edges cross a node boundary (7 between nodes and the wrap-around).
  //   inter = 8 * 63000  = 504000
  //   intra = 56 * 63000 = 3528000
  const PlanShape shape{8, 8};
  for (CollectiveOp op : {ALL_GATHER, REDUCE_SCATTER}) {
    const PlanVolume v = Volume(Request(RING, op, shape, 64000));
    EXPECT_EQ(v.inter_node, 504000) << CollectiveOp_Name(op);
    EXPECT_EQ(v.intra_node, 3528000) << CollectiveOp_Name(op);
    EXPECT_EQ(v.from_switch, 0);
  }
  // All-reduce is reduce-scatter then all-gather: twice both.
  const PlanVolume ar = Volume(Request(RING, ALL_REDUCE, shape, 64000));
  EXPECT_EQ(ar.inter_node, 1008000);
  EXPECT_EQ(ar.intra_node, 7056000);
  // Channels split the data, not multiply it: the same totals with k = 4
  // (each chunk of 1000 cut into 4 x 250).
  const PlanVolume ar4 = Volume(Request(RING, ALL_REDUCE, shape, 64000, 4));
  EXPECT_EQ(ar4.inter_node, 1008000);
  EXPECT_EQ(ar4.intra_node, 7056000);
}

TEST(FlatVolume, RingChannelsLeaveNodesThroughDistinctGpus) {
  // With k = 4 channels on 8 GPUs per node, channel c starts each node at
  // local s = 2c (ring.h: spread evenly), so its ring leaves node n from
  // local 2c - 1 and enters node n + 1 at local 2c: locals {7, 1, 3, 5} send
  // and {0, 2, 4, 6} receive the inter-node traffic of every node.
  const PlanShape shape{8, 8};
  absl::StatusOr<Plan> plan =
      MakePlan(Request(RING, ALL_GATHER, shape, 64000, 4));
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::set<int>> senders(shape.nodes), receivers(shape.nodes);
  for (const Transfer& t : ExpandTransfers(*plan)) {
    if (shape.NodeOf(t.src) == shape.NodeOf(t.dst)) continue;
    EXPECT_EQ(t.src % 8, (2 * t.channel + 7) % 8);
    EXPECT_EQ(t.dst % 8, 2 * t.channel);
    EXPECT_EQ(shape.NodeOf(t.dst), (shape.NodeOf(t.src) + 1) % shape.nodes);
    senders[shape.NodeOf(t.src)].insert(t.src % 8);
    receivers[shape.NodeOf(t.dst)].insert(t.dst % 8);
  }
  for (int n = 0; n < shape.nodes; ++n) {
    EXPECT_EQ(senders[n], (std::set<int>{7, 1, 3, 5})) << "node " << n;
    EXPECT_EQ(receivers[n], (std::set<int>{0, 2, 4, 6})) << "node " << n;
  }
}

TEST(FlatVolume, RingPerMemberTraffic) {
  // 3x3 with count 9 * 10: every member sends (p - 1) / p * count = 80
  // elements for all-gather and reduce-scatter, 160 for all-reduce.
  for (CollectiveOp op : {ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE}) {
    absl::StatusOr<Plan> plan = MakePlan(Request(RING, op, {3, 3}, 90, 2));
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::vector<int64_t> sent(9, 0);
    for (const Transfer& t : ExpandTransfers(*plan)) sent[t.src] += t.count;
    for (int m = 0; m < 9; ++m) {
      EXPECT_EQ(sent[m], op == ALL_REDUCE ? 160 : 80)
          << CollectiveOp_Name(op) << " member " << m;
    }
  }
}

TEST(FlatVolume, DirectAllGather) {
  // 8x4, N = 32, count = 32 * 100: chunks of 100. Each member sends its
  // chunk to the 24 members on other nodes and the 7 on its own.
  //   inter = 32 * 24 * 100 = 76800,  intra = 32 * 7 * 100 = 22400.
  const PlanVolume v = Volume(Request(DIRECT, ALL_GATHER, {8, 4}, 3200));
  EXPECT_EQ(v.inter_node, 76800);
  EXPECT_EQ(v.intra_node, 22400);
  // Broadcast: the root sends the whole buffer to the 31 others, 24 of
  // them on other nodes: inter = 24 * 3200, intra = 7 * 3200.
  const PlanVolume b = Volume(Request(DIRECT, BROADCAST, {8, 4}, 3200, 1, 9));
  EXPECT_EQ(b.inter_node, 24 * 3200);
  EXPECT_EQ(b.intra_node, 7 * 3200);
  // Reduce-scatter: chunk d comes from the 31 others, 7 of them on d's
  // node: the same volume. All-reduce: one pass of each, twice it.
  const PlanVolume rs = Volume(Request(DIRECT, REDUCE_SCATTER, {8, 4}, 3200));
  EXPECT_EQ(rs.inter_node, 76800);
  EXPECT_EQ(rs.intra_node, 22400);
  const PlanVolume ar = Volume(Request(DIRECT, ALL_REDUCE, {8, 4}, 3200));
  EXPECT_EQ(ar.inter_node, 2 * 76800);
  EXPECT_EQ(ar.intra_node, 2 * 22400);
  // Uneven chunks, 3203 = 32 x 100 + 3: chunks 0..2 hold 101; each still
  // crosses 24 inter and 7 intra hops: 3203 x 24, 3203 x 7.
  const PlanVolume u = Volume(Request(DIRECT, ALL_GATHER, {8, 4}, 3203));
  EXPECT_EQ(u.inter_node, 3203 * 24);
  EXPECT_EQ(u.intra_node, 3203 * 7);
}

TEST(FlatVolume, SharpAllReduce) {
  // 8x4, N = 32, count = 8000; intra chunks of count / 8 = 1000.
  //   GPU to switch: every member sends its reduced intra chunk:
  //     N * count / 8 = 32000, and the switch returns as much.
  //   intra: ring reduce-scatter + all-gather inside each node, each member
  //     sending (8 - 1) / 8 * count = 7000 per phase:
  //     2 * 7000 * 32 = 448000.
  const PlanVolume v = Volume(Request(SHARP, ALL_REDUCE, {8, 4}, 8000, 2));
  EXPECT_EQ(v.inter_node, 32000);
  EXPECT_EQ(v.from_switch, 32000);
  EXPECT_EQ(v.intra_node, 448000);
  // One member per node: no intra phase, the whole buffer goes through the
  // switch: 4 * 8000 each way.
  const PlanVolume one = Volume(Request(SHARP, ALL_REDUCE, {1, 4}, 8000));
  EXPECT_EQ(one.inter_node, 32000);
  EXPECT_EQ(one.from_switch, 32000);
  EXPECT_EQ(one.intra_node, 0);
}

TEST(FlatVolume, TreeEdgesCarryTheirHalf) {
  // All-reduce: each of the p - 1 edges of each tree carries that tree's
  // half up and then down: 2 trees * (p - 1) * 2 * count / 2 =
  // 2 * (p - 1) * count, the same as the ring. p = 16, count = 1600: 48000.
  PlanVolume v = Volume(Request(TREE, ALL_REDUCE, {8, 2}, 1600));
  EXPECT_EQ(v.inter_node + v.intra_node, 48000);
  // All-gather: an edge carries the child's subtree's part of the half up
  // and the rest of the half down, so again count / 2 per edge and tree:
  // (p - 1) * count = 24000, the ring's amount.
  v = Volume(Request(TREE, ALL_GATHER, {8, 2}, 1600));
  EXPECT_EQ(v.inter_node + v.intra_node, 24000);
  // Broadcast: count / 2 per edge and tree: (p - 1) * count / 2 * 2.
  v = Volume(Request(TREE, BROADCAST, {8, 2}, 1600, 1, 5));
  EXPECT_EQ(v.inter_node + v.intra_node, 24000);
}

// The (child, parent) edges of an all-reduce's channel `channel` of
// `channels`, read off the reduce-up transfers.
std::set<std::pair<int, int>> ReduceEdges(PlanShape shape, int channels,
                                          int channel) {
  std::set<std::pair<int, int>> edges;
  absl::StatusOr<Plan> plan = MakePlan(
      Request(TREE, ALL_REDUCE, shape, 64 * shape.size() * channels, channels));
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (plan.ok()) {
    for (const Transfer& t : ExpandTransfers(*plan)) {
      if (t.reduce && t.channel == channel) edges.insert({t.src, t.dst});
    }
  }
  return edges;
}

// Tree-0 (channel 0) and tree-1 (channel 1) edges over p one-member nodes.
std::pair<std::set<std::pair<int, int>>, std::set<std::pair<int, int>>>
TreeEdges(int p) {
  return {ReduceEdges({1, p}, 1, 0), ReduceEdges({1, p}, 1, 1)};
}

TEST(FlatTree, MatchesNcclDoubleBinaryTree) {
  /* NCCL's illustration for 14 ranks (src/graph/trees.cc):
       0---------------8
                ______/ \______
               4               12
             /   \            /  \
           2       6       10     \
          / \     / \     /  \     \
         1   3   5   7   9   11    13                                   */
  const std::set<std::pair<int, int>> tree14 = {
      {1, 2}, {3, 2}, {5, 6},   {7, 6}, {9, 10}, {11, 10}, {13, 12},
      {2, 4}, {6, 4}, {10, 12}, {4, 8}, {12, 8}, {8, 0}};
  auto [t0, t1] = TreeEdges(14);
  EXPECT_EQ(t0, tree14);
  // Even p: the second tree is the mirror image, rooted at 13.
  std::set<std::pair<int, int>> mirror;
  for (auto [a, b] : tree14) mirror.insert({13 - a, 13 - b});
  EXPECT_EQ(t1, mirror);

  // Odd p = 13: the first tree drops 13; the second is shifted by one,
  // rooted at 1: 1 <- 9 <- {5, 0}, 0 <- 11, ...
  std::set<std::pair<int, int>> tree13 = tree14;
  tree13.erase({13, 12});
  auto [u0, u1] = TreeEdges(13);
  EXPECT_EQ(u0, tree13);
  std::set<std::pair<int, int>> shifted;
  for (auto [a, b] : tree13) shifted.insert({(a + 1) % 13, (b + 1) % 13});
  EXPECT_EQ(u1, shifted);
  EXPECT_TRUE(u1.count({9, 1}) && u1.count({0, 9}) && u1.count({11, 0}));
}

TEST(FlatTree, BuildsItsTreesOverNodesWithAChainInEachNode) {
  // NCCL's trees (connect.cc): the binary trees over nodes, a chain inside
  // each node from the channel's own member. Two nodes of 8, channel 0:
  // tree 0 is rooted at node 0's head, member 0; node 1 (child type 1 of
  // node 0) links its head, 8, to node 0's head. Tree 1 mirrors the nodes.
  std::set<std::pair<int, int>> tree0 = {{8, 0}};
  std::set<std::pair<int, int>> tree1 = {{0, 8}};
  for (int i = 1; i < 8; ++i) {
    tree0.insert({i, i - 1});
    tree0.insert({8 + i, 8 + i - 1});
    tree1.insert({i, i - 1});
    tree1.insert({8 + i, 8 + i - 1});
  }
  EXPECT_EQ(ReduceEdges({8, 2}, 2, 0), tree0);
  EXPECT_EQ(ReduceEdges({8, 2}, 2, 2), tree1);
  // Channel 1's chains start at each node's member 1: 1 -> 2 -> ... -> 7
  // -> 0, heads 1 and 9.
  const std::set<std::pair<int, int>> channel1 = ReduceEdges({8, 2}, 2, 1);
  EXPECT_TRUE(channel1.count({9, 1}) && channel1.count({0, 7}) &&
              channel1.count({8, 15}) && channel1.count({2, 1}));
  EXPECT_EQ(channel1.size(), 15u);

  // Four nodes of two, tree 0 over the nodes (ncclGetBtree): node 2's
  // parent is node 0 (child type 1: to the head, 0), node 1's is node 2
  // (type 0, rank 1 < 2: to node 2's second member, 5), node 3's is node 2
  // (type 1: to the head, 4).
  const std::set<std::pair<int, int>> four = {{1, 0}, {4, 0}, {5, 4}, {2, 5},
                                              {3, 2}, {6, 4}, {7, 6}};
  EXPECT_EQ(ReduceEdges({2, 4}, 1, 0), four);
}

TEST(FlatTree, TwoNodesSendTheBufferOnceEachWayBetweenThem) {
  // Each tree crosses between two nodes on one edge, carrying its half up
  // and then down: count elements each way, 2 x count in all, where a ring
  // over 16 members crosses twice with 2 x 15/16 x count each: 3.75 x count.
  // Every edge still carries its tree's half twice: 2 x (p - 1) x count.
  const PlanVolume tree = Volume(Request(TREE, ALL_REDUCE, {8, 2}, 1600, 4));
  EXPECT_EQ(tree.inter_node, 2 * 1600);
  EXPECT_EQ(tree.inter_node + tree.intra_node, 2 * 15 * 1600);
  const PlanVolume ring = Volume(Request(RING, ALL_REDUCE, {8, 2}, 1600, 4));
  EXPECT_EQ(ring.inter_node, 2 * 2 * 15 * 1600 / 16);
}

}  // namespace
}  // namespace shardsim
