// FP8 training (scenario kernels.float8): which GPUs may run it, and what
// it changes in a simulated step.
#include <string>

#include "gtest/gtest.h"
#include "sim/scenario/scenario.h"
#include "sim/simulate/simulate.h"

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

}  // namespace
}  // namespace shardsim
