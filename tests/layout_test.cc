// The parallel layout: group shapes of each dimension and of the sharding
// strategies' dp mesh, checked against the rank formula by enumeration.
#include "sim/base/layout.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace shardsim {
namespace {

Parallelism Dims(int tp, int cp, int pp, const char* order = "") {
  Parallelism p;
  p.set_tp(tp);
  p.set_cp(cp);
  p.set_pp(pp);
  p.set_order(order);
  return p;
}

// The ranks that share every index but `d`'s with `rank`, by the formula.
std::vector<int> ByFormula(const Layout& l, Dim d, int rank) {
  std::vector<int> out;
  for (int r = 0; r < l.mesh().gpus(); ++r) {
    bool same = true;
    for (Dim o : {Dim::kTp, Dim::kCp, Dim::kDp, Dim::kPp}) {
      if (o != d && l.IndexOf(r, o) != l.IndexOf(rank, o)) same = false;
    }
    if (same) out.push_back(r);
  }
  return out;
}

TEST(Layout, MegatronOrderPutsTpInsideANodeAndPpOutermost) {
  // 256 GPUs on 8-GPU nodes, tp 8, pp 4: dp = 8. Ranks tp-cp-dp-pp:
  // tp stride 1, dp stride 8 (one rank per node), pp stride 64 (8 nodes).
  absl::StatusOr<Layout> l = Layout::Make(Mesh{8, 32}, Dims(8, 1, 4));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->dp(), 8);
  EXPECT_EQ(l->stride(Dim::kDp), 8);
  EXPECT_EQ(l->stride(Dim::kPp), 64);
  EXPECT_EQ(GroupName(l->GroupOf(Dim::kTp)), GroupName(MakeGroup(8, 1, 1, 1)));
  EXPECT_EQ(GroupName(l->GroupOf(Dim::kDp)), GroupName(MakeGroup(1, 1, 8, 1)));
  EXPECT_EQ(GroupName(l->GroupOf(Dim::kPp)), GroupName(MakeGroup(1, 1, 4, 8)));
  EXPECT_EQ(l->DpMesh().gpus_per_node, 1);
  EXPECT_EQ(l->DpMesh().nodes, 8);
  const std::vector<int> stage1 = l->StageRanks(1);
  ASSERT_EQ(stage1.size(), 64u);
  EXPECT_EQ(stage1.front(), 64);
  EXPECT_EQ(stage1.back(), 127);
}

TEST(Layout, EveryDimensionsGroupHoldsTheFormulasRanks) {
  struct Case {
    Mesh mesh;
    Parallelism p;
  };
  const std::vector<Case> cases = {{Mesh{8, 32}, Dims(8, 1, 4)},
                                   {Mesh{8, 4}, Dims(2, 2, 2)},
                                   {Mesh{8, 4}, Dims(4, 1, 2, "tp-pp-dp-cp")},
                                   {Mesh{8, 2}, Dims(2, 1, 4, "tp-dp-pp-cp")},
                                   {Mesh{4, 8}, Dims(2, 4, 1, "tp-dp-cp-pp")},
                                   {Mesh{8, 1}, Dims(1, 1, 1)}};
  for (const Case& c : cases) {
    absl::StatusOr<Layout> l = Layout::Make(c.mesh, c.p);
    ASSERT_TRUE(l.ok()) << l.status();
    for (Dim d : {Dim::kTp, Dim::kCp, Dim::kDp, Dim::kPp}) {
      for (int r = 0; r < c.mesh.gpus(); ++r) {
        EXPECT_EQ(GroupMembers(l->GroupOf(d), c.mesh, r), ByFormula(*l, d, r))
            << l->Name() << " " << DimName(d) << " rank " << r;
      }
    }
  }
}

// Each shape of the dp mesh (a node of it, across its nodes, all of it)
// placed on the physical mesh holds the same dp indices and nothing else.
TEST(Layout, DpGroupsEmbedAsTheSameDpRanks) {
  for (const auto& [mesh, p] : std::vector<std::pair<Mesh, Parallelism>>{
           {Mesh{8, 8}, Dims(2, 1, 2)},   // 2 dp ranks a node, 4x... nodes
           {Mesh{8, 32}, Dims(8, 1, 4)},  // 1 dp rank a node
           {Mesh{8, 2}, Dims(2, 1, 1)},   // 4 dp ranks a node
           {Mesh{8, 4}, Dims(4, 1, 2, "tp-pp-dp-cp")}}) {
    absl::StatusOr<Layout> l = Layout::Make(mesh, p);
    ASSERT_TRUE(l.ok()) << l.status();
    const Mesh dm = l->DpMesh();
    ASSERT_EQ(dm.gpus(), l->dp());
    for (const Group& g : {GlobalGroup(dm), IntraGroup(dm), InterGroup(dm)}) {
      const Group e = l->EmbedDp(g);
      for (int r = 0; r < mesh.gpus(); ++r) {
        // r's dp index, and the members of its dp-mesh group.
        std::set<int> want;
        for (int m : GroupMembers(g, dm, l->IndexOf(r, Dim::kDp)))
          want.insert(m);
        std::set<int> got;
        for (int m : GroupMembers(e, mesh, r)) {
          for (Dim o : {Dim::kTp, Dim::kCp, Dim::kPp}) {
            EXPECT_EQ(l->IndexOf(m, o), l->IndexOf(r, o));
          }
          got.insert(l->IndexOf(m, Dim::kDp));
        }
        EXPECT_EQ(got, want) << l->Name() << " " << GroupName(g);
      }
    }
  }
}

// With context parallelism the strategies shard over dp x cp: 32 GPUs of
// tp 2 x cp 2 x pp 2 leave dp 4, and each stage's 8 ranks of one tp index
// (every other rank of its 16) form the sharding mesh, whichever of cp and
// dp is inside.
TEST(Layout, ContextParallelRanksJoinTheShardingMesh) {
  for (const char* order : {"tp-cp-dp-pp", "tp-dp-cp-pp"}) {
    absl::StatusOr<Layout> l = Layout::Make(Mesh{8, 4}, Dims(2, 2, 2, order));
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->DpMesh().gpus(), 8) << order;
    const Group all = l->EmbedDp(GlobalGroup(l->DpMesh()));
    const std::vector<int> members = GroupMembers(all, l->mesh(), 0);
    EXPECT_EQ(std::set<int>(members.begin(), members.end()),
              (std::set<int>{0, 2, 4, 6, 8, 10, 12, 14}))
        << order;
  }
  // cp and dp apart: no one group holds them.
  const absl::Status s =
      Layout::Make(Mesh{8, 4}, Dims(2, 2, 2, "cp-tp-dp-pp")).status();
  EXPECT_NE(s.message().find("parallelism.order"), absl::string_view::npos)
      << s;
}

TEST(Layout, RefusesSizesThatDoNotDivideOrOrdersThatRepeat) {
  EXPECT_FALSE(Layout::Make(Mesh{8, 4}, Dims(3, 1, 1)).ok());
  EXPECT_FALSE(Layout::Make(Mesh{8, 4}, Dims(2, 1, 1, "tp-tp-dp-pp")).ok());
  EXPECT_FALSE(Layout::Make(Mesh{8, 4}, Dims(2, 1, 1, "tp-dp-pp")).ok());
  // tp 16 on 8-GPU nodes at stride 1 spans two whole nodes: a group.
  EXPECT_TRUE(Layout::Make(Mesh{8, 4}, Dims(16, 1, 1)).ok());
  const absl::Status s = Layout::Make(Mesh{8, 4}, Dims(3, 1, 1)).status();
  EXPECT_NE(s.message().find("parallelism"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace shardsim
