#include "sim/memory/allocation.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/memory/memory.h"
#include "sim/results/results.h"
#include "sim/scenario/scenario.h"

namespace shardsim {
namespace {

// tests/data/tiny_model.textproto: 2 LLaMA blocks, hidden 256, ffn 688,
// vocab 1024, untied. Parameters, by hand:
//   embedding 1024 x 256                         =   262,144
//   block: q, k, v, o 4 x 256 x 256 = 262,144; gate, up, down
//          3 x 256 x 688 = 528,384; two norms 512  =   791,040 (x 2)
//   head: norm 256 + lm_head 1024 x 256          =   262,400
//   psi                                           = 2,106,624
constexpr int64_t kPsi = 262'144 + 2 * 791'040 + 262'400;
static_assert(kPsi == 2'106'624);

Point TinyPoint(const std::string& strategy, int gpus, bool recompute) {
  Scenario s;
  s.set_name("allocation test");
  s.set_model(std::string(SHARDSIM_SOURCE_DIR) +
              "/tests/data/tiny_model.textproto");
  s.set_platform("dgx_a100");
  s.add_strategies(strategy);
  s.add_gpus(gpus);
  s.set_micro_batch_size(2);
  s.set_micro_batches(2);
  s.set_seq_len(64);
  s.set_recompute(recompute);
  s.set_optimizer_bytes_per_param(12);
  absl::StatusOr<Job> job = ResolveJob("allocation test", s);
  EXPECT_TRUE(job.ok()) << job.status();
  absl::StatusOr<Point> p = AnalyzePoint(*job, strategy, gpus);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

MemoryBreakdown ModelOf(const ResultRow& r) {
  MemoryBreakdown m;
  m.states.params = r.param_bytes();
  m.states.grads = r.grad_bytes();
  m.states.optimizer = r.optimizer_bytes();
  m.activations = r.activation_bytes();
  m.buffers = r.buffer_bytes();
  return m;
}

TEST(AllocationPlan, Zero3StatesAreTheModelsShards) {
  const Point p = TinyPoint("zero3", 8, false);
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(*p.schedule);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 2 psi / 8, 2 psi / 8, 12 psi / 8: whole bytes.
  EXPECT_EQ(plan->at_peak.params, 2 * kPsi / 8);
  EXPECT_EQ(plan->at_peak.grads, 2 * kPsi / 8);
  EXPECT_EQ(plan->at_peak.optimizer, 12 * kPsi / 8);
  const MemoryLines model = LinesOf(ModelOf(p.row));
  EXPECT_EQ(plan->at_peak.params, model.params);
  EXPECT_EQ(plan->at_peak.grads, model.grads);
  EXPECT_EQ(plan->at_peak.optimizer, model.optimizer);
  // Without recomputation every layer's activations are alive when a
  // micro-batch's backward starts: the activation line's own peak is the
  // model's line (the step's peak may come later, with fewer kept).
  EXPECT_EQ(plan->own_peak.activations, model.activations);
}

TEST(AllocationPlan, EveryStepBufferIsFreedOnce) {
  for (const char* spec : {"ddp", "zero1", "zero2", "zero3", "fsdp:FULL_SHARD",
                           "fsdp:SHARD_GRAD_OP", "mics", "zeropp", "paro-IGG",
                           "paro-NIG", "lins:p=1x1:g=1x1:os=8x1"}) {
    for (bool recompute : {false, true}) {
      const Point p = TinyPoint(spec, 16, recompute);
      absl::StatusOr<AllocationPlan> plan = PlanAllocations(*p.schedule);
      ASSERT_TRUE(plan.ok()) << spec << ": " << plan.status();
      for (const Allocation& a : plan->allocations) {
        const bool kept = a.buffer == "P shard" || a.buffer == "P secondary" ||
                          a.buffer == "G shard" || a.buffer == "OS shard";
        EXPECT_EQ(a.free_op < 0, kept)
            << spec << " recompute " << recompute << ": " << a.buffer
            << " of op " << a.alloc_op;
        if (!kept) EXPECT_GT(a.free_op, a.alloc_op) << spec;
      }
    }
  }
}

TEST(AllocationPlan, RecomputeKeepsOnlyBlockInputs) {
  // With recomputation a block keeps its input, b x s x h bf16 =
  // 2 x 64 x 256 x 2 = 65,536 bytes; its working set is back only while its
  // backward runs.
  const Point p = TinyPoint("zero3", 8, true);
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(*p.schedule);
  ASSERT_TRUE(plan.ok()) << plan.status();
  int blocks = 0;
  for (const Allocation& a : plan->allocations) {
    if (a.buffer == "activations" &&
        p.schedule->ops(a.alloc_op).label() == "alloc activations" &&
        p.schedule->ops(a.alloc_op).layer() >= 1 &&
        p.schedule->ops(a.alloc_op).layer() <= 2) {
      EXPECT_EQ(a.bytes, 65'536);
      ++blocks;
    }
  }
  EXPECT_EQ(blocks, 2 * 2);  // 2 blocks x 2 micro-batches
}

TEST(AllocationPlan, RefusesAFreeOfNothing) {
  Schedule s;
  Op* op = s.add_ops();
  op->set_id(0);
  op->mutable_memory()->set_delta_bytes(-100);
  op->mutable_memory()->set_buffer("P full");
  op->mutable_memory()->set_frees(7);
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(s);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("op 7"), std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace shardsim
