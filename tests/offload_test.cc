// ZeRO-Offload (Execution.offload_optimizer, sim/schedule/lower/offload.h):
// its update's time derived by hand, its memory, and what it refuses.
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/compute/kernel_time.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/scenario/scenario.h"
#include "sim/simulate/simulate.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

// Round numbers for the host side: 10 GB/s of PCIe per GPU, a node's CPUs
// updating 1e9 parameters a second for its 8 GPUs.
constexpr double kPcie = 10e9;
constexpr double kCpuAdam = 1e9;

Scenario Tiny(const std::string& strategy) {
  Scenario s = test::TinyStep(strategy, 8);
  absl::StatusOr<Platform> p = LoadPlatform("dgx_a100", "");
  EXPECT_TRUE(p.ok()) << p.status();
  p->mutable_host()->set_pcie_bytes_per_s(kPcie);
  p->mutable_host()->set_cpu_adam_params_per_s(kCpuAdam);
  s.clear_platform();
  *s.mutable_platform_def() = *p;
  return s;
}

absl::StatusOr<ResultRow> Step(const Scenario& s) {
  absl::StatusOr<Job> job = ResolveJob("offload.textproto", s);
  if (!job.ok()) return job.status();
  absl::StatusOr<Results> r = SimulateJob(*job, EngineOptions());
  if (!r.ok()) return r.status();
  return r->rows(0);
}

TEST(Offload, TheUpdateIsTheCopiesOutTheCpuStepAndTheCopyBack) {
  // ZeRO-1 on one node of 8: every layer's optimizer shard is 1/8 of it,
  // and its one gradient bucket (5e8 elements) holds the whole model, so
  // every layer is reduced by the same all-reduce. After it, in a row on
  // the path: each layer's shard cast to fp32 (6 bytes a parameter at the
  // vectorized HBM rate, one launch) and copied out (4 bytes a parameter
  // at 10 GB/s, one launch); Adam over the whole shard S on the CPU
  // (S x 8 GPUs / 1e9 a second); the bf16 shard copied back (2 S bytes,
  // one launch). Then the parameters are rebuilt as without offload.
  Scenario s = Tiny("zero1");
  s.mutable_execution()->set_offload_optimizer(true);
  // Without DeepSpeed's gradient norm, whose kernels and all-reduce
  // (tests/grad_norm_test.cc) would run beside the copies out.
  s.mutable_execution()->set_grad_norm(NO_GRAD_NORM);
  absl::StatusOr<ResultRow> row = Step(s);
  ASSERT_TRUE(row.ok()) << row.status();
  const Platform& p = s.platform_def();
  const double launch = p.kernels().launch_s();
  const double vector =
      p.gpu().hbm_bytes_per_s() * p.kernels().vector_fraction();
  double want = 0;
  int64_t shard = 0;
  for (const Layer& l : ModelLayers(s.model_def(), ScenarioBatch(s))) {
    const int64_t part = (l.params + 7) / 8;
    shard += part;
    want += 6.0 * part / vector + launch + 4.0 * part / kPcie + launch;
  }
  want += shard * 8 / kCpuAdam + 2.0 * shard / kPcie + launch;
  EXPECT_NEAR(row->breakdown().offload_s(), want, 1e-9 * want);
  EXPECT_EQ(row->breakdown().optimizer_s(), 0);  // no Adam on the GPU
  // The CPU's step is most of it.
  EXPECT_GT(row->breakdown().offload_s(), shard * 8 / kCpuAdam);
}

TEST(Offload, AJobOfOneGpuHasItsNodesCpusToItself) {
  // On one GPU the node's CPUs update its whole shard (every parameter) at
  // the node's rate; on 8 GPUs each rank has an eighth of the CPUs for an
  // eighth of the parameters: the CPU's step takes the same time.
  Scenario one = Tiny("zero1");
  one.set_gpus(0, 1);
  one.mutable_execution()->set_offload_optimizer(true);
  Scenario eight = one;
  eight.set_gpus(0, 8);
  absl::StatusOr<ResultRow> a = Step(one);
  absl::StatusOr<ResultRow> b = Step(eight);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  int64_t psi = 0;
  for (const Layer& l : ModelLayers(one.model_def(), ScenarioBatch(one))) {
    psi += l.params;
  }
  // Alone: on the path after backward at least the CPU's step over psi at
  // 1e9 a second and the copy back (2 bytes a parameter); at most those
  // and all the copies out (4 bytes a parameter, and their casts).
  EXPECT_GT(a->breakdown().offload_s(), psi / kCpuAdam + 2.0 * psi / kPcie);
  EXPECT_LT(a->breakdown().offload_s(),
            1.01 * (psi / kCpuAdam + 6.0 * psi / kPcie) + 1e-3);
  EXPECT_LT(b->breakdown().offload_s(), a->breakdown().offload_s());
}

TEST(Offload, WhereGradientsMoveEveryMicroBatchItIsRefused) {
  // ZeRO-3 moves each micro-batch's gradient partition to the host and
  // back; stage 2 accumulates them there through the GPU.
  Scenario stage3 = Tiny("zero3");
  stage3.mutable_execution()->set_offload_optimizer(true);
  absl::StatusOr<ResultRow> r = Step(stage3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stage 3"), std::string::npos)
      << r.status();
  Scenario stage2 = Tiny("zero2");
  stage2.mutable_execution()->set_offload_optimizer(true);
  stage2.set_micro_batches(2);
  r = Step(stage2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2 micro-batches"), std::string::npos)
      << r.status();
  // Stage 1 reduces once, at the last micro-batch: modelled.
  Scenario stage1 = Tiny("zero1");
  stage1.mutable_execution()->set_offload_optimizer(true);
  stage1.set_micro_batches(2);
  EXPECT_TRUE(Step(stage1).ok());
}

TEST(Offload, TheGpuKeepsNoOptimizerStates) {
  // K = 12 bytes a parameter of the OS shard leave the GPU.
  Scenario s = Tiny("zero2");
  absl::StatusOr<ResultRow> on_gpu = Step(s);
  s.mutable_execution()->set_offload_optimizer(true);
  absl::StatusOr<ResultRow> offloaded = Step(s);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  ASSERT_TRUE(offloaded.ok()) << offloaded.status();
  int64_t psi = 0;
  for (const Layer& l : ModelLayers(s.model_def(), ScenarioBatch(s))) {
    psi += l.params;
  }
  EXPECT_EQ(on_gpu->optimizer_bytes(), (12 * psi + 7) / 8);
  EXPECT_EQ(offloaded->optimizer_bytes(), 0);
  EXPECT_LT(offloaded->peak_memory_bytes(), on_gpu->peak_memory_bytes());
}

TEST(Offload, WhatItRefusesIsNamed) {
  // FSDP's CPU offload is another design: refused, not simulated as this.
  Scenario fsdp = Tiny("fsdp:FULL_SHARD");
  fsdp.mutable_execution()->set_offload_optimizer(true);
  absl::StatusOr<ResultRow> r = Step(fsdp);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("offload_optimizer"), std::string::npos)
      << r.status();
  // A platform that does not give its host side.
  Scenario bare = Tiny("zero1");
  bare.mutable_execution()->set_offload_optimizer(true);
  bare.mutable_platform_def()->mutable_host()->set_pcie_bytes_per_s(0);
  r = Step(bare);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("host.pcie_bytes_per_s"),
            std::string::npos)
      << r.status();
  // A DeepSpeed config at stage 0 builds no ZeRO optimizer: the scenario's
  // offload is refused as the config's own key is.
  const std::string config = absl::StrCat(test::TestTempDir(), "/stage0.json");
  std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 0}})";
  Scenario stage0 = Tiny(config);
  stage0.mutable_execution()->set_offload_optimizer(true);
  r = Step(stage0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stage 0"), std::string::npos)
      << r.status();
  bare = Tiny("zero1");
  bare.mutable_execution()->set_offload_optimizer(true);
  bare.mutable_platform_def()->mutable_host()->set_memory_bytes(0);
  r = Step(bare);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("host.memory_bytes"), std::string::npos)
      << r.status();
}

TEST(Offload, TheHostHoldsEachRanksStatesAndBuffers) {
  // Per rank, for its OS shard S: K = 12 bytes a parameter of optimizer
  // states (the fp32 master weights among them), 4 of fp32 gradients
  // copied out, 2 of the bf16 shard copied back; a node's 8 ranks
  // together. Without offload nothing is reported.
  Scenario s = Tiny("zero1");
  absl::StatusOr<ResultRow> plain = Step(s);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->has_host_memory_bytes());
  s.mutable_execution()->set_offload_optimizer(true);
  absl::StatusOr<ResultRow> row = Step(s);
  ASSERT_TRUE(row.ok()) << row.status();
  int64_t psi = 0;
  for (const Layer& l : ModelLayers(s.model_def(), ScenarioBatch(s))) {
    psi += l.params;
  }
  const int64_t node = 8 * ((12 * psi + 7) / 8 + (6 * psi + 7) / 8);
  EXPECT_EQ(row->host_memory_bytes(), node);
  EXPECT_FALSE(row->host_oom());
  EXPECT_FALSE(row->oom());
  // A node with one byte less is out of host memory: the row is OOM.
  s.mutable_platform_def()->mutable_host()->set_memory_bytes(node - 1);
  row = Step(s);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_TRUE(row->host_oom());
  EXPECT_TRUE(row->oom());
}

}  // namespace
}  // namespace shardsim
