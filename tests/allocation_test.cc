#include "sim/memory/allocation.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/results/results.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/periodic.h"

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

Job TinyJob(const std::string& strategy, int gpus, bool recompute,
            int micro_batches = 2) {
  Scenario s;
  s.set_name("allocation test");
  s.set_model(std::string(SHARDSIM_SOURCE_DIR) +
              "/tests/data/tiny_model.textproto");
  s.set_platform("dgx_a100");
  s.add_strategies(strategy);
  s.add_gpus(gpus);
  s.set_micro_batch_size(2);
  s.set_micro_batches(micro_batches);
  s.set_seq_len(64);
  s.set_recompute(recompute);
  s.set_optimizer_bytes_per_param(12);
  absl::StatusOr<Job> job = ResolveJob("allocation test", s);
  EXPECT_TRUE(job.ok()) << job.status();
  return *std::move(job);
}

Point TinyPoint(const std::string& strategy, int gpus, bool recompute) {
  absl::StatusOr<Point> p =
      AnalyzePoint(TinyJob(strategy, gpus, recompute), strategy, gpus);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

// The row's memory lines, without the reserve.
MemoryLines LinesOfRow(const ResultRow& r) {
  MemoryLines m;
  m.params = r.param_bytes();
  m.grads = r.grad_bytes();
  m.optimizer = r.optimizer_bytes();
  m.activations = r.activation_bytes();
  m.buffers = r.buffer_bytes();
  return m;
}

void ExpectSameLines(const MemoryLines& a, const MemoryLines& b) {
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.grads, b.grads);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.activations, b.activations);
  EXPECT_EQ(a.buffers, b.buffers);
}

TEST(AllocationPlan, Zero3StatesAreTheModelsShards) {
  const Point p = TinyPoint("zero3", 8, false);
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(*p.schedule);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 2 psi / 8, 2 psi / 8, 12 psi / 8: whole bytes.
  EXPECT_EQ(plan->at_peak.params, 2 * kPsi / 8);
  EXPECT_EQ(plan->at_peak.grads, 2 * kPsi / 8);
  EXPECT_EQ(plan->at_peak.optimizer, 12 * kPsi / 8);
  // The row reports the plan: its lines at the peak, and the peak with
  // the platform's reserve.
  ExpectSameLines(LinesOfRow(p.row), plan->at_peak);
  EXPECT_EQ(p.row.peak_memory_bytes(),
            plan->peak_bytes + p.row.reserved_bytes());
  EXPECT_EQ(p.row.reserved_bytes(), int64_t{2} << 30);  // dgx_a100's
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
        if (!kept) {
          EXPECT_GT(a.free_op, a.alloc_op) << spec;
        }
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

// A folded step's plan (read through its base) is the plan of the step
// unfolded, op by op: every named strategy, with and without
// recomputation, at 12 micro-batches (folded at kFoldAt = 6 where the
// fold holds; the others are stored whole and checked alike).
TEST(AllocationPlan, FoldedStepPlansAsTheWholeStep) {
  int folds = 0;
  for (const char* spec :
       {"ddp", "zero1", "zero2", "zero3", "fsdp:FULL_SHARD",
        "fsdp:SHARD_GRAD_OP", "fsdp:HYBRID_SHARD", "fsdp:_HYBRID_SHARD_ZERO2",
        "mics", "zeropp", "paro-IGG", "paro-IIG", "paro-NIG",
        "lins:p=1x1:g=1x1:os=8x1"}) {
    for (bool recompute : {false, true}) {
      SCOPED_TRACE(absl::StrCat(spec, " recompute ", recompute));
      const Job job = TinyJob(spec, 16, recompute, /*micro_batches=*/12);
      absl::StatusOr<Point> folded =
          LowerPoint(job, spec, 16, Storage::kFolded);
      ASSERT_TRUE(folded.ok()) << folded.status();
      folds += folded->fold.has_value();
      absl::StatusOr<Point> whole = LowerPoint(job, spec, 16, Storage::kWhole);
      ASSERT_TRUE(whole.ok()) << whole.status();
      absl::StatusOr<AllocationPlan> a = PlanAllocations(folded->ops());
      ASSERT_TRUE(a.ok()) << a.status();
      absl::StatusOr<AllocationPlan> b = PlanAllocations(*whole->schedule);
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(a->peak_bytes, b->peak_bytes);
      EXPECT_EQ(a->peak_op, b->peak_op);
      ExpectSameLines(a->at_peak, b->at_peak);
      ExpectSameLines(a->own_peak, b->own_peak);
    }
  }
  EXPECT_GE(folds, 8);
}

// Where the repeated block does not leave memory as it found it, the
// folded step is walked op by op through the fold: the same plan as the
// step unfolded.
TEST(AllocationPlan, AFoldThatGrowsIsWalkedWhole) {
  const Job job = TinyJob("fsdp:FULL_SHARD", 16, false, /*micro_batches=*/12);
  absl::StatusOr<Point> p =
      LowerPoint(job, "fsdp:FULL_SHARD", 16, Storage::kFolded);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->fold.has_value());
  // Drop one free of the repeated block whose allocation is in the block:
  // every copy then keeps that buffer.
  const Repeats& r = p->fold->r;
  const int block = r.BlockStart(r.hi);
  Schedule& base = *p->schedule.mutable_schedule();
  int dropped = -1;
  for (int id = block; id < block + r.period_ops && dropped < 0; ++id) {
    const Op& op = base.ops(id);
    if (op.has_memory() && op.memory().delta_bytes() < 0 &&
        op.memory().frees() >= block) {
      dropped = id;
    }
  }
  ASSERT_GE(dropped, 0);
  const int64_t kept = -base.ops(dropped).memory().delta_bytes();
  base.mutable_ops(dropped)->clear_memory();
  absl::StatusOr<AllocationPlan> a = PlanAllocations(p->ops());
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<AllocationPlan> b = PlanAllocations(*Unfold(p->ops()));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->peak_bytes, b->peak_bytes);
  EXPECT_EQ(a->peak_op, b->peak_op);
  ExpectSameLines(a->at_peak, b->at_peak);
  ExpectSameLines(a->own_peak, b->own_peak);
  // The base alone would miss the copies' kept buffers.
  absl::StatusOr<AllocationPlan> base_only = PlanAllocations(base);
  ASSERT_TRUE(base_only.ok()) << base_only.status();
  EXPECT_GE(a->peak_bytes, base_only->peak_bytes + p->fold->copies * kept);
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
