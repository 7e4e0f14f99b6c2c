// torchtitan TOML configs: the scenario fields a config sets, derived by
// hand from torchtitan's job_config.py, llama3's flavors and its pipeline
// split (sim/scenario/torchtitan_config.h), and every key understood or
// reported.
#include "sim/scenario/torchtitan_config.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const std::string kData = absl::StrCat(SHARDSIM_SOURCE_DIR, "/tests/data");

// The model and batch every small config below starts from.
constexpr char kBase[] = R"([model]
name = "llama3"
flavor = "debugmodel"
[training]
local_batch_size = 8
seq_len = 128
)";

std::string Write(const std::string& text) {
  const std::string path = absl::StrCat(test::TestTempDir(), "/t.toml");
  std::ofstream(path) << text;
  return path;
}

absl::StatusOr<FrameworkInput> Read(const std::string& text) {
  return ReadTorchtitanConfig(Write(text), "");
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<FrameworkInput> in = Read(text);
  EXPECT_FALSE(in.ok()) << text;
  return in.ok() ? "" : std::string(in.status().message());
}

TEST(TorchtitanConfig, Llama3EightBMapsOntoTheScenario) {
  absl::StatusOr<FrameworkInput> in =
      ReadTorchtitanConfig("torchtitan_llama3_8b.toml", kData);
  ASSERT_TRUE(in.ok()) << in.status();
  const Scenario& s = in->scenario;
  EXPECT_EQ(s.parallelism().tp(), 2);
  EXPECT_TRUE(s.parallelism().sequence_parallel());
  EXPECT_EQ(s.parallelism().pp(), 2);
  EXPECT_EQ(s.parallelism().vpp(), 2);  // a multi-stage schedule's default
  EXPECT_EQ(s.parallelism().pipeline_schedule(), INTERLEAVED_1F1B);
  EXPECT_EQ(s.parallelism().cp(), 2);
  EXPECT_THAT(s.strategies(), ElementsAre("fsdp:HYBRID_SHARD"));
  EXPECT_EQ(s.micro_batch_size(), 2);  // pipeline_parallel_microbatch_size
  EXPECT_EQ(s.seq_len(), 8192);
  EXPECT_EQ(s.global_batch_tokens(), 256 * 8192);
  EXPECT_EQ(s.recompute_granularity(), RECOMPUTE_SELECTIVE);
  EXPECT_TRUE(s.flash_attention());
  EXPECT_EQ(s.optimizer_bytes_per_param(), 12);
  const Model& m = s.model_def();
  EXPECT_EQ(m.layers(), 32);
  EXPECT_EQ(m.hidden(), 4096);
  EXPECT_EQ(m.heads(), 32);
  EXPECT_EQ(m.kv_heads(), 8);
  // 2 x 4 x 4096 / 3 = 10922; x 1.3 = 14198; up to a multiple of 1024.
  EXPECT_EQ(m.ffn_hidden(), 14336);
  EXPECT_EQ(m.vocab(), 128256);
  EXPECT_EQ(m.mlp(), Model::SWIGLU);
  EXPECT_EQ(m.norm(), Model::RMSNORM);
  EXPECT_FALSE(m.tied_embeddings());
  // 32 layers + embedding + output = 34 over 4 virtual stages: 9, 9, 8, 8
  // less one each at the ends: 8, 9, 8, 7.
  EXPECT_THAT(
      in->unmodelled,
      ElementsAre(HasSubstr("uneven virtual stages 8,9,8,7"),
                  HasSubstr("training.mixed_precision_reduce (default): "
                            "reduces gradients in fp32")));
}

TEST(TorchtitanConfig, UnevenStagesOfASingleStageScheduleAreStageLayers) {
  absl::StatusOr<FrameworkInput> in = Read(
      absl::StrCat(kBase, "[parallelism]\npipeline_parallel_degree = 4\n"));
  ASSERT_TRUE(in.ok()) << in.status();
  // 6 layers + 2 = 8 over 4 stages: 2 each, one less at the ends.
  EXPECT_THAT(in->scenario.parallelism().stage_layers(),
              ElementsAre(1, 2, 2, 1));
  EXPECT_EQ(in->scenario.parallelism().pipeline_schedule(), ONE_F_ONE_B);
  EXPECT_EQ(in->scenario.micro_batch_size(), 1);
  EXPECT_EQ(in->scenario.micro_batches(), 8);  // local 8 / micro-batch 1
  // torchtitan's default checkpointing: selective, every 2nd block.
  EXPECT_EQ(in->scenario.recompute_granularity(), RECOMPUTE_SELECTIVE_LAYER);
  EXPECT_EQ(in->scenario.recompute_every_layers(), 2);
  EXPECT_THAT(in->scenario.strategies(), ElementsAre("fsdp:FULL_SHARD"));
}

TEST(TorchtitanConfig, DataParallelDegreesPickTheStrategy) {
  struct Case {
    const char* parallelism;
    const char* strategy;
  } const cases[] = {
      {"data_parallel_shard_degree = 1\ndata_parallel_replicate_degree = 8",
       "ddp"},
      {"data_parallel_shard_degree = 8", "fsdp:FULL_SHARD"},
      {"fsdp_reshard_after_forward = \"never\"", "fsdp:SHARD_GRAD_OP"},
      {"data_parallel_replicate_degree = 2", "fsdp:HYBRID_SHARD"},
      {"data_parallel_replicate_degree = 2\n"
       "fsdp_reshard_after_forward = \"never\"",
       "fsdp:_HYBRID_SHARD_ZERO2"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<FrameworkInput> in =
        Read(absl::StrCat(kBase, "[parallelism]\n", c.parallelism, "\n"));
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_THAT(in->scenario.strategies(), ElementsAre(c.strategy))
        << c.parallelism;
    // Without pipelining a step's batch is one micro-batch.
    EXPECT_EQ(in->scenario.micro_batch_size(), 8);
    EXPECT_EQ(in->scenario.micro_batches(), 1);
  }
}

// With a pipeline, FSDP2's default (and "never") keeps the parameters
// gathered after forward (apply_fsdp: reshard_after_forward = not
// pp_enabled) and the pipeline stage skips the reshard and the gradient
// sync after every backward but the last: gathered once a step, reduced
// once. "always" reshards after each forward only: reported.
TEST(TorchtitanConfig, UnderAPipelineFsdpGathersAndReducesOnceAStep) {
  for (const char* policy : {"", "fsdp_reshard_after_forward = \"never\"\n"}) {
    absl::StatusOr<FrameworkInput> in = Read(absl::StrCat(
        kBase, "[parallelism]\npipeline_parallel_degree = 4\n", policy));
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_THAT(in->scenario.strategies(), ElementsAre("fsdp:FULL_SHARD"));
    EXPECT_TRUE(in->scenario.execution().hold_params_through_step()) << policy;
    EXPECT_FALSE(in->scenario.execution().reduce_every_micro_batch());
    EXPECT_THAT(in->unmodelled,
                Not(Contains(HasSubstr("fsdp_reshard_after_forward"))));
  }
  absl::StatusOr<FrameworkInput> always =
      Read(absl::StrCat(kBase,
                        "[parallelism]\npipeline_parallel_degree = 4\n"
                        "fsdp_reshard_after_forward = \"always\"\n"));
  ASSERT_TRUE(always.ok()) << always.status();
  EXPECT_FALSE(always->scenario.execution().hold_params_through_step());
  EXPECT_THAT(always->unmodelled,
              Contains(HasSubstr("always, with a pipeline")));
  // Without a pipeline nothing is held.
  absl::StatusOr<FrameworkInput> flat = Read(kBase);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_FALSE(flat->scenario.execution().has_hold_params_through_step());
}

TEST(TorchtitanConfig, ActivationCheckpointModes) {
  struct Case {
    const char* section;
    RecomputeGranularity want;
    int every;
  } const cases[] = {
      {"mode = \"none\"", RECOMPUTE_NONE, 0},
      {"mode = \"full\"", RECOMPUTE_FULL, 0},
      {"mode = \"selective\"\nselective_ac_option = \"op\"",
       RECOMPUTE_SELECTIVE, 0},
      {"mode = \"selective\"\nselective_ac_option = \"3\"",
       RECOMPUTE_SELECTIVE_LAYER, 3},
      {"mode = \"selective\"\nselective_ac_option = \"1\"", RECOMPUTE_FULL, 0},
  };
  for (const Case& c : cases) {
    absl::StatusOr<FrameworkInput> in =
        Read(absl::StrCat(kBase, "[activation_checkpoint]\n", c.section, "\n"));
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_EQ(in->scenario.recompute_granularity(), c.want) << c.section;
    EXPECT_EQ(in->scenario.recompute_every_layers(), c.every) << c.section;
  }
  EXPECT_THAT(ErrorOf(absl::StrCat(kBase,
                                   "[activation_checkpoint]\n"
                                   "selective_ac_option = \"some\"\n")),
              HasSubstr("t.toml:8: activation_checkpoint.selective_ac_option "
                        "is \"op\" or a positive integer"));
}

TEST(TorchtitanConfig, UnknownKeyNamesFileLineAndSuggestion) {
  const std::string e = ErrorOf(
      absl::StrCat(kBase, "[parallelism]\ntensor_paralel_degree = 2\n"));
  EXPECT_THAT(e, HasSubstr("torchtitan config "));
  EXPECT_THAT(e, HasSubstr("t.toml:8: unknown key "
                           "parallelism.tensor_paralel_degree: not in "
                           "torchtitan's JobConfig (did you mean "
                           "\"tensor_parallel_degree\"?)"));
  // A key of another section.
  EXPECT_THAT(ErrorOf(absl::StrCat(kBase, "seq_len_x = 1\nlog_freq = 1\n")),
              HasSubstr("unknown key training.seq_len_x"));
  EXPECT_THAT(ErrorOf(absl::StrCat(kBase, "log_freq = 1\n")),
              HasSubstr("(did you mean \"metrics.log_freq\"?)"));
}

TEST(TorchtitanConfig, MalformedTomlGivesFileLineAndColumn) {
  const std::string e = ErrorOf("[model]\nname = \"llama3\nflavor = 1\n");
  EXPECT_THAT(e, HasSubstr("t.toml:2:"));
  EXPECT_THAT(e, HasSubstr("not valid TOML"));
  EXPECT_THAT(ErrorOf("[training]\nseq_len = 1\nseq_len = 2\n"),
              HasSubstr("t.toml:3:"));
  EXPECT_THAT(ErrorOf(absl::StrCat(kBase,
                                   "[parallelism]\n"
                                   "tensor_parallel_degree = \"2\"\n")),
              HasSubstr(":8: parallelism.tensor_parallel_degree must be an "
                        "integer, got \"2\""));
}

TEST(TorchtitanConfig, UnknownModelFlavorIsAnError) {
  EXPECT_THAT(ErrorOf("[model]\nname = \"llama3\"\nflavor = \"8b\"\n"),
              HasSubstr(":3: model llama3 flavor 8b: shardsim knows "
                        "torchtitan's llama3 flavors debugmodel, 8B, 70B, "
                        "405B (did you mean \"8B\"?)"));
}

TEST(TorchtitanConfig, UnmodelledKeysAreListedUnlessAtTheirDefault) {
  absl::StatusOr<FrameworkInput> in =
      Read(absl::StrCat(kBase,
                        "[compile]\nenable = true\n[parallelism]\n"
                        "enable_async_tensor_parallel = false\n"
                        "pipeline_parallel_degree = 2\n"
                        "pipeline_parallel_schedule = \"ZBVZeroBubble\"\n"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(in->unmodelled,
              ElementsAre(HasSubstr("compile.enable = true: compiles"),
                          HasSubstr("pipeline_parallel_schedule = "
                                    "\"ZBVZeroBubble\": another pipeline"),
                          HasSubstr("mixed_precision_reduce")));
}

// kBase with `converters` (TOML text) in its [model] table.
std::string WithConverters(const std::string& converters) {
  return absl::StrCat(
      "[model]\nconverters = ", converters, "\n",
      std::string(kBase).substr(std::string("[model]\n").size()));
}

TEST(TorchtitanConfig, TheFloat8ConverterIsKernelsFloat8) {
  // Tensorwise scaling, compiled, parameters gathered in bf16 or, with
  // precomputed scales, in float8: what kernels.float8 simulates; nothing
  // float8-specific is unmodelled.
  absl::StatusOr<FrameworkInput> in = Read(
      absl::StrCat(WithConverters("[\"quantize.linear.float8\"]"),
                   "[compile]\nenable = true\n"
                   "[quantize.linear.float8]\nfilter_fqns = [\"output\"]\n"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_TRUE(in->scenario.kernels().float8().enabled());
  EXPECT_FALSE(in->scenario.kernels().float8().fsdp_all_gather());
  EXPECT_THAT(in->unmodelled,
              ElementsAre(HasSubstr("compile.enable = true: compiles"),
                          HasSubstr("mixed_precision_reduce")));
  in = Read(absl::StrCat(WithConverters("[\"quantize.linear.float8\"]"),
                         "[compile]\nenable = true\n"
                         "[quantize.linear.float8]\n"
                         "enable_fsdp_float8_all_gather = true\n"
                         "precompute_float8_dynamic_scale_for_fsdp = true\n"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_TRUE(in->scenario.kernels().float8().fsdp_all_gather());
  EXPECT_THAT(in->unmodelled,
              ElementsAre(HasSubstr("compile.enable = true: compiles"),
                          HasSubstr("mixed_precision_reduce")));
  // Away from it: rowwise scales, scales taken at every float8 all-gather,
  // eager casts, another converter.
  in = Read(absl::StrCat(WithConverters("[\"float8\", \"quantize.linear.mx\"]"),
                         "[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n"
                         "enable_fsdp_float8_all_gather = true\n"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_TRUE(in->scenario.kernels().float8().enabled());
  EXPECT_THAT(in->unmodelled,
              ElementsAre(HasSubstr("\"quantize.linear.mx\": converts"),
                          HasSubstr("recipe_name = \"rowwise\": scales by row"),
                          HasSubstr("precompute_float8_dynamic_scale_for_fsdp "
                                    "(default): each float8 weight's scale"),
                          HasSubstr("compile.enable (default): float8 without"),
                          HasSubstr("mixed_precision_reduce")));
  EXPECT_THAT(ErrorOf(WithConverters("\"float8\"")),
              HasSubstr("model.converters must be a list of strings"));
}

}  // namespace
}  // namespace shardsim
