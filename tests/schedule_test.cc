// The schedule IR: which collectives each lowering emits, how many, on which
// group, and the dependencies that give prefetch and bucketing.
#include "sim/schedule/lower.h"

#include <map>

#include "gtest/gtest.h"
#include "sim/model/model.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

const Mesh kMesh{8, 4};  // 32 GPUs

Scenario Training(int micro_batches) {
  Scenario s;
  s.set_micro_batch_size(1);
  s.set_micro_batches(micro_batches);
  s.set_seq_len(512);
  s.set_optimizer_bytes_per_param(12);
  return s;
}

Schedule Lower(const std::string& spec, const Scenario& sc,
               const Mesh& mesh = kMesh) {
  absl::StatusOr<Strategy> st = ParseStrategy(spec, mesh);
  EXPECT_TRUE(st.ok()) << st.status();
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  EXPECT_TRUE(model.ok());
  absl::StatusOr<Schedule> s =
      LowerStep(ModelLayers(*model, {1, 512}), *st, mesh, sc);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// Counts collectives by "OP phase intraxinter".
std::map<std::string, int> Census(const Schedule& s) {
  std::map<std::string, int> n;
  for (const Op& op : s.ops()) {
    if (op.body_case() != Op::kCollective) continue;
    const CollectiveCall& c = op.collective();
    ++n[CollectiveOp_Name(c.op()) + " " + Phase_Name(op.phase()) + " " +
        GroupName(c.group())];
  }
  return n;
}

constexpr int kLayers = 34;  // LLaMA-7B: embedding, 32 blocks, head

TEST(Schedule, Zero3GathersTwiceAndReducesOncePerMicroBatch) {
  const auto n = Census(Lower("zero3", Training(2)));
  EXPECT_EQ(n.at("ALL_GATHER FORWARD 8x4"), 2 * kLayers);
  EXPECT_EQ(n.at("ALL_GATHER BACKWARD 8x4"), 2 * kLayers);
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 8x4"), 2 * kLayers);
  EXPECT_EQ(n.size(), 3u);  // nothing once per step: P, G, OS alike
}

TEST(Schedule, DdpAllReducesOncePerStepInBuckets) {
  Scenario sc = Training(4);
  EXPECT_EQ(Census(Lower("ddp", sc)).at("ALL_REDUCE UPDATE 8x4"), kLayers);
  sc.set_bucket_bytes(int64_t{1} << 40);  // one bucket holds the model
  EXPECT_EQ(Census(Lower("ddp", sc)).at("ALL_REDUCE UPDATE 8x4"), 1);
}

TEST(Schedule, MicsReducesInsideTheNodeThenAcrossOncePerStep) {
  const auto n = Census(Lower("mics", Training(3)));
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 8x1"), 3 * kLayers);
  EXPECT_EQ(n.at("ALL_REDUCE UPDATE 1x4 stride 8x1"), kLayers);
}

TEST(Schedule, ParoIigReduceScattersTheShardAcrossNodesThenGathersP) {
  const auto n = Census(Lower("paro-IIG", Training(2)));
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 8x1"), 2 * kLayers);
  EXPECT_EQ(n.at("REDUCE_SCATTER UPDATE 1x4 stride 8x1"), kLayers);
  EXPECT_EQ(n.at("ALL_GATHER UPDATE 1x4 stride 8x1"), kLayers);
}

TEST(Schedule, ParoNigGathersGlobalPWithHoRing) {
  const Schedule s = Lower("paro-NIG", Training(1));
  int horing_gathers = 0;
  for (const Op& op : s.ops()) {
    if (op.body_case() == Op::kCollective &&
        op.collective().op() == ALL_GATHER) {
      EXPECT_EQ(op.phase(), UPDATE);
      EXPECT_EQ(GroupName(op.collective().group()), "8x4");
      horing_gathers += op.collective().algorithm() == HORING;
    }
  }
  EXPECT_EQ(horing_gathers, kLayers);
}

TEST(Schedule, LinsSelectAndDropThenBroadcastInsideOsGroup) {
  // s_p = 4x1, s_g = 8x1, s_os = 8x1 on 32 GPUs with 3 micro-batches:
  // RS over the 4 GPUs of a P group every micro-batch; on the first two,
  // all-reduce over the s_g/s_p = 2 GPUs (4 apart) sharing a P shard; on the
  // last, all-reduce over all dp/s_p = 8 GPUs sharing it (2 per node x 4
  // nodes); after the update, s_os/s_p = 2 broadcasts per layer.
  const auto n = Census(Lower("lins:p=4x1:g=8x1:os=8x1", Training(3)));
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 4x1"), 3 * kLayers);
  EXPECT_EQ(n.at("ALL_REDUCE BACKWARD 2x1 stride 4x1"), 2 * kLayers);
  EXPECT_EQ(n.at("ALL_REDUCE UPDATE 2x4 stride 4x1"), kLayers);
  EXPECT_EQ(n.at("BROADCAST UPDATE 2x1 stride 4x1"), 2 * kLayers);
}

TEST(Schedule, PrefetchWindowBoundsGathersInFlight) {
  // With prefetch 1, the k-th gather waits for the compute that used the
  // (k-2)-th gathered layer: at most two gathered layers are alive.
  Scenario sc = Training(1);
  sc.set_prefetch_layers(1);
  const Schedule s = Lower("zero3", sc);
  std::vector<int> gathers, users;
  for (const Op& op : s.ops()) {
    if (op.body_case() == Op::kCollective &&
        op.collective().op() == ALL_GATHER) {
      gathers.push_back(op.id());
    }
  }
  for (const Op& op : s.ops()) {
    if (op.body_case() != Op::kCompute) continue;
    for (int d : op.deps()) {
      if (s.ops(d).body_case() == Op::kCollective &&
          s.ops(d).collective().op() == ALL_GATHER) {
        users.push_back(op.id());
      }
    }
  }
  ASSERT_EQ(gathers.size(), users.size());
  for (size_t k = 2; k < gathers.size(); ++k) {
    const Op& g = s.ops(gathers[k]);
    ASSERT_EQ(g.deps_size(), 1) << g.label();
    EXPECT_EQ(g.deps(0), users[k - 2]) << g.label();
  }
}

TEST(Schedule, DependenciesPointBackwards) {
  for (const char* spec : {"zero3", "zeropp", "paro-IGG", "lins:p=4x1:g=8x1:os=8x1"}) {
    const Schedule s = Lower(spec, Training(2));
    for (const Op& op : s.ops()) {
      for (int d : op.deps()) EXPECT_LT(d, op.id()) << spec << " " << op.label();
    }
  }
}

TEST(Schedule, ZeroPPQuantizesAndUsesTheSecondaryCopy) {
  const Schedule s = Lower("zeropp", Training(1));
  std::map<std::string, int> tensors;
  for (const Op& op : s.ops()) {
    if (op.body_case() == Op::kCollective) {
      ++tensors[op.collective().tensor() + " " +
                GroupName(op.collective().group())];
    }
  }
  EXPECT_EQ(tensors.at("P int8 8x4"), kLayers);   // qwZ forward
  EXPECT_EQ(tensors.at("P 8x1"), kLayers);        // hpZ backward
  EXPECT_EQ(tensors.at("G int4 8x1"), kLayers);   // qgZ inside the node
  EXPECT_EQ(tensors.at("G int4 1x4"), kLayers);   // qgZ across nodes
}

TEST(Schedule, QuantizedBytesCarryScales) {
  // 8192 int8 values: 8192 bytes + 2 fp32 scales; int4: 4096 + 8.
  EXPECT_EQ(QuantizedBytes(8192, 8), 8192 + 8);
  EXPECT_EQ(QuantizedBytes(8192, 4), 4096 + 8);
}

}  // namespace
}  // namespace shardsim
