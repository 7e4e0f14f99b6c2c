#include "sim/collective/group.h"

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

}  // namespace
}  // namespace shardsim
