// What the step runs before the update (sim/schedule/lower/update.h):
// DeepSpeed's overflow check (Execution.overflow_check) and the gradient
// norm (Execution.grad_norm). Their kernels' time derived by hand, their
// all-reduces, the framework defaults, and the framework files that set
// them.
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/base/layout.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/scenario/megatron_args.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/torchtitan_config.h"
#include "sim/schedule/lower.h"
#include "sim/simulate/simulate.h"
#include "sim/strategy/deepspeed_config.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

absl::StatusOr<ResultRow> Step(const Scenario& s) {
  absl::StatusOr<Job> job = ResolveJob("before_update.textproto", s);
  if (!job.ok()) return job.status();
  absl::StatusOr<Results> r = SimulateJob(*job, EngineOptions());
  if (!r.ok()) return r.status();
  return r->rows(0);
}

// The step of `with` and of the same with `off` applied to its execution
// (by default: without a gradient norm).
struct Steps {
  ResultRow with, without;
  double OptimizerAdded() const {
    return with.breakdown().optimizer_s() - without.breakdown().optimizer_s();
  }
};
void NoNorm(Execution* e) { e->set_grad_norm(NO_GRAD_NORM); }
void NoCheck(Execution* e) { e->set_overflow_check(false); }
Steps WithAndWithout(const Scenario& with, void (*off)(Execution*) = NoNorm) {
  Scenario without = with;
  off(without.mutable_execution());
  absl::StatusOr<ResultRow> a = Step(with);
  absl::StatusOr<ResultRow> b = Step(without);
  EXPECT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(b.ok()) << b.status();
  if (!a.ok() || !b.ok()) return {};
  return {*a, *b};
}

double Exposed(const ResultRow& row, const std::string& collective) {
  for (const ExposedCollective& c : row.breakdown().by_collective()) {
    if (c.collective() == collective) return c.seconds();
  }
  return -1;  // not on the path
}

// What the norm adds to the update's kernels on `gpus` GPUs sharding the
// optimizer states `os` ways: a pass over the gradient shard S moving
// `bytes` per element in `launches` kernels, and each layer's shard scaled
// in fp32 (read and written: 8 bytes) in one more kernel.
// With `scale` false, the pass alone (the overflow check).
double NormSeconds(const Scenario& s, int os, double bytes, int launches,
                   bool scale = true) {
  absl::StatusOr<Platform> p = LoadPlatform("dgx_a100", "");
  EXPECT_TRUE(p.ok());
  const double vector =
      p->gpu().hbm_bytes_per_s() * p->kernels().vector_fraction();
  const double launch = p->kernels().launch_s();
  double want = launches * launch;
  for (const Layer& l : ModelLayers(s.model_def(), ScenarioBatch(s))) {
    const int64_t part = (l.params + os - 1) / os;
    want += bytes * part / vector;
    if (scale) want += 8.0 * part / vector + launch;
  }
  return want;
}

TEST(GradNorm, DeepSpeedTakesEachTensorsNormInFp64EveryStep) {
  // ZeRO-1 on one node of 8. The tiny model's tensors: the embedding, per
  // block two norms' weights, q, k, v, o and the three MLP matrices (9),
  // the final norm and the head: 1 + 18 + 2 = 21. ZeRO-1 cuts one flat
  // buffer, so a GPU holds ceil(21 / 8) = 3 of them: 2 x 3 kernels (the
  // fp64 copy, its norm) moving 2 + 8 + 8 bytes per element.
  const Scenario s = test::TinyStep("zero1", 8);
  const Steps r = WithAndWithout(s);
  const double want = NormSeconds(s, 8, 18, 6);
  EXPECT_NEAR(r.OptimizerAdded(), want, 1e-9 * want);
  // One fp32 value all-reduced over the 8 GPUs, on the path before the
  // update; none without the norm.
  EXPECT_GT(Exposed(r.with, "AR grad norm"), 0);
  EXPECT_EQ(Exposed(r.without, "AR grad norm"), -1);
  EXPECT_GT(r.with.step_time_s(), r.without.step_time_s() + want);
}

TEST(GradNorm, ZeroThreeHoldsAPieceOfEveryTensor) {
  // ZeRO-3 cuts each of the 21 tensors across the 8 GPUs: 2 x 21 kernels.
  // The tiny step is bound by the host's issuing (ZeRO-3's fetches, 36 us
  // a kernel launch): without host costs its GPU work is the path.
  Scenario s = test::TinyStep("zero3", 8);
  absl::StatusOr<Platform> p = LoadPlatform("dgx_a100", "");
  ASSERT_TRUE(p.ok()) << p.status();
  p->mutable_kernels()->set_host_launch_s(0);
  *s.mutable_platform_def() = *p;
  s.clear_platform();
  s.mutable_execution()->set_fetch_overhead_s(0);
  s.mutable_execution()->set_launch_overhead_s(0);
  const double want = NormSeconds(s, 8, 18, 42);
  EXPECT_NEAR(WithAndWithout(s).OptimizerAdded(), want, 1e-9 * want);
}

TEST(GradNorm, PyTorchTakesItOnlyWhenTheLoopClips) {
  // FSDP runs nothing before the update by default; clip_grad_norm_ in the
  // loop (FOREACH_NORM) reads the fp32 gradient shard once (4 bytes) in a
  // grouped kernel per layer (4: the embedding, 2 blocks, the head).
  Scenario s = test::TinyStep("fsdp:FULL_SHARD", 8);
  absl::StatusOr<ResultRow> plain = Step(s);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(Exposed(*plain, "AR grad norm"), -1);
  s.mutable_execution()->set_grad_norm(FOREACH_NORM);
  const Steps r = WithAndWithout(s);
  EXPECT_EQ(r.without.step_time_s(), plain->step_time_s());
  const double want = NormSeconds(s, 8, 4, 4);
  EXPECT_NEAR(r.OptimizerAdded(), want, 1e-9 * want);
  EXPECT_GT(Exposed(r.with, "AR grad norm"), 0);
}

TEST(GradNorm, OneGpuHasNothingToAllReduce) {
  absl::StatusOr<ResultRow> a = Step(test::TinyStep("zero1", 1));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Exposed(*a, "AR grad norm"), -1);
  EXPECT_GT(a->breakdown().optimizer_s(), 0);
}

TEST(GradNormAndOverflowCheck, NeverMakeAStepShorter) {
  for (const char* strategy :
       {"ddp", "zero1", "zero2", "zero3", "fsdp:FULL_SHARD",
        "fsdp:HYBRID_SHARD", "mics", "zeropp"}) {
    for (int gpus : {8, 16}) {
      Scenario s = test::TinyStep(strategy, gpus);
      s.mutable_execution()->set_grad_norm(PER_TENSOR_FP64_NORM);
      s.mutable_execution()->set_overflow_check(true);
      const Steps norm = WithAndWithout(s);
      EXPECT_GT(norm.with.step_time_s(), norm.without.step_time_s())
          << strategy << gpus;
      const Steps check = WithAndWithout(s, NoCheck);
      EXPECT_GT(check.with.step_time_s(), check.without.step_time_s())
          << strategy << gpus;
    }
  }
}

TEST(OverflowCheck, DeepSpeedStagesOneAndTwoCheckEachTensorInBf16) {
  // ZeRO-1 on 8 GPUs holds 3 of the tiny model's 21 tensors (above): 7
  // kernels each (x.float(), isnan, isinf, logical_or, .float(), max, the
  // count's +=) moving 2+4 + 4+1 + 4+1 + 2+1 + 1+4 + 4 = 28 bytes an
  // element of the shard; then one byte all-reduced over the 8 GPUs.
  for (const char* strategy : {"zero1", "zero2"}) {
    const Scenario s = test::TinyStep(strategy, 8);
    const Steps r = WithAndWithout(s, NoCheck);
    const double want = NormSeconds(s, 8, 28, 21, /*scale=*/false);
    EXPECT_NEAR(r.OptimizerAdded(), want, 1e-9 * want) << strategy;
    EXPECT_GT(Exposed(r.with, "AR overflow"), 0) << strategy;
    EXPECT_EQ(Exposed(r.without, "AR overflow"), -1) << strategy;
    EXPECT_GT(r.with.step_time_s(), r.without.step_time_s() + want);
  }
}

TEST(OverflowCheck, StageThreeAndPyTorchDoNotCheckInBf16) {
  for (const char* strategy : {"zero3", "fsdp:FULL_SHARD", "ddp"}) {
    const Scenario s = test::TinyStep(strategy, 8);
    absl::StatusOr<ResultRow> row = Step(s);
    ASSERT_TRUE(row.ok()) << row.status();
    EXPECT_EQ(Exposed(*row, "AR overflow"), -1) << strategy;
  }
}

TEST(OverflowCheck, WithOffloadTheHostHasTheFlagAndOnlyTheAllReduceRuns) {
  // local_overflow is set while the gradients are copied to the host: no
  // pass on the GPU. The all-reduce runs beside the copies, which the
  // host's step waits for anyway.
  Scenario s = test::TinyStep("zero1", 8);
  s.mutable_execution()->set_offload_optimizer(true);
  const Steps r = WithAndWithout(s, NoCheck);
  EXPECT_EQ(r.OptimizerAdded(), 0);
  EXPECT_GE(r.with.step_time_s(), r.without.step_time_s());
}

TEST(OverflowCheck, DeepSpeedConfigTurnsItOffOrReportsStageThreeFp16) {
  auto read = [](const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(test::TestTempDir(), "/", name);
    std::ofstream(path) << text;
    return ReadDeepSpeedConfig(path, "");
  };
  absl::StatusOr<DeepSpeedZero> off =
      read("off.json",
           R"({"bf16": {"enabled": true, "check_grad_overflow": false},
          "zero_optimization": {"stage": 2}})");
  ASSERT_TRUE(off.ok()) << off.status();
  ASSERT_TRUE(off->execution.has_overflow_check());
  EXPECT_FALSE(off->execution.overflow_check());
  EXPECT_TRUE(off->unmodelled.empty());
  absl::StatusOr<DeepSpeedZero> bad =
      read("bad.json", R"({"bf16": {"enabled": true, "check_grad_overflow": 0},
                      "zero_optimization": {"stage": 1}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bf16.check_grad_overflow"),
            std::string::npos)
      << bad.status();
  absl::StatusOr<DeepSpeedZero> fp16 =
      read("fp16.json", R"({"fp16": {"enabled": true},
                            "zero_optimization": {"stage": 3}})");
  ASSERT_TRUE(fp16.ok()) << fp16.status();
  ASSERT_EQ(fp16->unmodelled.size(), 1u);
  EXPECT_NE(fp16->unmodelled[0].find("overflow check"), std::string::npos);
}

TEST(GradNormAndOverflowCheck, AllReducedOverTheTensorParallelGroupToo) {
  // ZeRO-1 on 2 nodes of 8 as tp 2 x dp 8: each tensor-parallel rank holds
  // half of every matrix, so the flag and the norm are all-reduced over the
  // 8 data-parallel ranks (the shard's group), then over the tp pair.
  const Mesh mesh{8, 2};
  Scenario sc = test::Training(2);
  sc.mutable_parallelism()->set_tp(2);
  absl::StatusOr<Layout> layout = Layout::Make(mesh, sc.parallelism());
  ASSERT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<Strategy> st = ParseStrategy("zero1", layout->DpMesh());
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_TRUE(ResolveExecution(sc.execution(), 4096, &*st).ok());
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<OwnedSchedule> s =
      LowerStep(ModelLayers(*model, ScenarioBatch(sc)), *st, mesh, sc);
  ASSERT_TRUE(s.ok()) << s.status();
  std::map<std::string, int> calls;  // "tensor dimension (size)"
  for (const Op& op : (*s)->ops()) {
    if (op.body_case() != Op::kCollective || op.phase() != UPDATE) continue;
    const CollectiveCall& c = op.collective();
    if (c.op() != ALL_REDUCE || c.tensor() == "G") continue;  // buckets
    ++calls[absl::StrCat(c.tensor(), " ", c.dimension(), " (",
                         GroupSize(c.group()), ")")];
  }
  EXPECT_EQ(calls, (std::map<std::string, int>{{"grad norm  (8)", 1},
                                               {"grad norm tp (2)", 1},
                                               {"overflow  (8)", 1},
                                               {"overflow tp (2)", 1}}));
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(test::TestTempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(GradNorm, MegatronClipsUnlessClipGradIsZero) {
  // --clip-grad defaults to 1.0: the norm every step; 0 turns it off.
  const std::string head = "--bf16 --micro-batch-size 1 ";
  absl::StatusOr<FrameworkInput> on =
      ReadMegatronArgs(Write("on.args", head), "");
  absl::StatusOr<FrameworkInput> off =
      ReadMegatronArgs(Write("off.args", head + "--clip-grad 0"), "");
  absl::StatusOr<FrameworkInput> half =
      ReadMegatronArgs(Write("half.args", head + "--clip-grad 0.5"), "");
  ASSERT_TRUE(on.ok()) << on.status();
  ASSERT_TRUE(off.ok()) << off.status();
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(on->scenario.execution().grad_norm(), FOREACH_NORM);
  EXPECT_EQ(off->scenario.execution().grad_norm(), NO_GRAD_NORM);
  EXPECT_EQ(half->scenario.execution().grad_norm(), FOREACH_NORM);
  absl::StatusOr<FrameworkInput> bad =
      ReadMegatronArgs(Write("bad.args", head + "--clip-grad -1"), "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--clip-grad"), std::string::npos)
      << bad.status();
}

TEST(GradNorm, TorchtitanTakesItEveryStep) {
  absl::StatusOr<FrameworkInput> in =
      ReadTorchtitanConfig("torchtitan_llama3_8b.toml",
                           absl::StrCat(SHARDSIM_SOURCE_DIR, "/tests/data"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->scenario.execution().grad_norm(), FOREACH_NORM);
}

}  // namespace
}  // namespace shardsim
