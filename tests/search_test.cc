// `shardsim plan`'s search space and ranking (sim/search/).
#include "sim/search/search.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/engine/replay.h"
#include "sim/estimate/estimate.h"
#include "sim/model/model.h"
#include "sim/results/results.h"
#include "sim/search/bound.h"
#include "sim/search/space.h"
#include "sim/strategy/strategy.h"
#include "tests/util/test_util.h"
#include "tests/util/toy_step.h"

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

// Choices per kind: intra ring, tree (2); inter ring, tree, sharp (3); both
// ring, hring, torus2d, horing, tree, sharp (6). Without SHARP on the
// platform: 2 x 5 for intra and both; with it, 2 x 3 x 6 for all three.
// The spec itself comes first, with its own choices: zero3 rings, so
// "@both=ring" is never written; PaRO runs HO-Ring across nodes, so its
// variants write "@both=ring" and never "@both=horing".
TEST(SearchSpace, EveryAlgorithmPerKindOnce) {
  const Mesh mesh{8, 4};
  const Strategy zero3 = *ParseStrategy("zero3", mesh);
  const std::vector<std::string> v = AlgorithmVariants(
      "zero3", zero3, {GroupKind::kIntra, GroupKind::kBoth}, /*sharp=*/false);
  EXPECT_EQ(v.size(), 10u);
  EXPECT_EQ(v[0], "zero3");
  EXPECT_EQ(std::count(v.begin(), v.end(), "zero3@intra=tree@both=horing"), 1);
  EXPECT_EQ(CountPrefix(v, "zero3@intra=tree"), 5);
  EXPECT_EQ(CountPrefix(v, "zero3@both=ring"), 0);
  EXPECT_EQ(AlgorithmVariants(
                "zero3", zero3,
                {GroupKind::kIntra, GroupKind::kInter, GroupKind::kBoth},
                /*sharp=*/true)
                .size(),
            36u);
  EXPECT_EQ(AlgorithmVariants("ddp", *ParseStrategy("ddp", mesh), {}, true),
            std::vector<std::string>{"ddp"});
  for (const std::string& spec : v) {
    EXPECT_TRUE(ParseStrategy(spec, mesh).ok()) << spec;
  }
  const std::vector<std::string> paro =
      AlgorithmVariants("paro-NIG", *ParseStrategy("paro-NIG", mesh),
                        {GroupKind::kBoth}, /*sharp=*/false);
  EXPECT_EQ(paro.size(), 5u);
  EXPECT_EQ(std::count(paro.begin(), paro.end(), "paro-NIG@both=ring"), 1);
  EXPECT_EQ(CountPrefix(paro, "paro-NIG@both=horing"), 0);
}

// A 1 GB all-gather over 2 GPUs: each sends its half, 0.5 GB, at 50 GB/s:
// 10 ms, less the 1e-4 the bound keeps in hand for SimGrid's solver
// (bound.cc): 9.999 ms. On one stream, or chained by a dependency, two
// take 19.998 ms; on two streams with no dependency, 9.999 ms. The whole
// bound is less 1e-12 of itself (sums in another order than the replay's).
TEST(SearchBound, TheLongestPathAtTheFastestSpeed) {
  const Mesh mesh{2, 1};
  const Platform p = TwoGpuNode();
  Schedule same;
  AllGather(&same, GATHER, {});
  AllGather(&same, GATHER, {});
  absl::StatusOr<double> b = StepLowerBound(same, mesh, p);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_DOUBLE_EQ(*b, 0.019998 * (1 - 1e-12));

  Schedule apart;
  AllGather(&apart, GATHER, {});
  AllGather(&apart, REDUCE, {});
  EXPECT_DOUBLE_EQ(*StepLowerBound(apart, mesh, p), 0.009999 * (1 - 1e-12));

  Schedule chained;
  AllGather(&chained, GATHER, {});
  AllGather(&chained, REDUCE, {0});
  EXPECT_DOUBLE_EQ(*StepLowerBound(chained, mesh, p), 0.019998 * (1 - 1e-12));
}

// The same all-gather, now with latencies and launch costs. The first
// protocol (fraction 0.5) pays 2 ms of base latency and 1 ms per step, so
// its estimate is 2 + 10 + 1 = 13 ms; the second (0.25, no latency) takes
// 20 ms, so the engine picks the first and the call takes 13 ms at least
// (12.9987 ms with the solver's slack). Each call costs the host 5 ms to
// launch, one after the other: on two streams the calls start at 5 and
// 10 ms and the second ends at 22.9987 ms. If the host must wait for the
// first to end (17.9987 ms) before launching the second, that one starts
// at 22.9987 ms and ends at 35.9974 ms.
TEST(SearchBound, LatenciesAndTheHost) {
  const Mesh mesh{2, 1};
  const Platform p = LatentTwoGpuNode();
  Schedule two = TwoLaunchedAllGathers();
  absl::StatusOr<double> b = StepLowerBound(two, mesh, p);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NEAR(*b, 0.0229987, 1e-12);

  two.mutable_ops(1)->add_host_waits(0);
  EXPECT_NEAR(*StepLowerBound(two, mesh, p), 0.0359974, 1e-12);
}

// Two nodes of two GPUs, one NIC each (25 GB/s, 0.5 of it payload at
// best): a 1 GB all-gather between the nodes sends 0.5 GB from each
// member, and both groups of its shape (GPUs 0 and 2, 1 and 3) run it at
// once through the same NICs, 1 GB each: 80 ms, 79.992 ms with the
// solver's slack. With a NIC per GPU, 40 ms (39.996 ms).
TEST(SearchBound, GpusThatShareANicShareItsSpeed) {
  const Mesh mesh{2, 2};
  Platform p = TwoGpuNode();
  p.mutable_network()->set_nics_per_node(1);
  Schedule across = InterNodeAllGather(mesh);
  absl::StatusOr<double> b = StepLowerBound(across, mesh, p);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NEAR(*b, 0.079992, 1e-12);
  p.mutable_network()->set_nics_per_node(2);
  EXPECT_NEAR(*StepLowerBound(across, mesh, p), 0.039996, 1e-12);
}

// Beside the 1 GB all-gather (9.999 ms at least), compute on a GPU of 1e15
// FLOP/s and 1e13 B/s of HBM, 100 SMs of which a collective holds 10:
// a GEMM runs at 1 / (1 + 2 x 10/100) = 1/1.2 of its speed meanwhile, a
// memory-bound kernel at 1 / (1 + 0.5 x 10/100) = 1/1.05.
// - A 20 ms GEMM: 9.999 ms of it does 8.3325 ms of work at best, so it
//   ends at 9.999 + 11.6675 = 21.6665 ms at the earliest, not at 20.
// - A 5 ms memory-bound kernel and the GEMM: the kernel fits whole in the
//   all-gather (5.25 ms) and the GEMM takes the 4.749 ms left (3.9575 ms
//   of work): 9.999 + 20 - 3.9575 = 26.0415 ms, not 25.
// With NVLink at half speed while compute runs, the all-gather, all
// NVLink, takes 19.998 ms beside compute at the least:
// - the GEMM does 19.998 / 1.2 = 16.665 ms of work meanwhile and ends at
//   19.998 + 3.335 = 23.333 ms;
// - after the 5 ms kernel (5.25 ms), the GEMM does 14.748 / 1.2 = 12.29
//   ms of work beside it; 25 ms of work end at 19.998 + 7.71 = 27.708 ms.
TEST(SearchBound, ComputeSlowsWhileACollectiveRuns) {
  const Mesh mesh{2, 1};
  Platform p = SlowedTwoGpuNode();
  const Kernel gemm = TwentyMsGemm();
  const Kernel vector = FiveMsVector();

  Schedule one;
  AllGather(&one, GATHER, {});
  Compute(&one, gemm);
  absl::StatusOr<double> b = StepLowerBound(one, mesh, p);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NEAR(*b, 0.0216665, 1e-12);

  Schedule two;
  AllGather(&two, GATHER, {});
  Compute(&two, gemm);
  Compute(&two, vector);
  EXPECT_NEAR(*StepLowerBound(two, mesh, p), 0.0260415, 1e-12);

  p.mutable_interference()->set_nvlink_under_compute(0.5);
  EXPECT_NEAR(*StepLowerBound(one, mesh, p), 0.023333, 1e-12);
  EXPECT_NEAR(*StepLowerBound(two, mesh, p), 0.027708, 1e-12);
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

// A scenario of `model` on dgx_a100 at `gpus`, sequences of `seq_len`
// tokens, micro-batches of `batch` sequences each (how many: the caller's).
Scenario SearchScenario(const std::string& model, int gpus, int batch,
                        int seq_len) {
  Scenario s;
  s.set_name("search test");
  s.set_model(model);
  s.set_platform("dgx_a100");
  s.add_strategies("zero3");
  s.add_gpus(gpus);
  s.set_micro_batch_size(batch);
  s.set_seq_len(seq_len);
  s.set_optimizer_bytes_per_param(12);
  return s;
}

Job Resolved(const Scenario& s) {
  absl::StatusOr<Job> job = ResolveJob("search_test.textproto", s);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

// `micro_batches` of them.
Job SearchJob(const std::string& model, int gpus, int batch, int micro_batches,
              int seq_len) {
  Scenario s = SearchScenario(model, gpus, batch, seq_len);
  s.set_micro_batches(micro_batches);
  return Resolved(s);
}

Job TinyJob(int gpus) {
  return SearchJob(test::TinyModelPath(), gpus, 2, 2, 64);
}

// LLaMA-7B (32 layers: 34 layer passes per micro-batch), `tokens` per
// step over `gpus` GPUs in sequences of `seq_len`, the scenario's
// micro-batch size `size`.
Job BatchJob(int gpus, int64_t tokens, int seq_len, int size) {
  Scenario s = SearchScenario("llama-7b", gpus, size, seq_len);
  s.set_global_batch_tokens(tokens);
  return Resolved(s);
}

std::vector<std::string> Names(const std::vector<SearchSettings>& settings) {
  std::vector<std::string> out;
  for (const SearchSettings& p : settings) {
    ResultRow r;
    r.set_strategy("s");
    *r.mutable_settings() = p;
    out.push_back(PlanPointName(r));
  }
  return out;
}

// LLaMA-7B's 32 blocks as 2 stages x 2 chunks on 16 GPUs: 8 replicas, 6
// sequences each, in micro-batches of 1, 2, 3 or 6 (6, 3, 2 or 1 of
// them). The interleaved schedule runs micro-batches in groups of its 2
// stages (Megatron asserts it): 3 and 1 are refused, so sizes 2 and 6 are
// left out; a scenario whose own size gives such a count is refused when
// it is read, naming the field.
Scenario InterleavedScenario(int size) {
  Scenario s = SearchScenario("llama-7b", 16, size, 512);
  s.set_global_batch_tokens(8 * 6 * 512);
  s.mutable_parallelism()->set_pp(2);
  s.mutable_parallelism()->set_vpp(2);
  s.set_what_if(true);  // zero3 beside a pipeline
  return s;
}

TEST(SearchSpace, CountsThePipelineScheduleRefusesAreLeftOut) {
  EXPECT_EQ(Names(SettingsChoices(Resolved(InterleavedScenario(1)), 16)),
            (std::vector<std::string>{"s [1 x 6]", "s [1 x 6, recompute]",
                                      "s [3 x 2]", "s [3 x 2, recompute]"}));
  absl::StatusOr<Job> own =
      ResolveJob("search_test.textproto", InterleavedScenario(2));
  ASSERT_FALSE(own.ok());
  EXPECT_NE(own.status().message().find(
                "search_test.textproto: at 16 GPUs: field micro_batches: the "
                "interleaved schedule runs micro-batches in groups of the 2 "
                "stages; 3 is not a multiple"),
            std::string::npos)
      << own.status();
}

// Lins' set-up at 128 GPUs: 2^22 tokens in sequences of 4096 are 8
// sequences per GPU, in micro-batches of 1, 2, 4 or 8 (8, 4, 2 or 1 of
// them), each with recomputation off (the scenario's) and on. The
// scenario's own size comes first.
TEST(SearchSpace, EveryMicroBatchSizeThatDividesTheBatch) {
  EXPECT_EQ(Names(SettingsChoices(BatchJob(128, 1 << 22, 4096, 1), 128)),
            (std::vector<std::string>{"s [1 x 8]", "s [1 x 8, recompute]",
                                      "s [2 x 4]", "s [2 x 4, recompute]",
                                      "s [4 x 2]", "s [4 x 2, recompute]",
                                      "s [8 x 1]", "s [8 x 1, recompute]"}));
  EXPECT_EQ(Names(SettingsChoices(BatchJob(128, 1 << 22, 4096, 4), 128))[0],
            "s [4 x 2]");
  // A fixed micro-batch count: the scenario's size alone.
  EXPECT_EQ(Names(SettingsChoices(SearchJob("llama-7b", 16, 10, 3, 512), 16)),
            (std::vector<std::string>{"s [10 x 3]", "s [10 x 3, recompute]"}));
}

// 8 GPUs, 2^22 tokens in sequences of 512: 1024 sequences per GPU, so 11
// sizes (1, 2, 4 .. 1024); the smallest, 1, is 1024 micro-batches of 34
// layer passes, 34,816, within the 131,072 a schedule holds: 22 settings.
// At 2^26 tokens, 16,384 sequences per GPU, sizes up to 2^20 tokens / 512
// = 2048 (12): 1 and 2 are over 4096 micro-batches; 4 is 4096 x 34 =
// 139,264 layer passes, over 131,072; 8 is 2048 x 34 = 69,632. 8 .. 2048
// stay: 9 sizes, 18 settings, the scenario's own size (16) first, then the
// others from the smallest.
TEST(SearchSpace, SizesBeyondTheLimitsAreLeftOut) {
  EXPECT_EQ(SettingsChoices(BatchJob(8, 1 << 22, 512, 1), 8).size(), 22u);
  const std::vector<std::string> big =
      Names(SettingsChoices(BatchJob(8, int64_t{1} << 26, 512, 16), 8));
  ASSERT_EQ(big.size(), 18u);
  EXPECT_EQ(big[0], "s [16 x 1024]");
  EXPECT_EQ(big[2], "s [8 x 2048]");
  EXPECT_EQ(big[16], "s [2048 x 8]");
}

std::vector<std::string> KnobNames(const std::string& spec,
                                   const Execution& fixed) {
  std::vector<std::string> out;
  const Mesh mesh{8, 4};
  for (const Execution& e :
       KnobChoices(*ParseStrategy(spec, mesh), 4096, fixed)) {
    ResultRow r;
    r.set_strategy("s");
    r.mutable_settings()->set_micro_batch_size(1);
    r.mutable_settings()->set_micro_batches(1);
    *r.mutable_settings()->mutable_execution() = e;
    out.push_back(PlanPointName(r));
  }
  return out;
}

// At hidden 4096, HF's "auto" buckets are 4096^2 = 16,777,216 elements
// (reduce) and 0.9 x that = 15,099,494 (prefetch, truncated). ZeRO-3 has
// both knobs (4 choices), ZeRO-2 the reduce bucket only; FSDP prefetches
// one unit in backward (its default), none, or forward too. A knob the
// scenario or the strategy sets stays as it is.
TEST(SearchSpace, EachFrameworksKnobs) {
  EXPECT_EQ(KnobNames("zero3", {}),
            (std::vector<std::string>{
                "s [1 x 1]", "s [1 x 1, reduce bucket 16777216]",
                "s [1 x 1, prefetch bucket 15099494]",
                "s [1 x 1, reduce bucket 16777216, prefetch bucket "
                "15099494]"}));
  EXPECT_EQ(KnobNames("zero2", {}),
            (std::vector<std::string>{"s [1 x 1]",
                                      "s [1 x 1, reduce bucket 16777216]"}));
  EXPECT_EQ(KnobNames("fsdp:FULL_SHARD", {}),
            (std::vector<std::string>{"s [1 x 1]", "s [1 x 1, prefetch 0]",
                                      "s [1 x 1, forward prefetch]"}));
  EXPECT_EQ(KnobNames("ddp", {}).size(), 1u);
  EXPECT_EQ(KnobNames("paro-NIG", {}).size(), 1u);
  EXPECT_EQ(KnobNames("lins:p=1x1:g=1x1:os=8x1", {}).size(), 1u);
  Execution fixed;
  fixed.set_reduce_bucket_elements(1000);
  EXPECT_EQ(KnobNames("zero3", fixed),
            (std::vector<std::string>{"s [1 x 1]",
                                      "s [1 x 1, prefetch bucket 15099494]"}));
  fixed.set_forward_prefetch(true);
  EXPECT_EQ(KnobNames("fsdp:FULL_SHARD", fixed).size(), 1u);
  // A bucket the strategy itself carries (a DeepSpeed config's key) too.
  Strategy own = *ParseStrategy("zero3", Mesh{8, 4});
  own.mutable_execution()->set_prefetch_bucket_elements(1000);
  EXPECT_EQ(KnobChoices(own, 4096, {}).size(), 2u);
}

// Every point simulated, so that every preset is: pruned, the tiny job's
// presets all are (ExpectPruningKeepsTheAnswer checks those by bound).
TEST(Search, TheBestIsRankedFirstAndNoPresetBeatsIt) {
  SearchOptions options;
  options.top = 5;
  options.exhaustive = true;
  absl::StatusOr<SearchResults> plan = SearchStrategies(TinyJob(16), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->points(), plan->candidates() - plan->filtered());
  EXPECT_EQ(plan->points(),
            plan->unplannable() + plan->pruned() + plan->simulated());
  ASSERT_EQ(plan->best_size(), 5);
  for (int i = 0; i < plan->best_size(); ++i) {
    EXPECT_EQ(plan->best(i).rank(), i + 1);
    if (i > 0) {
      EXPECT_GE(plan->best(i - 1).tokens_per_gpu_per_s(),
                plan->best(i).tokens_per_gpu_per_s());
    }
  }
  // Every named preset fits here, and none is faster.
  EXPECT_EQ(plan->presets_size(), static_cast<int>(NamedStrategies().size()));
  for (const ResultRow& p : plan->presets()) {
    EXPECT_GE(plan->best(0).tokens_per_gpu_per_s(), p.tokens_per_gpu_per_s())
        << p.strategy();
  }
  // The front's fastest point is the best point.
  ASSERT_FALSE(plan->pareto().empty());
  EXPECT_EQ(plan->pareto(plan->pareto_size() - 1).tokens_per_gpu_per_s(),
            plan->best(0).tokens_per_gpu_per_s());
}

// Every point simulated: none came in under its bound. Pruned, the search
// finds the same best point and the same front, having pruned some; every
// preset that fits is there, simulated or pruned, and a pruned one is
// slower than the best by its bound.
void ExpectPruningKeepsTheAnswer(const Job& job, bool algorithms,
                                 bool parallelism = false) {
  SearchOptions every;
  every.exhaustive = true;
  every.algorithms = algorithms;
  every.parallelism = parallelism;
  every.top = 100000;
  every.merge_same = false;
  absl::StatusOr<SearchResults> all = SearchStrategies(job, every);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->pruned(), 0);
  ASSERT_EQ(all->best_size(), all->simulated());
  for (const ResultRow& r : all->best()) {
    EXPECT_LE(r.step_lower_bound_s(), r.step_time_s()) << r.strategy();
  }

  SearchOptions pruning;
  pruning.algorithms = algorithms;
  pruning.parallelism = parallelism;
  absl::StatusOr<SearchResults> some = SearchStrategies(job, pruning);
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_GT(some->pruned(), 0);
  EXPECT_EQ(some->pruned() + some->simulated(), all->simulated());
  EXPECT_EQ(PlanPointName(some->best(0)), PlanPointName(all->best(0)));
  ASSERT_EQ(some->pareto_size(), all->pareto_size());
  for (int i = 0; i < some->pareto_size(); ++i) {
    EXPECT_EQ(PlanPointName(some->pareto(i)), PlanPointName(all->pareto(i)))
        << i;
  }
  EXPECT_EQ(some->presets_size() + some->pruned_presets_size(),
            all->presets_size());
  for (const ResultRow& p : some->pruned_presets()) {
    EXPECT_GT(p.step_lower_bound_s(), some->best(0).step_time_s());
    for (const ResultRow& q : all->presets()) {
      if (PlanPointName(q) == PlanPointName(p)) {
        EXPECT_EQ(q.step_lower_bound_s(), p.step_lower_bound_s());
        EXPECT_EQ(q.peak_memory_bytes(), p.peak_memory_bytes());
      }
    }
  }
}

// LLaMA-7B on 16 GPUs, one micro-batch, rings only.
TEST(Search, TheBoundIsSoundAndPruningKeepsTheAnswer) {
  ExpectPruningKeepsTheAnswer(SearchJob("llama-7b", 16, 10, 1, 512),
                              /*algorithms=*/false);
}

// The tiny model (2 blocks) on 16 GPUs, 4 micro-batches, rings only, with
// its layouts too: tensor parallelism refused for now, so data parallel and
// 2-stage 1F1B pipelines, every strategy a framework runs in each. The
// bound stays below every simulated step, pipelines' too.
TEST(Search, PruningKeepsTheAnswerAcrossLayouts) {
  // 2^12 tokens in sequences of 64: 64 sequences, 4 a replica at dp 16
  // (micro-batches of 2: 2), 8 at dp 8 (pp 2: 4 micro-batches of 2).
  Scenario sc = SearchScenario(test::TinyModelPath(), 16, 2, 64);
  sc.set_global_batch_tokens(1 << 12);
  const Job job = Resolved(sc);
  SearchOptions fixed;
  fixed.parallelism = true;
  Job bad = SearchJob(test::TinyModelPath(), 16, 2, 4, 64);
  EXPECT_FALSE(SearchStrategies(bad, fixed).ok());
  const std::vector<Parallelism> layouts = LayoutChoices(job, 16);
  ASSERT_GE(layouts.size(), 2u);
  EXPECT_EQ(layouts[1].pp(), 2);
  ExpectPruningKeepsTheAnswer(job, /*algorithms=*/false,
                              /*parallelism=*/true);
}

// The tiny model on 16 GPUs as tp 2 x cp 2 (flash attention): the ring's
// all-gathers on their own stream beside the attention, its
// reduce-scatter and the tp collectives on the compute stream. The bound
// stays below every simulated step.
TEST(Search, TheBoundHoldsWithTensorAndContextParallelism) {
  Scenario sc = SearchScenario(test::TinyModelPath(), 16, 2, 64);
  sc.set_micro_batches(2);
  sc.set_flash_attention(true);
  sc.mutable_parallelism()->set_tp(2);
  sc.mutable_parallelism()->set_cp(2);
  ExpectPruningKeepsTheAnswer(Resolved(sc), /*algorithms=*/false);
}

// The tiny model on 16 GPUs with every algorithm per group kind.
TEST(Search, WithEveryAlgorithmToo) {
  ExpectPruningKeepsTheAnswer(TinyJob(16), /*algorithms=*/true);
}

// The same on a800_lins, where two GPUs share each NIC: the bound counts a
// step's load on a NIC over every group's GPUs on it, as the engine does.
TEST(Search, WhereTwoGpusShareANic) {
  Scenario s = SearchScenario(test::TinyModelPath(), 16, 2, 64);
  s.set_micro_batches(2);
  s.set_platform("a800_lins");
  ExpectPruningKeepsTheAnswer(Resolved(s), /*algorithms=*/true);
}

// The search lowers a spec once and gives each variant its algorithms
// (UseAlgorithms): the step it shares by is the one the variant's own
// lowering replays, for every candidate and variant of the tiny job.
TEST(Search, AVariantIsItsSpecWithItsAlgorithms) {
  const Job job = TinyJob(16);
  const Mesh mesh = *JobMesh(job.platform, 16);
  int variants = 0;
  for (const std::string& spec : CandidateSpecs(mesh)) {
    absl::StatusOr<Point> base = LowerPoint(job, spec, 16);
    ASSERT_TRUE(base.ok()) << base.status();
    for (const std::string& variant : AlgorithmVariants(
             spec, base->strategy,
             {GroupKind::kIntra, GroupKind::kInter, GroupKind::kBoth},
             /*sharp=*/false)) {
      Schedule renamed = *base->schedule;
      UseAlgorithms(*ParseStrategy(variant, mesh), &renamed);
      absl::StatusOr<Point> own = LowerPoint(job, variant, 16);
      ASSERT_TRUE(own.ok()) << own.status();
      EXPECT_EQ(ReplayDigest(renamed), ReplayDigest(*own->schedule)) << variant;
      ++variants;
    }
  }
  EXPECT_GT(variants, 100);
}

// A point that lowers to the schedule of one simulated before it takes
// that simulation's times: its row is the one its own simulation gives,
// but for naming the point it took them from. At one micro-batch, points
// may differ in memory alone (PaRO's NNG and NGG: the gradients sharded or
// not, one reduction either way), so the memory must be the point's own.
TEST(Search, PointsOfOneScheduleShareOneSimulation) {
  SearchOptions own;
  own.exhaustive = true;
  own.algorithms = false;
  own.top = 100000;
  own.share_steps = false;
  own.merge_same = false;
  SearchOptions shared = own;
  shared.share_steps = true;
  const Job job = SearchJob(test::TinyModelPath(), 16, 2, 1, 64);
  absl::StatusOr<SearchResults> a = SearchStrategies(job, own);
  absl::StatusOr<SearchResults> b = SearchStrategies(job, shared);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->same_step(), 0);
  EXPECT_GT(b->same_step(), 0);
  EXPECT_EQ(b->simulated(), a->simulated());
  ASSERT_EQ(b->best_size(), a->best_size());
  int took = 0;
  for (int i = 0; i < b->best_size(); ++i) {
    ResultRow r = b->best(i);
    if (r.has_same_step_as()) {
      ++took;
      EXPECT_NE(r.same_step_as(), PlanPointName(r));
      r.clear_same_step_as();
    }
    EXPECT_EQ(r.SerializeAsString(), a->best(i).SerializeAsString())
        << PlanPointName(r);
  }
  EXPECT_EQ(took, b->same_step());
}

// Rows that are one outcome are one rank: each point listed as a rank's
// equivalent has, searched unmerged, exactly that row's step, memory and
// traffic; no two ranked rows are one outcome; ranks below `ties` are
// within kTie of the best step, the next one is not.
TEST(Search, OneRowPerOutcomeAndTiesSaid) {
  SearchOptions merged;
  merged.exhaustive = true;
  merged.algorithms = false;
  merged.top = 100000;
  SearchOptions apart = merged;
  apart.merge_same = false;
  const Job job = SearchJob(test::TinyModelPath(), 16, 2, 1, 64);
  absl::StatusOr<SearchResults> m = SearchStrategies(job, merged);
  absl::StatusOr<SearchResults> a = SearchStrategies(job, apart);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(a.ok()) << a.status();
  std::map<std::string, const ResultRow*> by_name;
  for (const ResultRow& r : a->best()) by_name[PlanPointName(r)] = &r;
  int twins = 0;
  ASSERT_GT(m->equivalents_size(), 0);
  for (const SearchResults::Equivalent& e : m->equivalents()) {
    const ResultRow& rep = m->best(e.rank() - 1);
    for (const std::string& name : e.points()) {
      ++twins;
      ASSERT_EQ(by_name.count(name), 1u) << name;
      const ResultRow& r = *by_name.at(name);
      EXPECT_EQ(r.step_time_s(), rep.step_time_s()) << name;
      EXPECT_EQ(r.peak_memory_bytes(), rep.peak_memory_bytes()) << name;
      EXPECT_EQ(r.intra_node_bytes(), rep.intra_node_bytes()) << name;
      EXPECT_EQ(r.inter_node_bytes(), rep.inter_node_bytes()) << name;
    }
  }
  EXPECT_EQ(m->best_size() + twins, a->best_size());
  for (int i = 0; i < m->best_size(); ++i) {
    EXPECT_EQ(m->best(i).rank(), i + 1);
    for (int j = 0; j < i; ++j) {
      const ResultRow& x = m->best(i);
      const ResultRow& y = m->best(j);
      EXPECT_FALSE(x.step_time_s() == y.step_time_s() &&
                   x.peak_memory_bytes() == y.peak_memory_bytes() &&
                   x.intra_node_bytes() == y.intra_node_bytes() &&
                   x.inter_node_bytes() == y.inter_node_bytes() &&
                   x.deployable() == y.deployable())
          << PlanPointName(x) << " and " << PlanPointName(y);
    }
  }
  const double best = m->best(0).step_time_s();
  ASSERT_GE(m->ties(), 1);
  EXPECT_EQ(m->tie_fraction(), kTie);
  for (int i = 0; i < m->ties(); ++i) {
    EXPECT_LE(m->best(i).step_time_s(), best * (1 + kTie));
  }
  if (m->ties() < m->best_size()) {
    EXPECT_GT(m->best(m->ties()).step_time_s(), best * (1 + kTie));
  }
}

// plan bounds, estimates and digests a step through its fold, as stored
// (analyze.h): each is the same as of the step lowered whole, to the last
// bit, on one stage and on pipelines of 1F1B and interleaved 1F1B, with
// tensor parallelism and without. LLaMA-7B's shapes cut to 8 layers on 16
// GPUs, at micro-batch counts that fold (FoldsAt).
TEST(SearchBound, AFoldedStepIsBoundAndEstimatedAsTheWholeStep) {
  struct Case {
    int pp, vpp, tp, m;
  };
  absl::StatusOr<Model> model = BuiltinModel("llama-7b");
  ASSERT_TRUE(model.ok()) << model.status();
  for (const Case& c : {Case{1, 1, 1, 16}, Case{2, 1, 1, 40}, Case{4, 1, 2, 64},
                        Case{2, 2, 2, 64}}) {
    Scenario sc = SearchScenario("", 16, 1, 512);
    sc.clear_model();
    *sc.mutable_model_def() = *model;
    sc.mutable_model_def()->set_layers(8);
    sc.clear_strategies();
    // ZeRO-3 folds on one stage (its pipelines do not: they are lowered
    // whole).
    for (const char* spec : {"ddp", "zero1", "fsdp:FULL_SHARD"}) {
      sc.add_strategies(spec);
    }
    if (c.pp == 1) sc.add_strategies("zero3");
    sc.set_micro_batches(c.m);
    sc.set_flash_attention(true);
    sc.mutable_parallelism()->set_pp(c.pp > 1 ? c.pp : 0);
    sc.mutable_parallelism()->set_vpp(c.vpp > 1 ? c.vpp : 0);
    sc.mutable_parallelism()->set_tp(c.tp > 1 ? c.tp : 0);
    const Job job = Resolved(sc);
    ASSERT_TRUE(FoldsAt(job.scenario));
    absl::StatusOr<Mesh> mesh = JobMesh(job.platform, 16);
    ASSERT_TRUE(mesh.ok());
    PreparedCalls calls(*mesh, job.platform, FlowMode::kFast,
                        job.platform.channels(), /*volumes=*/true);
    StepBounder bounder(&calls);
    for (const std::string& spec : job.scenario.strategies()) {
      SCOPED_TRACE(absl::StrCat(spec, ", pp ", c.pp, " vpp ", c.vpp, " tp ",
                                c.tp, ", ", c.m, " micro-batches"));
      absl::StatusOr<Point> whole = LowerPoint(job, spec, 16);
      absl::StatusOr<Point> fold = LowerPoint(job, spec, 16, Storage::kFolded);
      ASSERT_TRUE(whole.ok() && fold.ok());
      ASSERT_TRUE(fold->fold.has_value());
      absl::StatusOr<double> bw = bounder.Bound(*whole->schedule);
      absl::StatusOr<double> bf = bounder.Bound(fold->ops());
      ASSERT_TRUE(bw.ok() && bf.ok());
      EXPECT_EQ(*bw, *bf);
      absl::StatusOr<StepEstimate> ew = EstimateStep(*whole->schedule, &calls);
      absl::StatusOr<StepEstimate> ef = EstimateStep(fold->ops(), &calls);
      ASSERT_TRUE(ew.ok() && ef.ok());
      EXPECT_EQ(ew->step_time_s, ef->step_time_s);
      EXPECT_EQ(ew->compute_s, ef->compute_s);
      EXPECT_EQ(ew->exposed_comm_s, ef->exposed_comm_s);
      // The same step folded twice has one digest; its whole step another.
      absl::StatusOr<Point> again = LowerPoint(job, spec, 16, Storage::kFolded);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(ReplayDigest(fold->ops()), ReplayDigest(again->ops()));
      EXPECT_NE(ReplayDigest(fold->ops()), ReplayDigest(*whole->schedule));
    }
  }
}

// A candidate the models refuse is reported and skipped, never the end of
// the search. The scenario offloads the optimizer (ZeRO-Offload), which
// only DeepSpeed does, and only with gradients sharded and parameters
// whole, at one micro-batch (CheckOffload): of every candidate spec, zero1
// and zero2 alone plan; every other is one point, unplannable, named in
// the warnings with the reason.
TEST(Search, ARefusedCandidateIsReportedAndSkipped) {
  Scenario s = SearchScenario("llama-7b", 8, 10, 512);
  s.clear_strategies();
  s.add_strategies("zero2");
  s.set_micro_batches(1);
  s.mutable_execution()->set_offload_optimizer(true);
  SearchOptions options;
  options.algorithms = false;
  options.settings = false;
  options.exhaustive = true;
  absl::StatusOr<SearchResults> plan = SearchStrategies(Resolved(s), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  int refused = 0;
  bool ddp_named = false;
  for (const std::string& w : plan->warnings()) {
    if (w.find(": not searched, the models refuse it: ") == std::string::npos)
      continue;
    ++refused;
    EXPECT_NE(w.find("offload_optimizer"), std::string::npos) << w;
    ddp_named = ddp_named || w.rfind("ddp [10 x 1]: ", 0) == 0;
  }
  EXPECT_TRUE(ddp_named);
  EXPECT_EQ(plan->filtered(), 0);
  EXPECT_EQ(plan->candidates(), plan->points());
  EXPECT_EQ(plan->unplannable(), refused);
  EXPECT_EQ(plan->points(), refused + 2);
  EXPECT_EQ(plan->simulated(), 2);
  std::vector<std::string> best;
  for (const ResultRow& r : plan->best()) best.push_back(r.strategy());
  std::sort(best.begin(), best.end());
  EXPECT_EQ(best, (std::vector<std::string>{"zero1", "zero2"}));
}

// Points started ahead of their wave change nothing: the same points are
// pruned, shared and simulated, with the same rows, as when each wave
// starts its points only once it is decided. Four jobs, so that a wave's
// last points leave cores idle for the next wave's.
TEST(Search, StartingPointsAheadChangesNothing) {
  SearchOptions waiting;
  waiting.start_ahead = false;
  waiting.engine.jobs = 4;
  SearchOptions ahead = waiting;
  ahead.start_ahead = true;
  const Job job = TinyJob(16);
  absl::StatusOr<SearchResults> a = SearchStrategies(job, waiting);
  absl::StatusOr<SearchResults> b = SearchStrategies(job, ahead);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT(a->pruned(), 0);
  EXPECT_GT(a->simulated(), 8);  // more than two waves
  EXPECT_EQ(b->SerializeAsString(), a->SerializeAsString());
}

// The smallest peak of the candidates of `job` on `mesh` with
// `settings` (micro-batches, recomputation), each spec with each of its
// framework's knobs, from the memory model; its settings set as the plan
// sets them.
ResultRow SmallestPeak(const Job& job, const Mesh& mesh,
                       SearchSettings settings) {
  std::optional<ResultRow> smallest;
  for (const std::string& spec : CandidateSpecs(mesh)) {
    for (const Execution& e :
         KnobChoices(*ParseStrategy(spec, mesh), job.model.hidden(), {})) {
      *settings.mutable_execution() = e;
      Job one = JobWith(job, settings);
      one.scenario.clear_strategies();
      one.scenario.add_strategies(spec);
      absl::StatusOr<Results> memory = AnalyzeJob(one, Analysis::kMemory);
      EXPECT_TRUE(memory.ok()) << memory.status();
      if (!smallest ||
          memory->rows(0).peak_memory_bytes() < smallest->peak_memory_bytes()) {
        smallest = memory->rows(0);
        *smallest->mutable_settings() = settings;
      }
    }
  }
  return *smallest;
}

SearchSettings Settings(int size, int micro_batches, bool recompute) {
  SearchSettings s;
  s.set_micro_batch_size(size);
  s.set_micro_batches(micro_batches);
  s.set_recompute(recompute);
  return s;
}

// The tiny model at sequences of 256: long enough that activations, not
// gathered parameters, decide the peak. (At 64 the parameters a DeepSpeed
// stage-3 prefetch holds decide it, and recomputation, whose re-run
// forward adds hooks that each prefetch another bucket, raises it.)
Job TinyJobLongSequences(int gpus) {
  return SearchJob(
      std::string(SHARDSIM_SOURCE_DIR) + "/tests/data/tiny_model.textproto",
      gpus, 2, 2, 256);
}

TEST(Search, ACapBelowEveryPointNamesTheSmallestPeak) {
  const Job job = TinyJobLongSequences(16);
  // Recomputation keeps fewer activations: the smallest peak of all.
  const ResultRow smallest =
      SmallestPeak(job, Mesh{8, 2}, Settings(2, 2, true));
  ASSERT_LT(
      smallest.peak_memory_bytes(),
      SmallestPeak(job, Mesh{8, 2}, Settings(2, 2, false)).peak_memory_bytes());
  SearchOptions options;
  options.memory_cap_bytes = smallest.peak_memory_bytes() - 1;
  absl::StatusOr<SearchResults> plan = SearchStrategies(job, options);
  ASSERT_FALSE(plan.ok());
  const std::string message(plan.status().message());
  EXPECT_NE(message.find("no strategy fits at 16 GPUs under the cap"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(absl::StrFormat(
                "the smallest peak is %.2f GiB (%s "
                "[2 x 2, recompute",
                smallest.peak_memory_bytes() / (1024.0 * 1024 * 1024),
                smallest.strategy())),
            std::string::npos)
      << message;
}

// Under a cap that every point without recomputation exceeds, whatever
// its knobs, only recomputation fits: the plan's points all recompute, and
// there is no preset to compare (presets run the scenario's settings).
// With --nosettings the same cap leaves nothing.
TEST(Search, RecomputationFitsWhereTheScenarioDoesNot) {
  const Job job = TinyJobLongSequences(16);
  const int64_t own =
      SmallestPeak(job, Mesh{8, 2}, Settings(2, 2, false)).peak_memory_bytes();
  SearchOptions options;
  options.memory_cap_bytes = own - 1;
  absl::StatusOr<SearchResults> plan = SearchStrategies(job, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 2 x (defaults; DeepSpeed's reduce bucket, prefetch bucket and both;
  // FSDP without prefetch and with forward prefetch): 12.
  EXPECT_EQ(plan->settings(), 12);
  ASSERT_GT(plan->best_size(), 0);
  for (const ResultRow& r : plan->best()) {
    EXPECT_TRUE(r.settings().recompute()) << PlanPointName(r);
    EXPECT_LE(r.peak_memory_bytes(), own - 1);
  }
  EXPECT_EQ(plan->presets_size() + plan->pruned_presets_size(), 0);

  options.settings = false;
  EXPECT_FALSE(SearchStrategies(job, options).ok());
}

TEST(Search, OneGpuCountOnly) {
  Job job = TinyJob(16);
  job.scenario.add_gpus(32);
  absl::StatusOr<SearchResults> plan = SearchStrategies(job, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "search_test.textproto: field gpus: plan searches one GPU count, "
            "the scenario has 2 (give --gpus N)");
}

}  // namespace
}  // namespace shardsim
