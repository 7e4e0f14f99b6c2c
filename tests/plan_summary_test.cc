// Plan summaries (sim/collective/plan_summary.h): a chain stored whole
// summarizes as its transfers listed one by one would, checked by hand on
// small plans and against the expansion for every builder.
#include "sim/collective/plan_summary.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/collective/plan.h"

namespace shardsim {

// Found by argument-dependent lookup, so outside the unnamed namespace.
bool operator==(const Hop& a, const Hop& b) {
  return a.src == b.src && a.dst == b.dst && a.elements == b.elements &&
         a.steps == b.steps && a.inter == b.inter;
}
bool operator==(const StepLoad& a, const StepLoad& b) {
  return a.intra == b.intra && a.inter == b.inter &&
         a.via_switch == b.via_switch;
}

namespace {

void ExpectSameSummary(const PlanSummary& a, const PlanSummary& b) {
  EXPECT_EQ(a.intra_symmetric, b.intra_symmetric);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t i = 0; i < a.stages.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("stage ", i));
    EXPECT_TRUE(a.stages[i].hops == b.stages[i].hops);
    EXPECT_TRUE(a.stages[i].steps == b.stages[i].steps);
    EXPECT_TRUE(a.stages[i].by_step == b.stages[i].by_step);
  }
}

Hop H(int src, int dst, int64_t elements, int steps, bool inter = false) {
  return Hop{src, dst, elements, steps, inter};
}

// A plan with no transfers yet, for a test to fill by hand.
Plan Bare(CollectiveOp op, Algorithm algorithm, PlanShape shape, int64_t count,
          int steps) {
  Plan plan;
  plan.op = op;
  plan.algorithm = algorithm;
  plan.shape = shape;
  plan.count = count;
  plan.num_steps = steps;
  return plan;
}

// A flat ring broadcast over 2 nodes x 2 from member 0, 8 elements, one
// channel: the chain 0 -> 1 -> 2 -> 3 carries 4 pieces of 2 elements,
// piece j over hop h at step j + h, 6 steps. Hop 1 leaves node 0, so steps
// 1..4 (hop 1 busy) are one stage between two intra-node ones. Each runs
// as its hops with the pipeline's floor, as a ring's would: no step lists.
TEST(PlanSummary, ARingBroadcastByHand) {
  absl::StatusOr<Plan> plan = MakePlan(PlanRequest{BROADCAST, RING, {2, 2}, 8});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->chains.size(), 1u);
  EXPECT_TRUE(plan->transfers.empty());
  const PlanSummary s = Summarize(*plan);
  EXPECT_EQ(CountVolume(*plan).intra_node, 16);  // hops 0 and 2, all 8
  EXPECT_EQ(CountVolume(*plan).inter_node, 8);
  ASSERT_EQ(s.stages.size(), 3u);
  EXPECT_TRUE(s.stages[0].hops == std::vector<Hop>{H(0, 1, 2, 1)});
  EXPECT_TRUE((s.stages[0].steps == std::vector<StepLoad>{{2, 0, 0}}));
  // Pieces 1..3 on hop 0, 0..3 on hop 1, 0..2 on hop 2.
  EXPECT_TRUE(
      s.stages[1].hops ==
      (std::vector<Hop>{H(0, 1, 6, 3), H(1, 2, 8, 4, true), H(2, 3, 6, 3)}));
  EXPECT_TRUE(s.stages[1].steps == std::vector<StepLoad>(4, {2, 2, 0}));
  EXPECT_TRUE(s.stages[2].hops == std::vector<Hop>{H(2, 3, 2, 1)});
  EXPECT_TRUE((s.stages[2].steps == std::vector<StepLoad>{{2, 0, 0}}));
  for (const Stage& stage : s.stages) EXPECT_TRUE(stage.by_step.empty());
}

// Messages of one pair in one step add up, whatever they come from: two
// chains over 0 -> 1 -> 2 (A: pieces of 4 and 4 from step 0; B: one piece
// of 2 from step 1) and an explicit transfer of 3 from 0 to 1 at step 1.
//   step 0: 0->1 A0 = 4
//   step 1: 0->1 A1 + B0 + 3 = 9;  1->2 A0 = 4
//   step 2: 1->2 A1 + B0 = 6
// Listed as explicit transfers, the same messages run step by step; with
// the chains, the stage runs as its two hops.
TEST(PlanSummary, ChainsAndTransfersOfAPairAddUpPerStep) {
  Plan plan = Bare(BROADCAST, RING, {3, 1}, 10, 3);
  plan.transfers.push_back(Transfer{1, 0, 0, 1, 0, 3, false});
  plan.chains.push_back(ChainPass{0, 0, {0, 1, 2}, {{0, 4}, {4, 4}}});
  plan.chains.push_back(ChainPass{1, 0, {0, 1, 2}, {{8, 2}}});
  Plan listed = plan;
  listed.transfers = ExpandTransfers(plan);
  listed.chains.clear();
  for (const Plan& p : {plan, listed}) {
    for (bool by_step : {true, false}) {
      const PlanSummary s = Summarize(p, by_step);
      EXPECT_EQ(CountVolume(p).intra_node, 23);
      ASSERT_EQ(s.stages.size(), 1u);
      const Stage& st = s.stages[0];
      EXPECT_TRUE(st.hops ==
                  (std::vector<Hop>{H(0, 1, 13, 2), H(1, 2, 10, 2)}));
      EXPECT_TRUE(st.steps ==
                  (std::vector<StepLoad>{{4, 0, 0}, {9, 0, 0}, {6, 0, 0}}));
      if (!by_step || !p.chains.empty()) {
        EXPECT_TRUE(st.by_step.empty());
        continue;
      }
      EXPECT_TRUE(st.by_step ==
                  (std::vector<std::vector<Hop>>{{H(0, 1, 4, 1)},
                                                 {H(0, 1, 9, 1), H(1, 2, 4, 1)},
                                                 {H(1, 2, 6, 1)}}));
    }
  }
}

// A step's load is its busiest endpoint's, not its largest message: member
// 0 sends 5 to member 1 and 7 to member 2 in step 0 over one NVSwitch port
// (12), then receives 4 from 2 and 3 from 1 in step 1 (7). A tree's stages
// run as their hops (each edge carries its steps one after another); an
// all-to-all's, the same transfers, step by step.
TEST(PlanSummary, AStepLoadsItsBusiestEndpoint) {
  Plan plan = Bare(ALL_GATHER, TREE, {3, 1}, 12, 2);
  plan.transfers = {
      Transfer{0, 0, 0, 1, 0, 5, false}, Transfer{0, 0, 0, 2, 5, 7, false},
      Transfer{1, 0, 1, 0, 0, 3, false}, Transfer{1, 0, 2, 0, 3, 4, false}};
  for (Algorithm a : {TREE, DIRECT}) {
    SCOPED_TRACE(Algorithm_Name(a));
    plan.algorithm = a;
    const PlanSummary s = Summarize(plan);
    ASSERT_EQ(s.stages.size(), 1u);
    EXPECT_TRUE(
        (s.stages[0].steps == std::vector<StepLoad>{{12, 0, 0}, {7, 0, 0}}));
    EXPECT_EQ(s.stages[0].by_step.size(), a == TREE ? 0u : 2u);
  }
  // The switch is no endpoint: what it takes in is every member's, reduced
  // as it passes. Two members send it 6 each: the step's load is 6.
  plan.algorithm = SHARP;
  plan.transfers = {Transfer{0, 0, 0, kSwitch, 0, 6, true},
                    Transfer{0, 0, 1, kSwitch, 0, 6, true}};
  plan.num_steps = 1;
  EXPECT_TRUE(
      (Summarize(plan).stages[0].steps == std::vector<StepLoad>{{0, 0, 6}}));
}

// A hop that a ring pass and explicit transfers both cross is one hop: its
// bytes summed, each step counted once. A ring over members 0, 1, 2 of one
// node, 12 elements in ranges of 4, lag 0: hop r carries all but the range
// its successor starts with, 8, in steps 0 and 1. Transfers add 5 over
// 0 -> 1 in step 1 (a step the ring already counts) and 3 in step 2: hop
// 0 -> 1 carries 16 in 3 steps. A transfer of nothing (1 -> 0) is no hop.
TEST(PlanSummary, ARingAndTransfersOnOneHopAddUp) {
  Plan plan = Bare(ALL_GATHER, RING, {3, 1}, 12, 3);
  RingPass ring;
  ring.order = {0, 1, 2};
  ring.ranges = {{0, 4}, {4, 4}, {8, 4}};
  plan.rings = {ring};
  plan.transfers = {Transfer{0, 0, 1, 0, 0, 0, false},
                    Transfer{1, 0, 0, 1, 0, 5, false},
                    Transfer{2, 0, 0, 1, 5, 3, false}};
  const PlanSummary s = Summarize(plan);
  ASSERT_EQ(s.stages.size(), 1u);
  EXPECT_TRUE((s.stages[0].hops ==
               std::vector<Hop>{H(0, 1, 16, 3), H(1, 2, 8, 2), H(2, 0, 8, 2)}));
}

// A NIC's load counts every GPU on it, each as its member of its group. Two
// nodes, one member each, every node's two GPUs on one NIC (a800_lins: the
// other GPU is the same member of another group running the same plan):
// member 0 sends 10 to member 1 in step 0, so NIC 0 sends 20 and NIC 1
// receives 20. Flat over 2 x 2 with a NIC per node, members 0 and 1 each
// send 10 across (to 2 and 3): NIC 0 sends 20 again. With a NIC per member
// (nothing given), 10 in both.
TEST(PlanSummary, GpusOnANicAddUp) {
  Plan inter = Bare(ALL_GATHER, TREE, {1, 2}, 10, 1);
  inter.transfers = {Transfer{0, 0, 0, 1, 0, 10, false}};
  EXPECT_EQ(Summarize(inter, true, {{0, 0}, {1, 1}}).stages[0].steps[0].inter,
            20);
  EXPECT_EQ(Summarize(inter).stages[0].steps[0].inter, 10);
  Plan flat = inter;
  flat.shape = {2, 2};
  flat.count = 20;
  flat.transfers = {Transfer{0, 0, 0, 2, 0, 10, false},
                    Transfer{0, 0, 1, 3, 10, 10, false}};
  EXPECT_EQ(Summarize(flat, true, {{0, 1}, {2, 3}}).stages[0].steps[0].inter,
            20);
  EXPECT_EQ(Summarize(flat).stages[0].steps[0].inter, 10);
}

// A stage's busiest endpoints count every hop through them, ring passes
// included, which have no step loads. A ring all-gather of 8 elements over
// 2 nodes of one member: hops 0 -> 1 and 1 -> 0 of 4 elements, 1 step.
// With both GPUs of a node on its NIC (two groups running the plan, as
// GpusOnANicAddUp), NIC 0 sends 8; with a NIC per member, 4.
TEST(PlanSummary, AStageLoadsItsBusiestEndpoints) {
  absl::StatusOr<Plan> ring =
      MakePlan(PlanRequest{ALL_GATHER, RING, {1, 2}, 8});
  ASSERT_TRUE(ring.ok()) << ring.status();
  const StageLoad shared =
      Summarize(*ring, true, {{0, 0}, {1, 1}}).stages[0].busiest;
  EXPECT_EQ(shared.inter.elements, 8);
  EXPECT_EQ(shared.inter.steps, 1);
  EXPECT_EQ(shared.intra.elements, 0);
  const StageLoad own = Summarize(*ring).stages[0].busiest;
  EXPECT_EQ(own.inter.elements, 4);
  EXPECT_EQ(own.inter.steps, 1);
}

// The plan with its chains listed as explicit transfers.
Plan WithChainsExpanded(Plan plan) {
  std::vector<RingPass> rings = std::move(plan.rings);
  plan.rings.clear();
  plan.transfers = ExpandTransfers(plan);  // the explicit ones and chains'
  plan.chains.clear();
  plan.rings = std::move(rings);
  return plan;
}

// Every builder's plans (chains in broadcasts, HRING's intra phases,
// HO-Ring's and torus's columns), chunks empty or not, 1 to 3 channels.
TEST(PlanSummary, ChainsSummarizeAsTheirTransfers) {
  int with_chains = 0;
  for (Algorithm a : {RING, HRING, HORING, TORUS2D, TREE}) {
    for (CollectiveOp op :
         {ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE, BROADCAST}) {
      for (PlanShape shape :
           {PlanShape{4, 3}, PlanShape{8, 2}, PlanShape{2, 5}}) {
        for (int64_t count : {5, 37, 1000}) {
          for (int channels : {1, 3}) {
            for (int root : {0, 5}) {
              if (op != BROADCAST && root != 0) continue;
              absl::StatusOr<Plan> plan =
                  MakePlan(PlanRequest{op, a, shape, count, channels, root});
              if (!plan.ok()) continue;  // not every algorithm runs every op
              if (plan->chains.empty()) continue;
              ++with_chains;
              SCOPED_TRACE(absl::StrCat(Algorithm_Name(a), " ",
                                        CollectiveOp_Name(op), " ",
                                        shape.per_node, "x", shape.nodes, " ",
                                        count, " ", channels, " ", root));
              // The same hops, steps and volume; only how they run
              // differs: a stage with a chain runs as its hops, the same
              // messages listed (with no ring) step by step.
              const Plan listed = WithChainsExpanded(*plan);
              auto stepped = [](const PlanSummary& s) {
                int n = 0;
                for (const Stage& stage : s.stages) {
                  n += stage.by_step.empty() ? 0 : 1;
                }
                return n;
              };
              const int chained_stepped = stepped(Summarize(*plan));
              PlanSummary full = Summarize(listed);
              // Without rings, a chain's stages ran step by step before.
              if (plan->rings.empty()) {
                EXPECT_LT(chained_stepped, stepped(full));
              } else {
                EXPECT_LE(chained_stepped, stepped(full));
              }
              for (Stage& stage : full.stages) stage.by_step.clear();
              ExpectSameSummary(Summarize(*plan, /*by_step=*/false), full);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(with_chains, 100);
}

// A broadcast from root + k per_node is the one from root with every member
// k nodes further on, for every algorithm, with NICs shared or not: what a
// summary gives (volume, stages, floors) is the same for every root of one
// local index, which StepBounder relies on (sim/search/bound.cc), and the
// engine summarizes such a broadcast so (collective_engine.cc).
TEST(PlanSummary, BroadcastsFromRootsANodeApartAreRenamings) {
  int compared = 0;
  for (Algorithm a : {RING, HRING, HORING, TORUS2D, TREE, DIRECT, SHARP}) {
    for (PlanShape shape :
         {PlanShape{4, 3}, PlanShape{2, 5}, PlanShape{1, 4}, PlanShape{8, 2}}) {
      for (int64_t count : {5, 1000}) {
        for (int channels : {1, 3}) {
          // Two GPUs on each NIC: on a node, members 2i and 2i + 1 of one
          // group, or (one member per node) the member twice, of two groups.
          NicMembers nics;
          for (int n = 0; n < shape.nodes; ++n) {
            for (int i = 0; i < shape.per_node; i += 2) {
              const int m = n * shape.per_node + i;
              nics.push_back({m, i + 1 < shape.per_node ? m + 1 : m});
            }
          }
          for (int root = shape.per_node; root < shape.size(); ++root) {
            const int local = root % shape.per_node;
            absl::StatusOr<Plan> from = MakePlan(
                PlanRequest{BROADCAST, a, shape, count, channels, local});
            if (!from.ok()) continue;  // the shape does not suit it
            absl::StatusOr<Plan> at = MakePlan(
                PlanRequest{BROADCAST, a, shape, count, channels, root});
            ASSERT_TRUE(at.ok()) << at.status();
            SCOPED_TRACE(absl::StrCat(Algorithm_Name(a), " ", shape.per_node,
                                      "x", shape.nodes, " ", count, " ",
                                      channels, " root ", root));
            const int on = root / shape.per_node;
            ExpectSameSummary(NodesOn(Summarize(*from), on, shape),
                              Summarize(*at));
            EXPECT_EQ(CountVolume(*from).inter_node,
                      CountVolume(*at).inter_node);
            ExpectSameSummary(NodesOn(Summarize(*from, true, nics), on, shape),
                              Summarize(*at, true, nics));
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 300);
}

}  // namespace
}  // namespace shardsim
