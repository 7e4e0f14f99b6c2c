// Sharding composed with tensor, sequence and pipeline parallelism: ZeRO-3
// x TP8 (sequence parallel) x PP4 at 256 GPUs of dgx_a100
// (tests/data/compose_256.textproto, which shardsim-hw also replays on
// the CPU transport: tests/hw_compose_test.sh). The step lowers into four
// stages, simulates, and its memory and traffic are the values derived
// below from the shapes.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/memory/allocation.h"
#include "sim/scenario/scenario.h"
#include "sim/simulate/simulate.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

// The model: h 256, 8 heads of 32, SwiGLU of 688, vocabulary 1024, no
// biases, 4 blocks; b 1, s 64, 4 micro-batches; tp 8, pp 4, dp 8.
constexpr int64_t kTp = 8, kDp = 8, kMicroBatches = 4, kStageGpus = 64;
// One GPU's parameters (Megatron's splits, tp 8): q, k, v column-parallel
// 32 x 256 each; o row-parallel 256 x 32; gate and up 86 x 256, down
// 256 x 86; two RMSNorms of 256, whole.
constexpr int64_t kBlock = 3 * 32 * 256 + 256 * 32 + 3 * 86 * 256 + 2 * 256;
constexpr int64_t kEmbedding = 1024 / kTp * 256;   // vocabulary-parallel
constexpr int64_t kHead = 256 + 1024 / kTp * 256;  // final norm, lm_head
constexpr int64_t kStage[4] = {kEmbedding + kBlock, kBlock, kBlock,
                               kBlock + kHead};

// Bytes every strategy on this layout sends alike: the pipeline's sends,
// each boundary's activations forward and their gradients back, b s / tp x
// h bf16 a rank (sequence parallel) over 3 boundaries, between nodes; the
// gradient norm's all-reduce in each of the 256 / 8 = 32 dp groups
// (counted as one fp32 a member, 32 bytes); and inside nodes, tensor
// parallelism's calls and the norm's all-reduce over tp (derived in
// Zero3Tp8Pp4TrafficIsDerivedByHand).
constexpr int64_t kP2pBytes =
    2 * 3 * kMicroBatches * kStageGpus * (64 / kTp * 256 * 2);
constexpr int64_t kDpNormBytes = 32 * kDp * 2 * (4 * kDp) * 7 / 8;
constexpr int64_t kIntraNodeBytes =
    kMicroBatches * kStageGpus *
        ((4 * 10 + 2 + 3) * (64 * 256 * 2) * 7 / 8 + 3 * 2 * (64 * 4) * 7 / 8) +
    4 * kStageGpus * 2 * (4 * kTp) * 7 / 8;

// `grad_norm`: in place of DeepSpeed's, unless unspecified.
Job ComposeJob(GradNorm grad_norm = GRAD_NORM_UNSPECIFIED) {
  const std::string path = test::SourcePath("tests/data/compose_256.textproto");
  absl::StatusOr<Scenario> sc = ReadScenario(path);
  EXPECT_TRUE(sc.ok()) << sc.status();
  sc->mutable_execution()->set_grad_norm(grad_norm);
  absl::StatusOr<Job> job = ResolveJob(path, *sc);
  EXPECT_TRUE(job.ok()) << job.status();
  return *std::move(job);
}

TEST(Composition, Zero3Tp8Pp4LowersIntoFourStagesOf64Gpus) {
  EXPECT_EQ(kBlock, 99328);
  absl::StatusOr<Point> point = AnalyzePoint(ComposeJob(), "zero3", 256);
  ASSERT_TRUE(point.ok()) << point.status();
  const Schedule& s = *point->schedule;
  ASSERT_EQ(s.programs_size(), 4);
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(s.programs(k).role());
    EXPECT_EQ(s.programs(k).ranks_size(), kStageGpus);
    // ZeRO-3 over the 8 dp ranks: a shard of each parameter in bf16, of
    // its gradient in bf16, and 12 bytes of Adam states per parameter.
    absl::StatusOr<AllocationPlan> plan = PlanAllocations(s, k);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->own_peak.params, kStage[k] / kDp * 2);
    EXPECT_EQ(plan->own_peak.grads, kStage[k] / kDp * 2);
    EXPECT_EQ(plan->own_peak.optimizer, kStage[k] / kDp * 12);
  }
}

TEST(Composition, Zero3Tp8Pp4TrafficIsDerivedByHand) {
  absl::StatusOr<Point> point = AnalyzePoint(ComposeJob(), "zero3", 256);
  ASSERT_TRUE(point.ok()) << point.status();
  // Rings of p members send (p-1)/p of a gathered or scattered buffer per
  // member, 2(p-1)/p of an all-reduced one.
  //
  // Across nodes (a dp group is one GPU of each of 8 nodes; a stage is 8
  // nodes): per micro-batch ZeRO-3 gathers a stage's parameters for the
  // forward and again for the backward and reduce-scatters its gradients,
  // 3 buffers of 2 bytes a parameter; and the pipeline sends each
  // boundary's activations forward and their gradients back, b s / tp x h
  // bf16 a rank (sequence parallel) over 3 boundaries. Before the update
  // DeepSpeed all-reduces the gradient norm in every dp group (counted as
  // one fp32 a member, 32 bytes), 256 / 8 = 32 groups.
  int64_t params = 0;
  for (int64_t p : kStage) params += p;
  const int64_t dp = kStageGpus * kMicroBatches * 3 * (2 * params) * 7 / 8;
  EXPECT_EQ(point->row.inter_node_bytes(), dp + kP2pBytes + kDpNormBytes);
  // Inside nodes, tensor parallelism's groups of 8 (sequence parallel),
  // each call of the hidden states, b s h bf16 = 32 KiB: per block 2
  // all-gathers and 2 reduce-scatters forward, 4 all-gathers (2 of them
  // re-gathering inputs for the weight gradients) and 2 reduce-scatters
  // backward; the embedding's output reduce-scattered and its gradient
  // gathered; the LM head's input gathered, again for its weight gradient,
  // and its gradient reduce-scattered; the vocabulary-parallel loss's 3
  // all-reduces of b s fp32. Once a step the gradient norm is all-reduced
  // over the tensor-parallel group too (one fp32 a member, 32 bytes), by
  // every one of the 4 x 64 GPUs.
  const int64_t calls = 4 * 10 + 2 + 3;
  const int64_t tp =
      kMicroBatches * kStageGpus *
      (calls * (64 * 256 * 2) * 7 / 8 + 3 * 2 * (64 * 4) * 7 / 8);
  const int64_t tp_norm = 4 * kStageGpus * 2 * (4 * kTp) * 7 / 8;
  EXPECT_EQ(point->row.intra_node_bytes(), tp + tp_norm);
  EXPECT_EQ(tp + tp_norm, kIntraNodeBytes);
}

// Megatron-LM's distributed optimizer on the same layout
// (strategy.cc ParseMegatron; docs/source/api-guide/dist_optimizer.md):
// each GPU keeps its stage's bf16 parameters whole (2 bytes a parameter),
// the gradient buffer whole in fp32 (4), and 12 bytes of fp32 master
// weights and Adam moments over its 8 dp ranks: 6 + 12/8 bytes.
TEST(Composition, MegatronDistributedOptimizerMemoryIsDerivedByHand) {
  absl::StatusOr<Point> point =
      AnalyzePoint(ComposeJob(), "megatron:DISTRIBUTED_OPTIMIZER", 256);
  ASSERT_TRUE(point.ok()) << point.status();
  const Schedule& s = *point->schedule;
  ASSERT_EQ(s.programs_size(), 4);
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(s.programs(k).role());
    absl::StatusOr<AllocationPlan> plan = PlanAllocations(s, k);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->own_peak.params, kStage[k] * 2);
    EXPECT_EQ(plan->own_peak.grads, kStage[k] * 4);
    EXPECT_EQ(plan->own_peak.optimizer, kStage[k] * 12 / kDp);
  }
}

// Its traffic: once a step, after the last micro-batch, each dp group (one
// GPU of each of a stage's 8 nodes) reduce-scatters its stage's fp32
// gradient buffer onto the optimizer's shards (4 bytes a parameter) and,
// after the update, all-gathers the bf16 parameters (2 bytes); nothing per
// micro-batch. The pipeline's sends and the gradient norm's all-reduce
// over dp and tp are as under ZeRO-3 (above); tensor parallelism's calls
// too.
TEST(Composition, MegatronDistributedOptimizerTrafficIsDerivedByHand) {
  absl::StatusOr<Point> point =
      AnalyzePoint(ComposeJob(), "megatron:DISTRIBUTED_OPTIMIZER", 256);
  ASSERT_TRUE(point.ok()) << point.status();
  int64_t dp = 0;
  for (int64_t p : kStage) dp += kStageGpus * (4 + 2) * p * 7 / 8;
  EXPECT_EQ(point->row.inter_node_bytes(), dp + kP2pBytes + kDpNormBytes);
  EXPECT_EQ(point->row.intra_node_bytes(), kIntraNodeBytes);
  // Megatron's DDP all-reduces the same fp32 buffer instead (2 (p-1)/p of
  // it), gathers nothing, and keeps Adam's states whole: its norm is
  // all-reduced over tp alone, the gradients being whole on every rank.
  absl::StatusOr<Point> ddp = AnalyzePoint(ComposeJob(), "megatron:DDP", 256);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  int64_t all_reduce = 0;
  for (int64_t p : kStage) all_reduce += kStageGpus * 2 * 4 * p * 7 / 8;
  EXPECT_EQ(ddp->row.inter_node_bytes(), all_reduce + kP2pBytes);
  absl::StatusOr<AllocationPlan> plan = PlanAllocations(*ddp->schedule, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->own_peak.optimizer, kBlock * 12);
}

TEST(Composition, Zero3Tp8Pp4Simulates) {
  absl::StatusOr<Results> r = SimulateJob(ComposeJob(), EngineOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows_size(), 1);
  const ResultRow& row = r->rows(0);
  EXPECT_GT(row.step_time_s(), 0);
  EXPECT_FALSE(row.oom());
  // The tiny step's path runs on the hosts (launch overhead), and ends in
  // the update of the stage whose host issues last: DeepSpeed's gradient
  // norm, a Python loop of two kernels per tensor, hides the pipeline's
  // sends and bubble behind it. Without the norm they are on the path.
  EXPECT_GT(row.breakdown().launch_overhead_s(), 0.5 * row.step_time_s());
  absl::StatusOr<Results> plain =
      SimulateJob(ComposeJob(NO_GRAD_NORM), EngineOptions());
  ASSERT_TRUE(plain.ok()) << plain.status();
  const Breakdown& b = plain->rows(0).breakdown();
  EXPECT_GT(b.point_to_point_s() + b.pipeline_bubble_s(), 0);
}

}  // namespace
}  // namespace shardsim
