// The schedule IR: which collectives each lowering emits, how many, on which
// group, and the dependencies that give prefetch and bucketing.
#include <map>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/model/model.h"
#include "sim/schedule/lower.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

const Mesh kMesh{8, 4};  // 32 GPUs

using test::Training;

Schedule Lower(const std::string& spec, const Scenario& sc,
               const Mesh& mesh = kMesh) {
  absl::StatusOr<Strategy> st = ParseStrategy(spec, mesh);
  EXPECT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(ResolveExecution(sc.execution(), 4096, &*st).ok());
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  EXPECT_TRUE(model.ok());
  absl::StatusOr<OwnedSchedule> s =
      LowerStep(ModelLayers(*model, test::Sequences(1, 512)), *st, mesh, sc);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? **s : Schedule();
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
// Modules DeepSpeed gathers on their own: those above its persistence
// threshold of 1e5 parameters. The embedding table; per block q, k, v, o,
// gate, up, down (the two 4096-wide norms persist); the head's lm_head.
constexpr int kModules = 1 + 32 * 7 + 1;  // 226
constexpr int kPersistent = 32 * 2 + 1;   // the norms

// One reduction per layer instead of DeepSpeed's 5e8-element buckets.
Scenario PerLayerBuckets(Scenario sc) {
  sc.mutable_execution()->set_reduce_bucket_elements(0);
  return sc;
}

// LLaMA-7B's 6,738,415,616 parameters less the 65 norms of 4096 that
// DeepSpeed keeps whole.
constexpr int64_t kGatheredParams = 6'738'415'616 - 65 * 4096;

// Bytes of the all-gathers in `phase`, and how many calls carry them.
std::pair<int64_t, int> Gathered(const Schedule& s, Phase phase) {
  int64_t bytes = 0;
  int calls = 0;
  for (const Op& op : s.ops()) {
    if (op.has_collective() && op.collective().op() == ALL_GATHER &&
        op.phase() == phase) {
      bytes += op.collective().bytes();
      ++calls;
    }
  }
  return {bytes, calls};
}

TEST(Schedule, Zero3GathersEveryModuleTwicePerMicroBatch) {
  const Schedule s = Lower("zero3", PerLayerBuckets(Training(2)));
  // Every gathered module's bf16 parameters, forward and backward, each
  // micro-batch; DeepSpeed coalesces its prefetches, so fewer calls than
  // modules.
  for (Phase phase : {FORWARD, BACKWARD}) {
    const auto [bytes, calls] = Gathered(s, phase);
    EXPECT_EQ(bytes, 2 * 2 * kGatheredParams) << Phase_Name(phase);
    EXPECT_LE(calls, 2 * kModules);
    EXPECT_GT(calls, 2 * kLayers / 2);
  }
  const auto n = Census(s);
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 8x4"), 2 * kLayers);
  // Persistent parameters are gathered again once, after the update,
  // which waits for the gradient norm's one all-reduce.
  EXPECT_EQ(n.at("ALL_GATHER UPDATE 8x4"), kPersistent);
  EXPECT_EQ(n.at("ALL_REDUCE UPDATE 8x4"), 1);
  EXPECT_EQ(n.size(), 5u);
}

TEST(Schedule, ReduceScattersCarryOneEqualBlockPerGpu) {
  // A LLaMA-7B block: 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 =
  // 202,383,360 parameters = 56 x 3,613,988 + 32. Over 56 GPUs each holds
  // a padded shard of 3,613,989 (DeepSpeed's ds_tensor, FSDP's padded flat
  // parameter), so the call moves 56 x 3,613,989 bf16 values.
  const Schedule s = Lower("zero3", PerLayerBuckets(Training(2)), Mesh{8, 7});
  int blocks = 0;
  for (const Op& op : s.ops()) {
    if (op.has_collective() && op.collective().op() == REDUCE_SCATTER &&
        op.collective().bytes() == 2 * 56 * int64_t{3'613'989}) {
      ++blocks;
    }
  }
  EXPECT_EQ(blocks, 2 * 32);  // every block, both micro-batches
}

TEST(Schedule, DeepSpeedPrefetchStaysWithinItsLiveBudget) {
  // Gathered parameters alive in host order (allocated at the call, freed
  // after their module ran) never pass stage3_max_live_parameters by more
  // than one prefetch bucket: a hook may start a bucket with room for one
  // element, and a call's own module is fetched whatever the budget.
  const Schedule s = Lower("zero3", Training(2));
  int64_t live = 0, peak = 0;
  for (const Op& op : s.ops()) {
    if (op.has_memory() && op.memory().buffer() == "P full") {
      live += op.memory().delta_bytes();
      peak = std::max(peak, live);
    }
  }
  EXPECT_EQ(live, 0);
  // 2 bytes x (1e9 + 5e7 bucket + the largest module, 131,072,000).
  EXPECT_LE(peak, 2 * (int64_t{1'000'000'000} + 50'000'000 + 131'072'000));
  // And it does run ahead: more than 3 blocks (3 x 202M) at some point.
  EXPECT_GT(peak, 2 * int64_t{3} * 202'383'360);
}

TEST(Schedule, DeepSpeedReducesInBucketsOfReduceBucketSize) {
  // 5e8-element buckets over LLaMA-7B's 6,738,415,616 parameters, filled in
  // backward order and flushed before a module would overflow them: at
  // least ceil(6.74e9 / 5e8) = 14 per micro-batch. Each flush leaves less
  // than one module's room (the largest, the embedding, has 131M), so the
  // buckets hold more than 5e8 - 131M = 369M each: at most 6.74e9 / 369M
  // = 18.3 of them.
  const auto n = Census(Lower("zero3", Training(1)));
  EXPECT_GE(n.at("REDUCE_SCATTER BACKWARD 8x4"), 14);
  EXPECT_LE(n.at("REDUCE_SCATTER BACKWARD 8x4"), 18);
}

TEST(Schedule, DdpAllReducesOncePerStepInBuckets) {
  // DDP's 25 MiB buckets hold 13,107,200 bf16 gradients: every module but
  // the norms is larger, so each gets a bucket of its own (norms ride with
  // the module next to them).
  Scenario sc = Training(4);
  EXPECT_EQ(Census(Lower("ddp", sc)).at("ALL_REDUCE UPDATE 8x4"), kModules);
  sc.mutable_execution()->set_reduce_bucket_elements(int64_t{1} << 40);
  EXPECT_EQ(Census(Lower("ddp", sc)).at("ALL_REDUCE UPDATE 8x4"), 1);
}

TEST(Schedule, DeepSpeedZero1And2AllReduceTheirBuckets) {
  // ZeRO-1 only after the last micro-batch, ZeRO-2 after each; both
  // all-reduce (DeepSpeed's use_multi_rank_bucket_allreduce), and rebuild
  // parameters with one all-gather of the whole model after the update.
  const Scenario sc = PerLayerBuckets(Training(3));
  const auto z1 = Census(Lower("zero1", sc));
  // Its buckets, the overflow check's and the gradient norm's all-reduces.
  EXPECT_EQ(z1.at("ALL_REDUCE UPDATE 8x4"), kLayers + 2);
  EXPECT_EQ(z1.at("ALL_GATHER UPDATE 8x4"), 1);
  EXPECT_EQ(z1.count("ALL_REDUCE BACKWARD 8x4"), 0u);
  const auto z2 = Census(Lower("zero2", sc));
  EXPECT_EQ(z2.at("ALL_REDUCE BACKWARD 8x4"), 3 * kLayers);
  EXPECT_EQ(z2.at("ALL_GATHER UPDATE 8x4"), 1);
}

TEST(Schedule, DeepSpeedZero1And2ReduceOnTheComputeStream) {
  // overlap_comm defaults to false below stage 3: reductions block compute.
  for (const char* spec : {"zero1", "zero2"}) {
    const Schedule s = Lower(spec, Training(2));
    for (const Op& op : s.ops()) {
      if (op.has_collective() && op.collective().tensor() == "G") {
        EXPECT_EQ(op.stream(), COMPUTE) << spec << " " << op.label();
      }
    }
  }
}

TEST(Schedule, ZeroOneAccumulatesWholeGradientsAfterTheFirstMicroBatch) {
  int accumulate = 0;
  const Schedule s = Lower("zero1", Training(3));
  for (const Op& op : s.ops()) {
    if (!op.has_compute()) continue;
    for (const Kernel& k : KernelsOf(s, op.compute()).kernels()) {
      if (k.name() == "gradient accumulate") {
        ++accumulate;
        EXPECT_GT(op.micro_batch(), 0) << op.label();
      }
    }
  }
  // One per module group (segment) and micro-batch after the first.
  EXPECT_EQ(accumulate, 2 * kModules);
}

TEST(Schedule, MicsReducesInsideTheNodeThenAcrossOncePerStep) {
  const auto n = Census(Lower("mics", PerLayerBuckets(Training(3))));
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 8x1"), 3 * kLayers);
  EXPECT_EQ(n.at("ALL_REDUCE UPDATE 1x4 stride 8x1"), kLayers);
}

TEST(Schedule, FsdpHybridAllReducesAcrossNodesEveryMicroBatch) {
  // FSDP without no_sync(): reduce-scatter inside the node, then (HSDP) the
  // shard all-reduced across nodes, every backward.
  const auto n = Census(Lower("fsdp:HYBRID_SHARD", Training(3)));
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 8x1"), 3 * kLayers);
  EXPECT_EQ(n.at("ALL_GATHER FORWARD 8x1"), 3 * kLayers);
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

// Lowering a spec with @KIND=ALGO gives the same schedule as lowering the
// spec and then UseAlgorithms: the algorithms change nothing else. Every
// kind has its own choice here; ZeRO++'s all-to-all stays DIRECT.
TEST(Schedule, UseAlgorithmsIsLoweringWithThem) {
  for (const std::string spec : {"zeropp", "paro-NIG", "paro-IIG", "zero1"}) {
    const std::string variant = spec + "@intra=tree@inter=tree@both=torus2d";
    Schedule lowered = Lower(variant, Training(2));
    absl::StatusOr<Strategy> st = ParseStrategy(variant, kMesh);
    ASSERT_TRUE(st.ok()) << st.status();
    Schedule rewritten = Lower(spec, Training(2));
    UseAlgorithms(*st, &rewritten);
    rewritten.set_strategy(lowered.strategy());
    EXPECT_EQ(lowered.SerializeAsString(), rewritten.SerializeAsString())
        << spec;
    std::set<Algorithm> used;
    for (const Op& op : lowered.ops()) {
      if (op.has_collective()) used.insert(op.collective().algorithm());
    }
    EXPECT_EQ(used.count(RING), 0u) << spec;
    EXPECT_EQ(used.count(DIRECT), spec == "zeropp" ? 1u : 0u) << spec;
  }
}

TEST(Schedule, LinsSelectAndDropThenBroadcastInsideOsGroup) {
  // s_p = 4x1, s_g = 8x1, s_os = 8x1 on 32 GPUs with 3 micro-batches:
  // RS over the 4 GPUs of a P group every micro-batch; on the first two,
  // all-reduce over the s_g/s_p = 2 GPUs (4 apart) sharing a P shard; on the
  // last, all-reduce over all dp/s_p = 8 GPUs sharing it (2 per node x 4
  // nodes); after the whole update, s_os/s_p = 2 broadcasts, one per OS
  // subgroup member, of its shard of every layer.
  const auto n =
      Census(Lower("lins:p=4x1:g=8x1:os=8x1", PerLayerBuckets(Training(3))));
  EXPECT_EQ(n.at("REDUCE_SCATTER BACKWARD 4x1"), 3 * kLayers);
  EXPECT_EQ(n.at("ALL_REDUCE BACKWARD 2x1 stride 4x1"), 2 * kLayers);
  EXPECT_EQ(n.at("ALL_REDUCE UPDATE 2x4 stride 4x1"), kLayers);
  EXPECT_EQ(n.at("BROADCAST UPDATE 2x1 stride 4x1"), 2);
  // Each carries its member's half of the 4-way P shard of every layer:
  // 2 bytes x 6,738,415,616 parameters / 4 / 2 (every layer's count is
  // even), from roots 0 and 1, issued after the last optimizer op and
  // waiting for it.
  const Schedule s =
      Lower("lins:p=4x1:g=8x1:os=8x1", PerLayerBuckets(Training(3)));
  int last_optimizer = -1;
  for (int id = 0; id < s.ops_size(); ++id) {
    if (s.ops(id).phase() == UPDATE && s.ops(id).has_compute()) {
      last_optimizer = id;
    }
  }
  ASSERT_GE(last_optimizer, 0);
  std::vector<int> roots;
  for (int id = 0; id < s.ops_size(); ++id) {
    const Op& op = s.ops(id);
    if (!op.has_collective() || op.collective().op() != BROADCAST) continue;
    EXPECT_EQ(op.collective().bytes(), int64_t{1'684'603'904});
    EXPECT_GT(id, last_optimizer);
    EXPECT_THAT(op.deps(), testing::Contains(last_optimizer));
    roots.push_back(op.collective().root());
  }
  EXPECT_EQ(roots, (std::vector<int>{0, 1}));
}

// The gathers of a schedule in host order, and the compute op each feeds.
struct GatherUse {
  std::vector<int> gathers;
  std::map<int, int> user;  // gather -> first compute op needing it
};
GatherUse Gathers(const Schedule& s) {
  GatherUse g;
  for (const Op& op : s.ops()) {
    if (op.has_collective() && op.collective().op() == ALL_GATHER &&
        op.phase() != UPDATE) {
      g.gathers.push_back(op.id());
    }
    if (!op.has_compute()) continue;
    for (int d : op.deps()) {
      if (s.ops(d).has_collective() && !g.user.count(d)) g.user[d] = op.id();
    }
  }
  return g;
}

TEST(Schedule, FsdpRateLimiterKeepsTwoGatheredUnits) {
  // limit_all_gathers: before the k-th all-gather the host waits until the
  // unit gathered two before is freed (its compute done): two alive.
  const Schedule s = Lower("fsdp:FULL_SHARD", Training(1));
  const GatherUse g = Gathers(s);
  ASSERT_EQ(g.gathers.size(), 2u * kLayers);
  for (size_t k = 2; k < g.gathers.size(); ++k) {
    const Op& op = s.ops(g.gathers[k]);
    ASSERT_EQ(op.host_waits_size(), 1) << op.label();
    EXPECT_EQ(op.host_waits(0), g.user.at(g.gathers[k - 2])) << op.label();
    EXPECT_EQ(op.limited_by(), MEMORY_LIMIT);
  }
}

TEST(Schedule, FsdpPrefetchesInBackwardOnly) {
  // forward_prefetch=False: each forward all-gather is issued at its own
  // unit's hook, right before that unit's compute; BACKWARD_PRE issues the
  // next unit's all-gather before the current unit's gradients.
  const Schedule s = Lower("fsdp:FULL_SHARD", Training(1));
  const GatherUse g = Gathers(s);
  for (int id : g.gathers) {
    const Op& op = s.ops(id);
    // Between the gather and its user: only memory bookkeeping (forward),
    // or exactly one compute op (backward: the unit before it).
    int computes = 0;
    for (int o = id + 1; o < g.user.at(id); ++o)
      computes += s.ops(o).has_compute();
    if (op.phase() == FORWARD) {
      EXPECT_EQ(computes, 0) << op.label();
    } else if (op.layer() != kLayers - 1) {
      EXPECT_EQ(computes, 1) << op.label();
    }
  }
}

TEST(Schedule, DeepSpeedHostBlocksWithTwoFetchesInFlight) {
  // Before each fetch call the host waits for the call two before it.
  const Schedule s = Lower("zero3", Training(1));
  const GatherUse g = Gathers(s);
  for (size_t k = 2; k < g.gathers.size(); ++k) {
    const Op& op = s.ops(g.gathers[k]);
    ASSERT_EQ(op.host_waits_size(), 1) << op.label();
    EXPECT_EQ(op.host_waits(0), g.gathers[k - 2]) << op.label();
  }
}

TEST(Schedule, DependenciesPointBackwards) {
  for (const char* spec : {"zero3", "zeropp", "paro-IGG", "fsdp:FULL_SHARD",
                           "lins:p=4x1:g=8x1:os=8x1"}) {
    const Schedule s = Lower(spec, Training(2));
    for (const Op& op : s.ops()) {
      for (int d : op.deps())
        EXPECT_LT(d, op.id()) << spec << " " << op.label();
      for (int d : op.host_waits()) {
        EXPECT_LT(d, op.id()) << spec << " " << op.label();
      }
    }
  }
}

TEST(Schedule, ComputeOpsCarryTheirModulesKernels) {
  // FSDP's unit is a block: one forward op with every kernel of the block:
  // 2 norms, q, k, v, rotary on q and k, attention (materialised: scores,
  // softmax, context, layout), o, residual, gate, silu, up, mul, down,
  // residual = 19 kernels.
  const Schedule s = Lower("fsdp:FULL_SHARD", Training(1));
  for (const Op& op : s.ops()) {
    if (op.has_compute() && op.label() == "forward block 3") {
      EXPECT_EQ(KernelsOf(s, op.compute()).kernels_size(), 19);
      return;
    }
  }
  ADD_FAILURE() << "no forward op for block 3";
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
  // qwZ: every gather in int8 with an fp32 scale per 4096 values
  // (coalesced calls): forward across the 32 GPUs, backward (hpZ) over
  // the node.
  EXPECT_GE(tensors.at("P int8 8x4"), 1);
  EXPECT_EQ(tensors.at("P int8 8x1"), Gathered(s, BACKWARD).second);
  EXPECT_EQ(tensors.count("P 8x1"), 0u);
  // qgZ tensor by tensor: every matrix (embedding, 7 per block, lm_head;
  // 4096-wide, so divisible by 2 x 32) as int4 all-to-alls; every norm
  // (2 per block and the final one) is 1-D, reduce-scattered in bf16 over
  // the 32 GPUs, as DeepSpeed's all_to_all_quant_reduce does.
  constexpr int kMatrices = 1 + 32 * 7 + 1;
  EXPECT_EQ(tensors.at("G int4 8x1"), kMatrices);  // inside the node
  EXPECT_EQ(tensors.at("G int4 1x4"), kMatrices);  // across nodes
  EXPECT_EQ(tensors.at("G 8x4"), 32 * 2 + 1);
}

TEST(Schedule, ZeroPPGathersLaterMicroBatchesFromTheSecondaryCopy) {
  // The secondary copy exists once the parameters were released after a
  // use: the first micro-batch's forward gathers across the 32 GPUs, the
  // second's inside the node, its whole model like the first's.
  const Schedule s = Lower("zeropp", Training(2));
  int64_t across = 0, inside = 0;
  for (const Op& op : s.ops()) {
    if (!op.has_collective() || op.collective().op() != ALL_GATHER ||
        op.phase() != FORWARD) {
      continue;
    }
    const std::string g = GroupName(op.collective().group());
    if (op.micro_batch() == 0) {
      EXPECT_EQ(g, "8x4");
      across += op.collective().bytes();
    } else {
      EXPECT_EQ(g, "8x1");
      inside += op.collective().bytes();
    }
  }
  EXPECT_GT(across, 0);
  EXPECT_EQ(inside, across);
}

TEST(Schedule, QuantizedBytesCarryScales) {
  // 8192 int8 values: 8192 bytes + 2 fp32 scales; int4: 4096 + 8.
  EXPECT_EQ(QuantizedBytes(8192, 8), 8192 + 8);
  EXPECT_EQ(QuantizedBytes(8192, 4), 4096 + 8);
}

}  // namespace
}  // namespace shardsim
