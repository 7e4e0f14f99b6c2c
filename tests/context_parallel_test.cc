// Context parallelism as Megatron-LM runs it with Transformer Engine's ring
// attention (cp_comm_type "p2p"): the attention's split into the GPU's own
// keys and the ring's, the ring's collectives in the lowered step, their
// steps and bytes on the ring, and a step's traffic. Every expected value
// is derived below from the shapes.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/collective/plan.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/schedule/lower.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "sim/traffic/traffic.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

// LLaMA-style, GQA: 16 query heads and 4 kv heads of 64.
constexpr int64_t kH = 1024;
constexpr int kHeads = 16;
constexpr int kKvHeads = 4;
constexpr int64_t kD = kH / kHeads;
constexpr int64_t kS = 1024;  // tokens per sequence
constexpr int kCp = 8;        // one 8-GPU node

Model Llama(int blocks = 2) {
  Model m;
  m.set_name("llama-cp-test");
  m.set_layers(blocks);
  m.set_hidden(kH);
  m.set_heads(kHeads);
  m.set_kv_heads(kKvHeads);
  m.set_ffn_hidden(2816);
  m.set_vocab(32000);
  m.set_mlp(Model::SWIGLU);
  m.set_norm(Model::RMSNORM);
  return m;
}

Batch Context(int cp) {
  Batch b = test::Sequences(1, kS);
  b.cp = cp;
  b.flash_attention = true;
  return b;
}

const Kernel* Named(const Layer& layer, const std::string& name) {
  for (const Unit& u : layer.units) {
    for (const Kernel& k : u.forward) {
      if (k.name() == name) return &k;
    }
  }
  return nullptr;
}

// K and V of the whole sequence, the GPU's 4 kv heads, bf16: what the ring
// brings every GPU (2 x 1024 x 256 x 2 bytes = 1 MiB), and a rank's own
// share of it, what it passes on at each step.
constexpr int64_t kKv = 2 * kS * kKvHeads * kD * 2;
constexpr int64_t kKvChunk = kKv / kCp;

TEST(ContextParallel, AttentionRunsOverItsOwnKeysThenTheRings) {
  const Layer block = ModelLayers(Llama(), Context(kCp))[1];
  const Kernel* own = Named(block, "attention");
  const Kernel* ring = Named(block, "attention (ring)");
  ASSERT_NE(own, nullptr);
  ASSERT_NE(ring, nullptr);
  // 1024 / 8 = 128 queries; against its own 128 keys, then the 896 others.
  EXPECT_EQ(own->attention().seq(), 128);
  EXPECT_EQ(own->attention().kv_seq(), 0);  // as many as queries
  EXPECT_EQ(ring->attention().seq(), 128);
  EXPECT_EQ(ring->attention().kv_seq(), 896);
  // Causal halves of 4 b heads s kv d: 2 x 16 x 128 x {128, 896} x 64.
  EXPECT_DOUBLE_EQ(KernelFlops(*own), 2.0 * 16 * 128 * 128 * 64);
  EXPECT_DOUBLE_EQ(KernelFlops(*ring), 2.0 * 16 * 128 * 896 * 64);
  // Together one cp-th of the whole sequence's attention.
  const std::vector<Layer> one = ModelLayers(Llama(), Context(1));
  const Kernel* whole = Named(one[1], "attention");
  ASSERT_NE(whole, nullptr);
  EXPECT_DOUBLE_EQ(KernelFlops(*own) + KernelFlops(*ring),
                   KernelFlops(*whole) / kCp);
}

// One step of one micro-batch on one 8-GPU node, cp 8 (the strategy's
// dp x cp mesh is the same 8 GPUs).
Schedule Lower(const Model& m, int cp) {
  const Mesh mesh{8, 1};
  Scenario sc = test::Training(1, static_cast<int>(kS));
  sc.mutable_parallelism()->set_cp(cp);
  sc.set_flash_attention(true);
  absl::StatusOr<Strategy> st = ParseStrategy("ddp", Mesh{8, 1});
  EXPECT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(ResolveExecution(sc.execution(), 4096, &*st).ok());
  absl::StatusOr<OwnedSchedule> s =
      LowerStep(ModelLayers(m, Context(cp)), *st, mesh, sc);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? **s : Schedule();
}

std::vector<const Op*> RingOps(const Schedule& s, int layer) {
  std::vector<const Op*> out;
  for (const Op& op : s.ops()) {
    if (op.body_case() == Op::kCollective && op.layer() == layer &&
        op.collective().dimension() == "cp") {
      out.push_back(&op);
    }
  }
  return out;
}

TEST(ContextParallelLowering, KvGoesRoundOnceForwardAndTwiceBackward) {
  const Schedule s = Lower(Llama(), kCp);
  // Per block: forward, K and V all-gathered beside the attention;
  // backward, K and V again and their gradients reduce-scattered to their
  // owners. The all-gathers on the ring's own stream, the reduce-scatter
  // blocking the compute stream.
  std::map<std::string, int> census;
  for (const Op* op : RingOps(s, 1)) {
    const CollectiveCall& c = op->collective();
    EXPECT_EQ(GroupSize(c.group()), kCp) << op->label();
    EXPECT_EQ(c.bytes(), kKv) << op->label();
    EXPECT_EQ(c.algorithm(), RING) << op->label();
    census[absl::StrCat(CollectiveOp_Name(c.op()), " ", Phase_Name(op->phase()),
                        " ", Stream_Name(op->stream()), " ", c.tensor())]++;
  }
  EXPECT_EQ(census, (std::map<std::string, int>{
                        {"ALL_GATHER FORWARD CONTEXT kv", 1},
                        {"ALL_GATHER BACKWARD CONTEXT kv", 1},
                        {"REDUCE_SCATTER BACKWARD COMPUTE kv grad", 1}}));
  // Nothing on the cp group without cp.
  EXPECT_TRUE(RingOps(Lower(Llama(), 1), 1).empty());
}

// The compute op whose kernel list holds kernel `name`, in `phase`.
const Op* ComputeWith(const Schedule& s, Phase phase, const std::string& name) {
  for (const Op& op : s.ops()) {
    if (!op.has_compute() || op.phase() != phase || op.layer() != 1) continue;
    for (const Kernel& k : s.kernel_lists(op.compute().kernel_list()).kernels())
      if (k.name() == name) return &op;
  }
  return nullptr;
}

bool DependsOn(const Op& op, int id) {
  for (int d : op.deps()) {
    if (d == id) return true;
  }
  return false;
}

TEST(ContextParallelLowering, TheRingOverlapsTheAttentionOverOwnKeys) {
  const Schedule s = Lower(Llama(), kCp);
  for (Phase phase : {FORWARD, BACKWARD}) {
    SCOPED_TRACE(Phase_Name(phase));
    const std::string attention =
        phase == FORWARD ? "attention" : "attention backward";
    const Op* own = ComputeWith(s, phase, attention);
    const Op* ring = ComputeWith(s, phase, attention + " (ring)");
    const Op* gather = nullptr;
    for (const Op* op : RingOps(s, 1)) {
      if (op->phase() == phase && op->collective().op() == ALL_GATHER)
        gather = op;
    }
    ASSERT_NE(own, nullptr);
    ASSERT_NE(ring, nullptr);
    ASSERT_NE(gather, nullptr);
    ASSERT_NE(own, ring);
    // The gather and the attention over own keys start together, after
    // the same op; the rest of the attention waits for both.
    EXPECT_EQ(std::vector<int>(gather->deps().begin(), gather->deps().end()),
              std::vector<int>(own->deps().begin(), own->deps().end()));
    EXPECT_FALSE(DependsOn(*own, gather->id()));
    EXPECT_TRUE(DependsOn(*ring, gather->id()));
    EXPECT_TRUE(DependsOn(*ring, own->id()));
  }
}

TEST(ContextParallelRing, SevenStepsEachPassingOneRanksKv) {
  // The ring all-gather's plan: cp - 1 = 7 steps; at each every rank sends
  // one rank's K and V (1 MiB / 8 = 128 KiB) to the next, as Transformer
  // Engine's send/recv of KV does.
  PlanRequest r;
  r.op = ALL_GATHER;
  r.algorithm = RING;
  r.shape = PlanShape{kCp, 1};
  r.count = kKv / 2;  // bf16 elements
  absl::StatusOr<Plan> plan = MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<Transfer> t = ExpandTransfers(*plan);
  std::set<int> steps;
  std::map<int, int64_t> sent_per_step;
  for (const Transfer& x : t) {
    steps.insert(x.step);
    EXPECT_EQ(x.dst, (x.src + 1) % kCp);
    sent_per_step[x.step * kCp + x.src] += x.count * 2;
  }
  EXPECT_EQ(steps.size(), static_cast<size_t>(kCp - 1));
  ASSERT_EQ(sent_per_step.size(), static_cast<size_t>((kCp - 1) * kCp));
  for (const auto& [key, bytes] : sent_per_step) {
    EXPECT_EQ(bytes, kKvChunk) << "step " << key / kCp;
  }
}

TEST(ContextParallelRing, AStepsTrafficIsThreeRingsPerBlock) {
  const Schedule s = Lower(Llama(2), kCp);
  const Platform platform = test::ShippedPlatform("dgx_h100");
  absl::StatusOr<std::vector<TrafficEntry>> traffic =
      CountTraffic(s, Mesh{8, 1}, platform);
  ASSERT_TRUE(traffic.ok()) << traffic.status();
  int64_t kv = 0;
  for (const TrafficEntry& e : *traffic) {
    if (e.tensor() == "kv" || e.tensor() == "kv grad") {
      EXPECT_EQ(e.inter_node_bytes(), 0);
      kv += e.intra_node_bytes();
    }
  }
  // 2 blocks x 3 rings x 8 GPUs x 7 steps x 128 KiB.
  EXPECT_EQ(kv, 2 * 3 * kCp * (kCp - 1) * kKvChunk);
}

}  // namespace
}  // namespace shardsim
