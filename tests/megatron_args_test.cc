// Megatron-LM argument files: the scenario fields a file sets, derived by
// hand from Megatron-LM's arguments.py (sim/scenario/megatron_args.h), and
// every argument understood or reported.
#include "sim/scenario/megatron_args.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/scenario/framework_inputs.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kData = absl::StrCat(SHARDSIM_SOURCE_DIR, "/tests/data");

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(test::TestTempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

std::string ErrorOf(const std::string& text) {
  const std::string path = Write("bad.args", text);
  absl::StatusOr<FrameworkInput> in = ReadMegatronArgs(path, "");
  EXPECT_FALSE(in.ok()) << text;
  return in.ok() ? "" : std::string(in.status().message());
}

std::vector<std::string> UnmodelledOf(const std::string& text) {
  absl::StatusOr<FrameworkInput> in =
      ReadMegatronArgs(Write("u.args", text), "");
  EXPECT_TRUE(in.ok()) << in.status();
  return in.ok() ? in->unmodelled : std::vector<std::string>{};
}

constexpr char kMinimal[] = "--bf16 --micro-batch-size 1 ";

TEST(MegatronArgs, FullRunMapsOntoTheScenario) {
  absl::StatusOr<FrameworkInput> in =
      ReadMegatronArgs("megatron_gpt.args", kData);
  ASSERT_TRUE(in.ok()) << in.status();
  const Scenario& s = in->scenario;
  EXPECT_EQ(s.parallelism().tp(), 8);
  EXPECT_EQ(s.parallelism().pp(), 4);
  // 32 layers / (pp 4 x 2 layers per virtual stage).
  EXPECT_EQ(s.parallelism().vpp(), 4);
  EXPECT_EQ(s.parallelism().cp(), 2);
  EXPECT_TRUE(s.parallelism().sequence_parallel());
  EXPECT_EQ(s.micro_batch_size(), 1);
  EXPECT_EQ(s.seq_len(), 2048);
  EXPECT_EQ(s.global_batch_tokens(), 512 * 2048);
  EXPECT_EQ(s.micro_batches(), 0);
  EXPECT_EQ(s.recompute_granularity(), RECOMPUTE_SELECTIVE);
  EXPECT_TRUE(s.flash_attention());
  EXPECT_THAT(s.strategies(), ElementsAre("megatron:DISTRIBUTED_OPTIMIZER"));
  EXPECT_EQ(s.optimizer_bytes_per_param(), 12);
  EXPECT_TRUE(s.execution().grad_fp32());  // --bf16: validate_args
  const Model& m = s.model_def();
  EXPECT_EQ(m.layers(), 32);
  EXPECT_EQ(m.hidden(), 4096);
  EXPECT_EQ(m.heads(), 32);
  EXPECT_EQ(m.kv_heads(), 8);
  EXPECT_EQ(m.ffn_hidden(), 14336);
  EXPECT_EQ(m.mlp(), Model::SWIGLU);
  EXPECT_EQ(m.norm(), Model::RMSNORM);
  EXPECT_FALSE(m.tied_embeddings());
  EXPECT_FALSE(m.linear_bias());
  EXPECT_EQ(m.learned_positions(), 0);
  // 128256 padded to a multiple of 128 x tp 8 = 1024: 126 x 1024.
  EXPECT_EQ(m.vocab(), 129024);
  EXPECT_THAT(in->unmodelled, IsEmpty());
}

TEST(MegatronArgs, MegatronDefaultsMakeAGpt) {
  absl::StatusOr<FrameworkInput> in =
      ReadMegatronArgs("megatron_pp.args", kData);
  ASSERT_TRUE(in.ok()) << in.status();
  const Scenario& s = in->scenario;
  EXPECT_EQ(s.parallelism().pp(), 2);
  EXPECT_EQ(s.parallelism().tp(), 0);
  EXPECT_EQ(s.global_batch_tokens(), 64 * 1024);
  EXPECT_EQ(s.recompute_granularity(), RECOMPUTE_FULL);
  EXPECT_TRUE(s.flash_attention());  // attention-backend auto
  EXPECT_THAT(s.strategies(), ElementsAre("megatron:DDP"));
  const Model& m = s.model_def();
  EXPECT_EQ(m.ffn_hidden(), 4 * 1024);
  EXPECT_EQ(m.mlp(), Model::GELU);
  EXPECT_EQ(m.norm(), Model::LAYERNORM);
  EXPECT_TRUE(m.tied_embeddings());
  EXPECT_TRUE(m.linear_bias());
  EXPECT_EQ(m.learned_positions(), 1024);
  EXPECT_EQ(m.vocab(), 50304);  // 50257 up to a multiple of 128
  // --attention-dropout and --hidden-dropout: 0.1 each by default.
  EXPECT_EQ(m.attention_dropout(), 0.1);
  EXPECT_EQ(m.hidden_dropout(), 0.1);
  EXPECT_THAT(in->unmodelled, IsEmpty());
}

// The dropouts are the model's: given, read; out of [0, 1), an error
// naming the argument; without the model in the file, an error too (they
// would have nothing to set).
TEST(MegatronArgs, DropoutsAreTheModelsOrAnError) {
  const std::string model =
      "--num-layers 2 --hidden-size 1024 --num-attention-heads 8 "
      "--vocab-size 256 --max-position-embeddings 1024 ";
  absl::StatusOr<FrameworkInput> in = ReadMegatronArgs(
      Write("dropout.args", absl::StrCat(kMinimal, model,
                                         "--attention-dropout 0 "
                                         "--hidden-dropout 0.25")),
      "");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->scenario.model_def().attention_dropout(), 0);
  EXPECT_EQ(in->scenario.model_def().hidden_dropout(), 0.25);
  const std::string bad =
      ErrorOf(absl::StrCat(kMinimal, model, "--attention-dropout 1"));
  EXPECT_THAT(bad, HasSubstr("--attention-dropout"));
  EXPECT_THAT(bad, HasSubstr("[0, 1)"));
  const std::string alone =
      ErrorOf(absl::StrCat(kMinimal, "--hidden-dropout 0"));
  EXPECT_THAT(alone, HasSubstr("--hidden-dropout"));
  EXPECT_THAT(alone, HasSubstr("--num-layers"));
}

TEST(MegatronArgs, SwigluFfnDefaultsToEightThirdsRoundedDownTo64) {
  absl::StatusOr<FrameworkInput> in = ReadMegatronArgs(
      Write("swiglu.args", absl::StrCat(kMinimal,
                                        "--num-layers 2 --hidden-size 1000 "
                                        "--num-attention-heads 8 --swiglu "
                                        "--position-embedding-type rope "
                                        "--vocab-size 256")),
      "");
  ASSERT_TRUE(in.ok()) << in.status();
  // int(4 x 1000 x 2 / 3 / 64) x 64 = 41 x 64.
  EXPECT_EQ(in->scenario.model_def().ffn_hidden(), 2624);
}

TEST(MegatronArgs, WithoutAGlobalBatchOneMicroBatchPerReplica) {
  absl::StatusOr<FrameworkInput> in =
      ReadMegatronArgs(Write("nogbs.args", kMinimal), "");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->scenario.micro_batches(), 1);
  EXPECT_EQ(in->scenario.recompute_granularity(), RECOMPUTE_NONE);
  EXPECT_FALSE(in->scenario.has_model_def());
}

TEST(MegatronArgs, UnknownArgumentNamesFileLineAndSuggestion) {
  const std::string e = ErrorOf("--bf16\n--tensor-model-paralel-size 2\n");
  EXPECT_THAT(e, HasSubstr("Megatron-LM arguments "));
  EXPECT_THAT(e, HasSubstr("bad.args:2: unknown argument "
                           "--tensor-model-paralel-size"));
  EXPECT_THAT(e, HasSubstr("(did you mean \"--tensor-model-parallel-size\"?)"));
}

TEST(MegatronArgs, MalformedFilesAreErrors) {
  EXPECT_THAT(ErrorOf("python pretrain_gpt.py --bf16"),
              HasSubstr(":1: \"python\" is not an argument"));
  EXPECT_THAT(ErrorOf("--bf16 --save 'open"), HasSubstr("is not closed"));
  EXPECT_THAT(ErrorOf("--bf16\n--seq-length 8\n--seq-length 9"),
              HasSubstr(":3: --seq-length is given twice (also line 2)"));
  EXPECT_THAT(ErrorOf("--bf16 --seq-length many"),
              HasSubstr("--seq-length many: takes a whole number >= 1"));
  EXPECT_THAT(ErrorOf("--bf16 yes"), HasSubstr("--bf16 yes: takes no value"));
  EXPECT_THAT(ErrorOf("--bf16 --num-layers 2 --hidden-size 64"),
              HasSubstr("needs --num-attention-heads"));
  EXPECT_THAT(ErrorOf("--bf16 --recompute-granularity some"),
              HasSubstr("is full or selective"));
}

TEST(MegatronArgs, UnmodelledArgumentsAreListedUnlessAtTheirDefault) {
  EXPECT_THAT(UnmodelledOf(absl::StrCat(kMinimal, "--fp8-format hybrid")),
              ElementsAre(HasSubstr("--fp8-format hybrid: trains in FP8")));
  EXPECT_THAT(UnmodelledOf(absl::StrCat(kMinimal,
                                        "--transformer-impl "
                                        "transformer_engine "
                                        "--cpu-offloading-num-layers 0")),
              IsEmpty());
  // Megatron's, but none the reader models or knows to cost nothing.
  EXPECT_THAT(UnmodelledOf(absl::StrCat(kMinimal, "--moe-grouped-gemm")),
              ElementsAre(HasSubstr("--moe-grouped-gemm: changes what")));
  EXPECT_THAT(UnmodelledOf("--micro-batch-size 1"),
              ElementsAre(HasSubstr("no --bf16 or --fp16")));
  EXPECT_THAT(UnmodelledOf(absl::StrCat(kMinimal,
                                        "--recompute-granularity full "
                                        "--recompute-method block")),
              ElementsAre(HasSubstr("--recompute-method block")));
}

// A store_true flag is on once given: it has no value to compare with its
// default, so one shardsim does not model is reported whenever it is in
// the file (they passed silently, their empty value equal to their empty
// default), and a value after it is an error.
TEST(MegatronArgs, UnmodelledStoreTrueFlagsAreReportedWhenGiven) {
  for (const char* flag : {"--overlap-param-gather", "--tp-comm-overlap",
                           "--account-for-embedding-in-pipeline-split",
                           "--account-for-loss-in-pipeline-split"}) {
    EXPECT_THAT(UnmodelledOf(absl::StrCat(kMinimal, flag)),
                ElementsAre(HasSubstr(absl::StrCat(flag, ": "))))
        << flag;
    EXPECT_THAT(ErrorOf(absl::StrCat(kMinimal, flag, " true")),
                HasSubstr(absl::StrCat(flag, " true: takes no value")));
  }
}

// The gradient buffer's type, as validate_args sets it: fp32 under bf16
// unless --grad-reduce-in-bf16 or --main-grads-dtype bf16; 16-bit under
// fp16 unless --accumulate-allreduce-grads-in-fp32.
TEST(MegatronArgs, GradientsAreFp32UnderBf16AndHalfUnderFp16) {
  auto fp32 = [](const std::string& args) {
    absl::StatusOr<FrameworkInput> in =
        ReadMegatronArgs(Write("p.args", "--micro-batch-size 1 " + args), "");
    EXPECT_TRUE(in.ok()) << in.status();
    return in.ok() && in->scenario.execution().grad_fp32();
  };
  EXPECT_TRUE(fp32("--bf16"));
  EXPECT_FALSE(fp32("--bf16 --grad-reduce-in-bf16"));
  EXPECT_FALSE(fp32("--bf16 --main-grads-dtype bf16"));
  EXPECT_FALSE(fp32("--fp16"));
  EXPECT_TRUE(fp32("--fp16 --accumulate-allreduce-grads-in-fp32"));
  EXPECT_THAT(ErrorOf("--bf16 --main-grads-dtype fp8"),
              HasSubstr("--main-grads-dtype fp8: takes fp32 or bf16"));
}

// --overlap-grad-reduce: buckets of max(40M, 1M x dp) parameters reduced
// on their own stream (distributed_data_parallel.py); without it one
// bucket on the compute stream (execution.cc Megatron).
TEST(MegatronArgs, OverlapGradReduceBucketsOnTheirOwnStream) {
  absl::StatusOr<FrameworkInput> in = ReadMegatronArgs(
      Write("o.args", absl::StrCat(kMinimal, "--overlap-grad-reduce")), "");
  ASSERT_TRUE(in.ok()) << in.status();
  const Execution& e = in->scenario.execution();
  EXPECT_TRUE(e.overlap_comm());
  EXPECT_EQ(e.reduce_bucket_elements(), 40'000'000);
  EXPECT_EQ(e.reduce_bucket_elements_per_rank(), 1'000'000);
  EXPECT_THAT(in->unmodelled, IsEmpty());
  absl::StatusOr<FrameworkInput> off =
      ReadMegatronArgs(Write("n.args", kMinimal), "");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->scenario.execution().has_overlap_comm());
}

TEST(MegatronArgs, EveryReadArgumentIsMegatrons) {
  // The names the reader classifies are all in arguments.py's list, or
  // the classification would accept what Megatron refuses.
  for (const char* name :
       {"--tensor-model-parallel-size",
        "--num-layers-per-virtual-pipeline-stage",
        "--use-distributed-optimizer", "--global-batch-size",
        "--recompute-activations", "--use-flash-attn", "--fp8-format",
        "--num-query-groups", "--vocab-size", "--log-interval"}) {
    const std::vector<absl::string_view>& names = MegatronArgumentNames();
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

Scenario WithArgs(const std::string& file) {
  Scenario s;
  s.set_megatron_args(file);
  return s;
}

TEST(FrameworkInputs, UnmodelledIsAnErrorOrAWarning) {
  const std::string file = Write(
      "fp8.args", absl::StrCat(kMinimal, "--fp8-format e4m3 --seq-length 8"));
  Scenario s = WithArgs(file);
  std::vector<std::string> warnings;
  absl::Status e = ApplyFrameworkInputs("sc.textproto", "", &s, &warnings);
  EXPECT_THAT(e.message(), HasSubstr("sc.textproto: field megatron_args: "
                                     "Megatron-LM arguments "));
  EXPECT_THAT(e.message(), HasSubstr("not modelled: --fp8-format e4m3"));
  s.set_allow_unmodelled(true);
  ASSERT_TRUE(ApplyFrameworkInputs("sc.textproto", "", &s, &warnings).ok());
  EXPECT_THAT(warnings, ElementsAre(HasSubstr("--fp8-format e4m3")));
  EXPECT_EQ(s.seq_len(), 8);
}

TEST(FrameworkInputs, AScenarioFieldMustAgreeWithTheFile) {
  const std::string file =
      Write("pp.args", absl::StrCat(kMinimal,
                                    "--pipeline-model-parallel-size 4"
                                    " --seq-length 8"));
  std::vector<std::string> warnings;
  Scenario s = WithArgs(file);
  s.mutable_parallelism()->set_pp(4);
  s.set_seq_len(8);
  s.mutable_parallelism()->set_order("tp-cp-dp-pp");
  ASSERT_TRUE(ApplyFrameworkInputs("sc", "", &s, &warnings).ok());
  EXPECT_EQ(s.parallelism().order(), "tp-cp-dp-pp");  // the scenario's own
  EXPECT_THAT(s.strategies(), ElementsAre("megatron:DDP"));
  s.mutable_parallelism()->set_pp(2);
  EXPECT_THAT(ApplyFrameworkInputs("sc", "", &s, &warnings).message(),
              HasSubstr("sc: field parallelism.pp: the scenario gives 2 but "
                        "Megatron-LM arguments"));
  Scenario m = WithArgs(file);
  m.set_micro_batches(4);
  EXPECT_THAT(ApplyFrameworkInputs("sc", "", &m, &warnings).message(),
              HasSubstr("field micro_batches: the scenario gives 4"));
}

}  // namespace
}  // namespace shardsim
