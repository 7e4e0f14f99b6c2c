// `shardsim plan`'s search space and ranking (sim/search/).
#include "sim/search/search.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/search/space.h"
#include "sim/strategy/strategy.h"

namespace shardsim {
namespace {

int CountPrefix(const std::vector<std::string>& specs, const std::string& p) {
  return static_cast<int>(
      std::count_if(specs.begin(), specs.end(),
                    [&](const std::string& s) { return s.rfind(p, 0) == 0; }));
}

TEST(SearchSpace, FactorsAreNodeDivisorsThenWholeNodes) {
  EXPECT_EQ(
      ShardFactors(Mesh{8, 4}),
      (std::vector<std::string>{"1x1", "2x1", "4x1", "8x1", "8x2", "8x4"}));
  EXPECT_EQ(ShardFactors(Mesh{8, 1}),
            (std::vector<std::string>{"1x1", "2x1", "4x1", "8x1"}));
}

// The n factors of a mesh are ordered on both axes, so Lins' rule leaves
// the pairs s_p <= s_os (n(n+1)/2) with s_g = s_p or s_os: n + 2 n(n-1)/2
// = n^2 triples. 4 nodes of 8: n = 6, 36; one node: n = 4, 16.
// PaRO's codes: N <= I <= G per state, non-decreasing from P to OS: C(5, 3)
// = 10 of 27, three of them named presets. 4 nodes: 14 presets + 7 codes +
// 36 triples, of which lins:p=1x1:g=1x1:os=8x1 is a preset: 56.
TEST(SearchSpace, EveryValidTripleAndCodeOnce) {
  const std::vector<std::string> four = CandidateSpecs(Mesh{8, 4});
  EXPECT_EQ(CountPrefix(four, "lins:"), 36);
  EXPECT_EQ(CountPrefix(four, "paro-"), 10);
  EXPECT_EQ(four.size(), 56u);
  const std::vector<std::string> named = NamedStrategies();
  EXPECT_TRUE(std::equal(named.begin(), named.end(), four.begin()));
  std::vector<std::string> sorted = four;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());

  EXPECT_EQ(CountPrefix(CandidateSpecs(Mesh{8, 1}), "lins:"), 16);
}

ResultRow Row(const std::string& name, int64_t peak, double tokens) {
  ResultRow r;
  r.set_strategy(name);
  r.set_peak_memory_bytes(peak);
  r.set_tokens_per_gpu_per_s(tokens);
  return r;
}

TEST(SearchPareto, KeepsWhatNothingBeatsOnBoth) {
  const std::vector<ResultRow> front =
      ParetoFront({Row("a", 10, 100), Row("b", 20, 90), Row("c", 20, 150),
                   Row("d", 30, 150), Row("e", 5, 50)});
  std::vector<std::string> names;
  for (const ResultRow& r : front) names.push_back(r.strategy());
  // b: more memory than a and slower; d: more memory than c, no faster.
  EXPECT_EQ(names, (std::vector<std::string>{"e", "a", "c"}));
}

Job TinyJob(int gpus) {
  Scenario s;
  s.set_name("search test");
  s.set_model(std::string(SHARDSIM_SOURCE_DIR) +
              "/tests/data/tiny_model.textproto");
  s.set_platform("dgx_a100");
  s.add_strategies("zero3");
  s.add_gpus(gpus);
  s.set_micro_batch_size(2);
  s.set_micro_batches(2);
  s.set_seq_len(64);
  s.set_optimizer_bytes_per_param(12);
  absl::StatusOr<Job> job = ResolveJob("search_test.textproto", s);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

TEST(Search, TheBestIsRankedFirstAndNoPresetBeatsIt) {
  SearchOptions options;
  options.top = 5;
  absl::StatusOr<PlanResults> plan = SearchStrategies(TinyJob(16), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->candidates(), plan->filtered() + plan->simulated());
  ASSERT_EQ(plan->best_size(), 5);
  for (int i = 0; i < plan->best_size(); ++i) {
    EXPECT_EQ(plan->best(i).rank(), i + 1);
    if (i > 0) {
      EXPECT_GE(plan->best(i - 1).tokens_per_gpu_per_s(),
                plan->best(i).tokens_per_gpu_per_s());
    }
  }
  EXPECT_FALSE(plan->presets().empty());
  for (const ResultRow& p : plan->presets()) {
    EXPECT_GE(plan->best(0).tokens_per_gpu_per_s(), p.tokens_per_gpu_per_s())
        << p.strategy();
  }
  // The front's fastest point is the best point.
  ASSERT_FALSE(plan->pareto().empty());
  EXPECT_EQ(plan->pareto(plan->pareto_size() - 1).tokens_per_gpu_per_s(),
            plan->best(0).tokens_per_gpu_per_s());
}

TEST(Search, ACapBelowEveryPointNamesTheSmallestPeak) {
  const Job job = TinyJob(16);
  // The smallest peak of the candidates, from the memory model.
  Job all = job;
  all.scenario.clear_strategies();
  for (const std::string& s : CandidateSpecs(Mesh{8, 2})) {
    all.scenario.add_strategies(s);
  }
  absl::StatusOr<Results> memory = AnalyzeJob(all, Analysis::kMemory);
  ASSERT_TRUE(memory.ok()) << memory.status();
  const ResultRow* smallest = &memory->rows(0);
  for (const ResultRow& r : memory->rows()) {
    if (r.peak_memory_bytes() < smallest->peak_memory_bytes()) smallest = &r;
  }
  SearchOptions options;
  options.memory_cap_bytes = smallest->peak_memory_bytes() - 1;
  absl::StatusOr<PlanResults> plan = SearchStrategies(job, options);
  ASSERT_FALSE(plan.ok());
  const std::string message(plan.status().message());
  EXPECT_NE(message.find("no strategy fits at 16 GPUs under the cap"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(" + smallest->strategy() + ")"), std::string::npos)
      << message;
}

TEST(Search, OneGpuCountOnly) {
  Job job = TinyJob(16);
  job.scenario.add_gpus(32);
  absl::StatusOr<PlanResults> plan = SearchStrategies(job, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "search_test.textproto: field gpus: plan searches one GPU count, "
            "the scenario has 2 (give --gpus N)");
}

}  // namespace
}  // namespace shardsim
