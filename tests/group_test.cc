#include "sim/base/group.h"

#include "gtest/gtest.h"

namespace shardsim {
namespace {

const Mesh kMesh{8, 4};  // 4 nodes of 8

TEST(Group, IntraIsTheNode) {
  EXPECT_EQ(GroupMembers(IntraGroup(kMesh), kMesh, 13),
            (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(Group, InterIsTheSameLocalRankInEveryNode) {
  EXPECT_EQ(GroupMembers(InterGroup(kMesh), kMesh, 13),
            (std::vector<int>{5, 13, 21, 29}));
}

TEST(Group, StridedSubgroup) {
  // 2 members 4 apart inside a node (Lins: s_g/s_p = 8/4 GPUs sharing a P
  // shard): local 6 pairs with local 2.
  EXPECT_EQ(GroupMembers(MakeGroup(2, 4, 1, 1), kMesh, 14),
            (std::vector<int>{10, 14}));
  // Blocks of 4 consecutive GPUs, over pairs of nodes.
  EXPECT_EQ(GroupMembers(MakeGroup(4, 1, 2, 1), kMesh, 29),
            (std::vector<int>{20, 21, 22, 23, 28, 29, 30, 31}));
}

TEST(Group, FirstMemberIsTheFirstOfTheMembers) {
  for (const Group& g :
       {IntraGroup(kMesh), InterGroup(kMesh), GlobalGroup(kMesh),
        MakeGroup(2, 4, 1, 1), MakeGroup(4, 1, 2, 1), MakeGroup(2, 2, 2, 2)}) {
    for (int rank = 0; rank < kMesh.gpus(); ++rank) {
      EXPECT_EQ(GroupFirstMember(g, kMesh, rank),
                GroupMembers(g, kMesh, rank)[0])
          << GroupName(g) << " rank " << rank;
    }
  }
}

TEST(Group, ShapesThatDoNotTileAreRejected) {
  EXPECT_FALSE(ValidateGroup(MakeGroup(3, 1, 1, 1), kMesh).ok());
  EXPECT_FALSE(ValidateGroup(MakeGroup(4, 4, 1, 1), kMesh).ok());
  EXPECT_FALSE(ValidateGroup(MakeGroup(8, 1, 3, 1), kMesh).ok());
  EXPECT_TRUE(ValidateGroup(MakeGroup(4, 2, 2, 2), kMesh).ok());
}

// The one mesh rule (JobMesh and shardsim-hw's MPI world both use it):
// part of one node, or whole nodes.
TEST(Mesh, PartOfOneNodeOrWholeNodes) {
  struct Case {
    int gpus, per_node, want_per_node, want_nodes;
  };
  for (const Case& c :
       {Case{4, 8, 4, 1}, Case{8, 8, 8, 1}, Case{16, 8, 8, 2}}) {
    absl::StatusOr<Mesh> m = MeshOf(c.gpus, c.per_node);
    ASSERT_TRUE(m.ok()) << c.gpus;
    EXPECT_EQ(m->gpus_per_node, c.want_per_node) << c.gpus;
    EXPECT_EQ(m->nodes, c.want_nodes) << c.gpus;
  }
  absl::StatusOr<Mesh> odd = MeshOf(12, 8);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().message(),
            "12 GPUs is not a whole number of 8-GPU nodes");
}

}  // namespace
}  // namespace shardsim
