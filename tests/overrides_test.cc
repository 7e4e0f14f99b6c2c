// Command-line overrides (sim/scenario/overrides.h): unset fields leave the
// scenario alone, files named on the command line are the working
// directory's, names stay names, and bad values name the flag.
#include "sim/scenario/overrides.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardsim {
namespace {

Scenario Base() {
  Scenario s;
  s.set_model("mine.textproto");
  s.set_platform("dgx_a100");
  s.add_strategies("zero3");
  s.add_gpus(8);
  s.set_micro_batch_size(4);
  s.set_micro_batches(2);
  s.set_seq_len(512);
  s.set_recompute(true);
  s.set_flash_attention(true);
  s.set_optimizer_bytes_per_param(12);
  return s;
}

std::string Cwd(const std::string& path) {
  return (std::filesystem::current_path() / path).lexically_normal().string();
}

TEST(Overrides, UnsetLeavesTheScenarioAlone) {
  Scenario s = Base();
  ASSERT_TRUE(ApplyOverrides(ScenarioOverrides{}, &s).ok());
  EXPECT_EQ(s.SerializeAsString(), Base().SerializeAsString());
}

TEST(Overrides, EveryField) {
  ScenarioOverrides o;
  o.model = "llama-13b";
  o.platform = "dgx_h100";
  o.strategies = std::vector<std::string>{"ddp", "mics"};
  o.gpus = "16,32";
  o.micro_batch_size = 1;
  o.seq_len = 4096;
  o.recompute = false;
  o.flash_attention = false;
  o.optimizer_bytes_per_param = 16;
  Scenario s = Base();
  ASSERT_TRUE(ApplyOverrides(o, &s).ok());
  EXPECT_EQ(s.model(), "llama-13b");  // a name stays a name
  EXPECT_EQ(s.platform(), "dgx_h100");
  ASSERT_EQ(s.strategies_size(), 2);
  EXPECT_EQ(s.strategies(1), "mics");
  ASSERT_EQ(s.gpus_size(), 2);
  EXPECT_EQ(s.gpus(1), 32);
  EXPECT_EQ(s.micro_batch_size(), 1);
  EXPECT_EQ(s.micro_batches(), 2);
  EXPECT_EQ(s.seq_len(), 4096);
  EXPECT_FALSE(s.recompute());
  EXPECT_FALSE(s.flash_attention());
  EXPECT_EQ(s.optimizer_bytes_per_param(), 16);
}

TEST(Overrides, CommandLinePathsAreTheWorkingDirectorys) {
  ScenarioOverrides o;
  o.model = "tests/data/tiny_model.textproto";
  o.platform = "../x/p.textproto";
  o.strategies =
      std::vector<std::string>{"zero3", " cfg/ds.JSON", "/abs/ds.json"};
  Scenario s = Base();
  ASSERT_TRUE(ApplyOverrides(o, &s).ok());
  EXPECT_EQ(s.model(), Cwd("tests/data/tiny_model.textproto"));
  EXPECT_EQ(s.platform(), Cwd("../x/p.textproto"));
  EXPECT_EQ(s.strategies(0), "zero3");
  EXPECT_EQ(s.strategies(1), Cwd("cfg/ds.JSON"));
  EXPECT_EQ(s.strategies(2), "/abs/ds.json");
}

TEST(Overrides, FrameworkFilesAreTheWorkingDirectorysAndReplaceTheFields) {
  ScenarioOverrides o;
  o.megatron_args = "runs/gpt.args";
  o.torchtitan_config = "/abs/llama3_8b.toml";
  Scenario s = Base();
  s.set_megatron_args("scenario_own.args");
  ASSERT_TRUE(ApplyOverrides(o, &s).ok());
  EXPECT_EQ(s.megatron_args(), Cwd("runs/gpt.args"));
  EXPECT_EQ(s.torchtitan_config(), "/abs/llama3_8b.toml");
  // Only the file's name is set here; ResolveJob reads it.
  EXPECT_EQ(s.model(), "mine.textproto");
}

TEST(Overrides, OneBatchFieldReplacesTheOther) {
  ScenarioOverrides o;
  o.global_batch_tokens = 1 << 22;
  Scenario s = Base();
  ASSERT_TRUE(ApplyOverrides(o, &s).ok());
  EXPECT_EQ(s.global_batch_tokens(), 1 << 22);
  EXPECT_EQ(s.micro_batches(), 0);
  ScenarioOverrides m;
  m.micro_batches = 3;
  ASSERT_TRUE(ApplyOverrides(m, &s).ok());
  EXPECT_EQ(s.micro_batches(), 3);
  EXPECT_EQ(s.global_batch_tokens(), 0);
  o.micro_batches = 3;
  EXPECT_NE(ApplyOverrides(o, &s).message().find("--micro-batches"),
            std::string::npos);
}

TEST(Overrides, BadValuesNameTheFlag) {
  auto error = [](ScenarioOverrides o) {
    Scenario s = Base();
    return std::string(ApplyOverrides(o, &s).message());
  };
  ScenarioOverrides o;
  o.gpus = "8,x";
  EXPECT_EQ(error(o), "--gpus: \"x\" is not a number");
  o = {};
  o.gpus = "0";
  EXPECT_EQ(error(o), "--gpus: must be >= 1, got 0");
  o = {};
  o.seq_len = 0;
  EXPECT_EQ(error(o), "--seq-len: must be >= 1, got 0");
  o = {};
  o.micro_batch_size = -2;
  EXPECT_EQ(error(o), "--micro-batch-size: must be >= 1, got -2");
  o = {};
  o.micro_batches = 0;
  EXPECT_EQ(error(o), "--micro-batches: must be >= 1, got 0");
  o = {};
  o.global_batch_tokens = 0;
  EXPECT_EQ(error(o), "--global-batch-tokens: must be >= 1, got 0");
  o = {};
  o.optimizer_bytes_per_param = 0;
  EXPECT_EQ(error(o), "--optimizer-bytes-per-param: must be > 0, got 0");
  o = {};
  o.strategies = std::vector<std::string>{};
  EXPECT_EQ(error(o), "--strategy: give at least one");
  o = {};
  o.megatron_args = "";
  EXPECT_EQ(error(o),
            "--megatron-args: give the file of Megatron-LM arguments");
  o = {};
  o.torchtitan_config = "";
  EXPECT_EQ(error(o), "--torchtitan-config: give the torchtitan .toml file");
}

}  // namespace
}  // namespace shardsim
