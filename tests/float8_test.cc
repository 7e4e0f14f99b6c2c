// FP8 training (scenario kernels.float8): which GPUs may run it, and what
// it changes in a simulated step.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/lower.h"
#include "sim/simulate/simulate.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

Scenario Llama7b(const std::string& platform) {
  Scenario s;
  s.set_model("llama-7b");
  s.set_platform(platform);
  s.add_strategies("fsdp:FULL_SHARD");
  s.add_gpus(8);
  s.set_micro_batch_size(2);
  s.set_micro_batches(1);
  s.set_seq_len(2048);
  s.set_flash_attention(true);
  s.set_optimizer_bytes_per_param(12);
  s.mutable_kernels()->mutable_float8()->set_enabled(true);
  return s;
}

TEST(Float8, AGpuWithoutFp8TensorCoresIsAnError) {
  absl::StatusOr<Job> job = ResolveJob("fp8.textproto", Llama7b("dgx_a100"));
  ASSERT_FALSE(job.ok());
  const std::string m(job.status().message());
  EXPECT_NE(m.find("fp8.textproto"), std::string::npos) << m;
  EXPECT_NE(m.find("kernels.float8.enabled"), std::string::npos) << m;
  EXPECT_NE(m.find("A100-SXM4-80GB"), std::string::npos) << m;
}

TEST(Float8, UnderTensorParallelismIsRefusedByName) {
  Scenario s = Llama7b("dgx_h100");
  s.mutable_parallelism()->set_tp(2);
  const absl::Status v = ValidateScenario(s, "fp8.textproto");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("kernels.float8.enabled"), std::string::npos) << v;
}

TEST(Float8, AStepOnH100RunsItsLinearLayersFaster) {
  // The casts add memory-bound kernels; the GEMMs, most of the step, run
  // at the FP8 rate. The step is faster and its model FLOPs the same.
  absl::StatusOr<Job> fp8 = ResolveJob("fp8.textproto", Llama7b("dgx_h100"));
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  Job bf16 = *fp8;
  bf16.scenario.mutable_kernels()->clear_float8();
  absl::StatusOr<Results> a = SimulateJob(*fp8, EngineOptions());
  absl::StatusOr<Results> b = SimulateJob(bf16, EngineOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_LT(a->rows(0).step_time_s(), b->rows(0).step_time_s());
  EXPECT_GT(a->rows(0).step_time_s(), 0.5 * b->rows(0).step_time_s());
  EXPECT_DOUBLE_EQ(a->rows(0).mfu() * a->rows(0).step_time_s(),
                   b->rows(0).mfu() * b->rows(0).step_time_s());
}

// Bytes all-gathered in the first micro-batch's forward for block 1 of
// LLaMA-7B under FSDP on one node of 8, and the block's kernels.
struct Gathered {
  int64_t bytes = 0;
  std::vector<Unit> units;
};
Gathered FirstBlock(bool fp8_gather) {
  Scenario s = Llama7b("dgx_h100");
  s.mutable_kernels()->mutable_float8()->set_fsdp_all_gather(fp8_gather);
  absl::StatusOr<Strategy> st = ParseStrategy("fsdp:FULL_SHARD", Mesh{8, 1});
  EXPECT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(ResolveExecution(s.execution(), 4096, &*st).ok());
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  EXPECT_TRUE(model.ok());
  const std::vector<Layer> layers = ModelLayers(*model, ScenarioBatch(s));
  absl::StatusOr<OwnedSchedule> lowered = LowerStep(layers, *st, Mesh{8, 1}, s);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  Gathered g;
  g.units = layers[1].units;
  if (!lowered.ok()) return g;
  for (const Op& op : (*lowered)->ops()) {
    if (op.has_collective() && op.collective().op() == ALL_GATHER &&
        op.phase() == FORWARD && op.micro_batch() == 0 && op.layer() == 1) {
      g.bytes += op.collective().bytes();
    }
  }
  return g;
}

TEST(Float8, FsdpGathersTheFloat8WeightsAtOneByte) {
  // A LLaMA-7B block: 4 x 4096^2 attention and 3 x 4096 x 11008 MLP
  // weights (202,375,168 parameters, float8 layers) and two norms of 4096
  // (bf16). bf16 gathers 2 bytes of each; float8 1 byte of the matrices.
  const int64_t matrices = 4LL * 4096 * 4096 + 3LL * 4096 * 11008;
  const int64_t norms = 2 * 4096;
  EXPECT_EQ(FirstBlock(false).bytes, 2 * (matrices + norms));
  const Gathered fp8 = FirstBlock(true);
  EXPECT_EQ(fp8.bytes, matrices + 2 * norms);
  // The weights come cast: no weight cast forward; backward copies the
  // float8 weight to column-major for dgrad.
  for (const Unit& u : fp8.units) {
    for (const Kernel& k : u.forward)
      EXPECT_FALSE(absl::StrContains(k.name(), "weight")) << k.name();
    if (u.fp8_params == 0) continue;
    int copies = 0;
    for (const Kernel& k : u.backward) {
      if (absl::StrContains(k.name(), "fp8 weight to column-major")) {
        ++copies;
        EXPECT_EQ(k.memory().vector_bytes(), 2 * u.fp8_params);
      }
    }
    EXPECT_EQ(copies, 1) << u.name;
  }
}

TEST(Float8, FsdpAllGatherNeedsFloat8AndFsdpsShardedParameters) {
  Scenario s = Llama7b("dgx_h100");
  s.mutable_kernels()->mutable_float8()->set_fsdp_all_gather(true);
  s.mutable_kernels()->mutable_float8()->set_enabled(false);
  const absl::Status v = ValidateScenario(s, "fp8.textproto");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("kernels.float8.fsdp_all_gather"),
            std::string::npos)
      << v;
  for (const char* strategy : {"zero3", "ddp"}) {
    Scenario t = Llama7b("dgx_h100");
    t.mutable_kernels()->mutable_float8()->set_fsdp_all_gather(true);
    t.clear_strategies();
    t.add_strategies(strategy);
    absl::StatusOr<Job> job = ResolveJob("fp8.textproto", t);
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<Results> r = SimulateJob(*job, EngineOptions());
    ASSERT_FALSE(r.ok()) << strategy;
    EXPECT_NE(r.status().message().find("kernels.float8.fsdp_all_gather"),
              std::string::npos)
        << r.status();
  }
}

}  // namespace
}  // namespace shardsim
