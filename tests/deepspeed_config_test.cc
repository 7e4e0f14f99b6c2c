// DeepSpeed configs: every key understood or reported (deepspeed_keys.h),
// strict JSON, and the batch keys held against the scenario
// (deepspeed_check.h).
#include "sim/strategy/deepspeed_config.h"

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/base/did_you_mean.h"
#include "sim/scenario/deepspeed_check.h"
#include "sim/scenario/scenario.h"
#include "sim/strategy/deepspeed_keys.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

using ::testing::HasSubstr;

// Writes `text` to a file of its own under the test's temporary folder.
std::string Config(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(test::TestTempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

std::string ErrorOf(const std::string& path) {
  absl::StatusOr<DeepSpeedZero> c = ReadDeepSpeedConfig(path, "");
  EXPECT_FALSE(c.ok()) << path << " was accepted";
  return c.ok() ? "" : std::string(c.status().message());
}

constexpr char kBf16[] = R"("bf16": {"enabled": true}, )";

TEST(DeepSpeedKeys, EveryPathOnceAndEverySectionBeforeItsKeys) {
  std::set<std::string> seen, sections;
  for (const DeepSpeedKey& k : DeepSpeedKeys()) {
    EXPECT_TRUE(seen.insert(std::string(k.path)).second) << k.path;
    const size_t dot = k.path.rfind('.');
    if (dot != absl::string_view::npos) {
      EXPECT_TRUE(sections.count(std::string(k.path.substr(0, dot))))
          << k.path << " before its section";
    }
    if (k.kind == DeepSpeedKeyKind::kSection) {
      sections.insert(std::string(k.path));
    }
    if (k.kind == DeepSpeedKeyKind::kUnmodelled) {
      EXPECT_FALSE(k.default_json.empty()) << k.path;
      EXPECT_FALSE(k.what.empty()) << k.path;
    }
  }
}

TEST(DeepSpeedConfig, AnUnknownKeyIsAnErrorWithTheNearestKnownOne) {
  const std::string path =
      Config("typo.json", absl::StrCat("{", kBf16,
                                       R"("zero_optimization": {"stage": 3,
                                   "stage3_prefetch_bucket_sise": 1000}})"));
  const std::string error = ErrorOf(path);
  EXPECT_THAT(error, HasSubstr(absl::StrCat("DeepSpeed config ", path)));
  EXPECT_THAT(error, HasSubstr("unknown key zero_optimization.stage3_prefetch_"
                               "bucket_sise"));
  EXPECT_THAT(error,
              HasSubstr("(did you mean \"stage3_prefetch_bucket_size\"?)"));
}

TEST(DeepSpeedConfig, AKeyInTheWrongSectionNamesWhereItBelongs) {
  const std::string error = ErrorOf(Config(
      "misplaced.json", R"({"stage": 3, "zero_optimization": {"stage": 3}})"));
  EXPECT_THAT(error, HasSubstr("unknown key stage"));
  EXPECT_THAT(error, HasSubstr("did you mean \"zero_optimization.stage\""));
}

TEST(DeepSpeedConfig, InvalidJsonGivesLineAndColumn) {
  // A trailing comma on line 2: Python's json.load (DeepSpeed's reader)
  // refuses it too.
  const std::string error = ErrorOf(
      Config("comma.json", "{\n  \"zero_optimization\": {\"stage\": 3,}\n}\n"));
  EXPECT_THAT(error, HasSubstr("not valid JSON"));
  EXPECT_THAT(error, HasSubstr("line 2, column"));
}

TEST(DeepSpeedConfig, ANumberBeyondDoubleIsAnErrorNotACrash) {
  // nlohmann throws out_of_range, not parse_error, for it (found by
  // tests/fuzz).
  EXPECT_THAT(ErrorOf(Config("huge.json",
                             R"({"zero_optimization": {"stage": 1e999}})")),
              HasSubstr("not valid JSON"));
}

TEST(DeepSpeedConfig, AKeyGivenTwiceIsAnError) {
  const std::string error = ErrorOf(Config(
      "twice.json", R"({"zero_optimization": {"stage": 3, "stage": 1}})"));
  EXPECT_THAT(error, HasSubstr("key \"stage\" is given twice"));
}

TEST(DeepSpeedConfig, AKeyAndItsAliasAreOneKey) {
  const std::string error = ErrorOf(
      Config("alias.json",
             R"({"zero_optimization": {"stage": 3, "prefetch_bucket_size": 1,
          "stage3_prefetch_bucket_size": 2}})"));
  EXPECT_THAT(error, HasSubstr("are one key"));
  // Either spelling sets the same knob.
  absl::StatusOr<DeepSpeedZero> c = ReadDeepSpeedConfig(
      Config("alias_ok.json", absl::StrCat("{", kBf16,
                                           R"("zero_optimization": {"stage": 3,
                             "prefetch_bucket_size": 5e7}})")),
      "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->execution.prefetch_bucket_elements(), 50000000);
}

TEST(DeepSpeedConfig, OptimizerOffloadToCpuIsZeroOffloadAndNvmeIsRefused) {
  auto read = [](const std::string& name, const std::string& device,
                 int stage) {
    return ReadDeepSpeedConfig(
        Config(name, absl::StrCat("{", kBf16, R"("zero_optimization": {)",
                                  "\"stage\": ", stage,
                                  R"(, "offload_optimizer": {"device": )",
                                  device, R"(, "pin_memory": true}}})")),
        "");
  };
  absl::StatusOr<DeepSpeedZero> cpu = read("cpu.json", "\"cpu\"", 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(cpu->unmodelled.empty());
  EXPECT_TRUE(cpu->execution.offload_optimizer());
  absl::StatusOr<DeepSpeedZero> none = read("none.json", "\"none\"", 3);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->execution.offload_optimizer());
  EXPECT_THAT(ErrorOf(Config("nvme.json",
                             absl::StrCat("{", kBf16,
                                          R"("zero_optimization": {"stage": 3,
                             "offload_optimizer": {"device": "nvme"}}})"))),
              HasSubstr("offload_optimizer.device \"nvme\""));
  EXPECT_THAT(ErrorOf(Config("disk.json",
                             absl::StrCat("{", kBf16,
                                          R"("zero_optimization": {"stage": 3,
                             "offload_optimizer": {"device": "disk"}}})"))),
              HasSubstr("must be \"none\", \"cpu\" or \"nvme\""));
}

TEST(DeepSpeedConfig, ParameterOffloadIsReportedUnlessItsDeviceIsNone) {
  absl::StatusOr<DeepSpeedZero> cpu = ReadDeepSpeedConfig(
      Config("param_cpu.json",
             absl::StrCat("{", kBf16, R"("zero_optimization": {"stage": 3,
                             "offload_param": {"device": "cpu"}}})")),
      "");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(cpu->unmodelled.size(), 1u);
  EXPECT_THAT(cpu->unmodelled[0],
              HasSubstr("zero_optimization.offload_param.device = \"cpu\""));
}

TEST(DeepSpeedConfig, Fp32TrainingAndOtherOptimizersAreReported) {
  absl::StatusOr<DeepSpeedZero> c =
      ReadDeepSpeedConfig(Config("fp32.json", R"({"optimizer": {"type": "SGD",
                                             "params": {"lr": 0.1}},
                              "zero_optimization": {"stage": 2}})"),
                          "");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->unmodelled.size(), 2u);
  EXPECT_THAT(c->unmodelled[0], HasSubstr("DeepSpeed trains in fp32"));
  EXPECT_THAT(c->unmodelled[1], HasSubstr("optimizer.type = \"SGD\""));
}

TEST(DeepSpeedConfig, KeysThatCostNothingAndDefaultsPass) {
  absl::StatusOr<DeepSpeedZero> c =
      ReadDeepSpeedConfig(Config("quiet.json",
                                 R"({"fp16": {"enabled": true, "loss_scale": 0},
                 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
                 "scheduler": {"type": "WarmupLR"},
                 "steps_per_print": 10, "wall_clock_breakdown": false,
                 "gradient_clipping": 1.0,
                 "flops_profiler": {"enabled": true},
                 "activation_checkpointing": {"cpu_checkpointing": false},
                 "zero_optimization": {"stage": 2,
                                       "allgather_bucket_size": 5e8,
                                       "contiguous_gradients": true}})"),
                          "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->unmodelled.empty());
}

// A job on 16 GPUs of 2 sequences a micro-batch, 4 micro-batches a step:
// DeepSpeed's train_batch_size is 2 x 4 x 16 = 128.
absl::StatusOr<Job> JobWith(const std::string& config, bool allow = false) {
  Scenario s;
  s.set_model("llama-7b");
  s.set_platform("dgx_a100");
  s.add_strategies(config);
  s.add_gpus(16);
  s.set_micro_batch_size(2);
  s.set_micro_batches(4);
  s.set_seq_len(2048);
  s.set_optimizer_bytes_per_param(12);
  s.set_allow_unmodelled(allow);
  return ResolveJob(absl::StrCat(test::TestTempDir(), "/job.textproto"), s);
}

std::string JobError(const std::string& config) {
  absl::StatusOr<Job> job = JobWith(config);
  EXPECT_FALSE(job.ok()) << config << " was accepted";
  return job.ok() ? "" : std::string(job.status().message());
}

TEST(DeepSpeedCheck, BatchKeysThatDisagreeNameBothValues) {
  EXPECT_THAT(
      JobError(Config("mbs.json",
                      absl::StrCat("{", kBf16,
                                   R"("train_micro_batch_size_per_gpu": 4,
                                      "zero_optimization": {"stage": 3}})"))),
      HasSubstr("train_micro_batch_size_per_gpu is 4 but the scenario's "
                "micro_batch_size is 2 at 16 GPUs"));
  EXPECT_THAT(JobError(Config("gas.json",
                              absl::StrCat("{", kBf16,
                                           R"("gradient_accumulation_steps": 8,
                                      "zero_optimization": {"stage": 3}})"))),
              HasSubstr("gradient_accumulation_steps is 8 but the scenario's "
                        "micro-batches per step (micro_batches) is 4"));
  EXPECT_THAT(
      JobError(Config("tbs.json", absl::StrCat("{", kBf16,
                                               R"("train_batch_size": 64,
                                      "zero_optimization": {"stage": 3}})"))),
      HasSubstr("train_batch_size is 64 but the scenario's batch "
                "(micro_batch_size x micro-batches x GPUs) is 128"));
  // Agreeing keys, and the HF Trainer's "auto", pass.
  absl::StatusOr<Job> job =
      JobWith(Config("agree.json", absl::StrCat("{", kBf16,
                                                R"("train_batch_size": 128,
                      "train_micro_batch_size_per_gpu": 2,
                      "gradient_accumulation_steps": "auto",
                      "zero_optimization": {"stage": 3}})")));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->warnings.empty());
}

TEST(DeepSpeedCheck, UnmodelledKeysAreErrorsOrWithLeaveWarnings) {
  const std::string config =
      Config("offload.json", absl::StrCat("{", kBf16,
                                          R"("zero_optimization": {"stage": 3,
                      "offload_param": {"device": "cpu"}}})"));
  const std::string error = JobError(config);
  EXPECT_THAT(error, HasSubstr("not modelled: "
                               "zero_optimization.offload_param.device"));
  EXPECT_THAT(error, HasSubstr("--allow-unmodelled"));
  absl::StatusOr<Job> job = JobWith(config, /*allow=*/true);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->warnings.size(), 1u);
  EXPECT_THAT(job->warnings[0],
              HasSubstr(absl::StrCat("DeepSpeed config ", config,
                                     ": not modelled: zero_optimization."
                                     "offload_param.device = \"cpu\"")));
}

TEST(DidYouMean, NearNamesOnly) {
  const std::vector<std::string> known = {"ddp", "zero1", "zero2", "zero3",
                                          "fsdp"};
  EXPECT_EQ(ClosestName("zero-3", known), "zero3");
  EXPECT_EQ(ClosestName("FSPD", known), "fsdp");  // a swap, any case
  EXPECT_EQ(ClosestName("megatron", known), std::nullopt);
  EXPECT_EQ(DidYouMean("dpp", known), " (did you mean \"ddp\"?)");
  EXPECT_EQ(DidYouMean("pipeline", known), "");
  EXPECT_EQ(DidYouMean("zero", known),
            " (did you mean \"zero1\", \"zero2\" or \"zero3\"?)");
}

}  // namespace
}  // namespace shardsim
