// PlanCache: one plan per key, checked once against the mesh and platform,
// and keys that tell apart what a plan's users derive from the group.
#include "sim/collective/plan_cache.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardsim {
namespace {

CollectiveCall Call(Group group, Algorithm algorithm = RING) {
  CollectiveCall c;
  c.set_op(ALL_GATHER);
  c.set_algorithm(algorithm);
  *c.mutable_group() = group;
  c.set_bytes(1 << 20);
  c.set_dtype(BF16);
  return c;
}

Platform Named(bool sharp) {
  Platform p;
  p.set_name("lab");
  p.mutable_network()->set_sharp(sharp);
  return p;
}

// A cache whose entry is rank 1's member index in the call's group, as the
// hardware backends derive their rank programs; it counts its plans.
struct MemberCache {
  explicit MemberCache(const Platform& platform)
      : platform(platform),
        cache(mesh, this->platform, [this](const CollectiveCall& call, Plan) {
          ++made;
          const std::vector<int> m = GroupMembers(call.group(), mesh, 1);
          return absl::StatusOr<int>(
              static_cast<int>(std::find(m.begin(), m.end(), 1) - m.begin()));
        }) {}
  const Mesh mesh{4, 2};  // 2 nodes of 4
  const Platform platform;
  std::atomic<int> made = 0;
  PlanCache<int> cache;
};

TEST(PlanCache, CallsThatDifferOnlyInTensorPhaseOrDtypeShareAPlan) {
  MemberCache m(Named(false));
  CollectiveCall a = Call(MakeGroup(4, 1, 1, 1));
  CollectiveCall b = a;
  b.set_tensor("G");
  b.set_dtype(FP32);
  absl::StatusOr<const int*> first = m.cache.Get(a, a.bytes(), 2);
  absl::StatusOr<const int*> second = m.cache.Get(b, b.bytes(), 2);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(m.made, 1);
  // Another count or channel count is another plan.
  ASSERT_TRUE(m.cache.Get(a, a.bytes() / 2, 2).ok());
  ASSERT_TRUE(m.cache.Get(a, a.bytes(), 1).ok());
  EXPECT_EQ(m.made, 3);
  EXPECT_EQ(m.cache.Find(a, 7, 2), nullptr);
}

// Rank 1 is member 1 of {0, 1} (2 GPUs, stride 1) but member 0 of {1, 3}
// (stride 2): the same request, another program. A key without strides
// would hand the second call the first one's member.
TEST(PlanCache, StridesAreInTheKey) {
  MemberCache m(Named(false));
  const CollectiveCall near = Call(MakeGroup(2, 1, 1, 1));
  const CollectiveCall apart = Call(MakeGroup(2, 2, 1, 1));
  absl::StatusOr<const int*> a = m.cache.Get(near, 1024, 1);
  absl::StatusOr<const int*> b = m.cache.Get(apart, 1024, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(**a, 1);
  EXPECT_EQ(**b, 0);
  EXPECT_EQ(m.made, 2);
}

TEST(PlanCache, SharpNeedsSharpSwitchesAndAFailureLeavesNothing) {
  MemberCache without(Named(false));
  const CollectiveCall sharp = Call(MakeGroup(1, 1, 2, 1), SHARP);
  absl::StatusOr<const int*> refused = without.cache.Get(sharp, 1024, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "algorithm SHARP: platform lab has no SHARP-capable switches "
            "(network.sharp)");
  EXPECT_EQ(without.made, 0);
  EXPECT_EQ(without.cache.Find(sharp, 1024, 1), nullptr);

  MemberCache with(Named(true));
  EXPECT_TRUE(with.cache.Get(sharp, 1024, 1).ok());
  EXPECT_EQ(with.made, 1);
}

// Threads asking for the same keys at once get one entry per key, made
// once, and the same pointer (the plan search's bound phase shares a cache
// between its threads).
TEST(PlanCache, ThreadsShareOneEntryPerKey) {
  MemberCache m(Named(false));
  const CollectiveCall near = Call(MakeGroup(2, 1, 1, 1));
  const CollectiveCall apart = Call(MakeGroup(2, 2, 1, 1));
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::vector<std::vector<const int*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        // Three keys: two counts of `near`, and `apart`.
        const CollectiveCall& c = i % 3 == 2 ? apart : near;
        absl::StatusOr<const int*> e = m.cache.Get(c, 1024 << (i % 3 == 1), 1);
        got[t].push_back(e.ok() ? *e : nullptr);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(m.made, 3);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_NE(got[t][i], nullptr);
      EXPECT_EQ(got[t][i], got[0][i % 3]) << "thread " << t << " call " << i;
    }
  }
  EXPECT_EQ(*got[0][0], 1);  // rank 1 is member 1 of {0, 1}
  EXPECT_EQ(*got[0][2], 0);  // and member 0 of {1, 3}
}

TEST(PlanCache, AGroupThatDoesNotTileTheMeshIsNamed) {
  MemberCache m(Named(false));
  // 3 GPUs a node do not tile nodes of 4.
  absl::StatusOr<const int*> r = m.cache.Get(Call(MakeGroup(3, 1, 1, 1)), 1, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().substr(0, 10), "group 3x1:");
  EXPECT_EQ(m.made, 0);
}

}  // namespace
}  // namespace shardsim
