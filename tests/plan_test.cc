// `shardsim plan` as a user relies on it: the time limit's best-so-far and
// the deployable points (sim/search/search.h, sim/search/space.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "sim/analyze/analyze.h"
#include "sim/results/results.h"
#include "sim/schedule/lower.h"
#include "sim/search/search.h"
#include "sim/search/space.h"
#include "sim/strategy/strategy.h"
#include "tests/util/test_util.h"

namespace shardsim {
namespace {

// The tiny model on dgx_a100 (8 GPUs a node, SHARP switches), 16 GPUs: 2
// nodes; 2 micro-batches of 2 sequences of 64 tokens.
Job TinyJob() {
  Scenario s;
  s.set_name("plan test");
  s.set_model(test::TinyModelPath());
  s.set_platform("dgx_a100");
  s.add_strategies("zero3");
  s.add_gpus(16);
  s.set_micro_batch_size(2);
  s.set_micro_batches(2);
  s.set_seq_len(64);
  s.set_optimizer_bytes_per_param(12);
  absl::StatusOr<Job> job = ResolveJob("plan_test.textproto", s);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

// Whether `spec` (with @KIND=ALGO, if any) is deployable on the tiny job.
bool DeployableSpec(const std::string& spec) {
  const Job job = TinyJob();
  const std::string base = spec.substr(0, spec.find('@'));
  absl::StatusOr<Point> p = LowerPoint(job, base, 16);
  EXPECT_TRUE(p.ok()) << spec << ": " << p.status();
  if (!p.ok()) return false;
  absl::StatusOr<Strategy> s = ParseStrategy(spec, p->mesh);
  EXPECT_TRUE(s.ok()) << spec << ": " << s.status();
  if (!s.ok()) return false;
  Schedule schedule = *p->schedule;
  UseAlgorithms(*s, &schedule);
  return Deployable(p->strategy, schedule);
}

// The rule of space.h, case by case.
TEST(Deployable, FrameworksAndNcclAlgorithms) {
  // The frameworks' own strategies, as their presets run them (rings).
  for (const std::string spec :
       {"ddp", "zero1", "zero2", "zero3", "fsdp:FULL_SHARD",
        "fsdp:SHARD_GRAD_OP", "fsdp:HYBRID_SHARD", "fsdp:_HYBRID_SHARD_ZERO2",
        "mics", "zeropp", "zeropp:hpz=8:qwz=true:qgz=true"}) {
    EXPECT_TRUE(DeployableSpec(spec)) << spec;
  }
  // DeepSpeed's own hierarchical all-gather (TORUS2D as the preset runs it).
  EXPECT_TRUE(
      DeployableSpec("mics:shard_size=16:hierarchical_params_gather="
                     "true"));
  // Research strategies, whatever their algorithms.
  for (const std::string spec : {"paro-IGG", "paro-NIG", "paro-IGG@both=ring",
                                 "lins:p=1x1:g=1x1:os=8x1"}) {
    EXPECT_FALSE(DeployableSpec(spec)) << spec;
  }
  // DDP all-reduces only: NCCL's tree and CollNet/SHARP run all-reduce.
  EXPECT_TRUE(DeployableSpec("ddp@both=tree"));
  EXPECT_TRUE(DeployableSpec("ddp@both=sharp"));
  // ZeRO-3 all-gathers and reduce-scatters: NCCL has no tree for them, but
  // CollNet/NVLS (SHARP) for both.
  EXPECT_FALSE(DeployableSpec("zero3@both=tree"));
  EXPECT_TRUE(DeployableSpec("zero3@both=sharp"));
  // The research algorithms.
  for (const std::string algo : {"hring", "torus2d", "horing"}) {
    EXPECT_FALSE(DeployableSpec("zero3@both=" + algo)) << algo;
    EXPECT_FALSE(DeployableSpec("ddp@both=" + algo)) << algo;
  }
}

bool IsResearch(const ResultRow& r) {
  return r.strategy().rfind("paro-", 0) == 0 ||
         r.strategy().rfind("lins:", 0) == 0 ||
         r.strategy().find("=horing") != std::string::npos ||
         r.strategy().find("=hring") != std::string::npos ||
         r.strategy().find("=torus2d") != std::string::npos;
}

// Every row says whether it is deployable; the research ones are not. The
// best deployable point is the fastest deployable row, and the search
// restricted to deployable points finds it as its best: a deployable point
// is pruned only by a deployable one.
TEST(Deployable, EveryRowMarkedAndTheBestDeployableIsExact) {
  SearchOptions options;
  options.top = 1000;  // every simulated row
  absl::StatusOr<SearchResults> all = SearchStrategies(TinyJob(), options);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->complete());
  int research = 0;
  for (const auto* rows : {&all->best(), &all->presets(), &all->pareto()}) {
    for (const ResultRow& r : *rows) {
      ASSERT_TRUE(r.has_deployable()) << r.strategy();
      if (IsResearch(r)) {
        EXPECT_FALSE(r.deployable()) << r.strategy();
        ++research;
      }
    }
  }
  // The presets alone list paro-IGG, paro-IIG, paro-NIG and Lins' preset,
  // where not pruned; the best rows many more.
  EXPECT_GT(research, 0);
  ASSERT_TRUE(all->has_best_deployable());
  const ResultRow& best_deployable = all->best_deployable();
  EXPECT_TRUE(best_deployable.deployable());
  for (const ResultRow& r : all->best()) {
    if (r.deployable()) {
      EXPECT_LE(r.tokens_per_gpu_per_s(),
                best_deployable.tokens_per_gpu_per_s())
          << r.strategy();
    }
  }
  ASSERT_GE(best_deployable.rank(), 1);
  ASSERT_LE(best_deployable.rank(), all->best_size());
  EXPECT_EQ(all->best(best_deployable.rank() - 1).tokens_per_gpu_per_s(),
            best_deployable.tokens_per_gpu_per_s());

  options.deployable = true;
  absl::StatusOr<SearchResults> deployable =
      SearchStrategies(TinyJob(), options);
  ASSERT_TRUE(deployable.ok()) << deployable.status();
  for (const auto* rows :
       {&deployable->best(), &deployable->presets(), &deployable->pareto(),
        &deployable->pruned_presets()}) {
    for (const ResultRow& r : *rows) {
      EXPECT_TRUE(r.deployable()) << r.strategy();
      EXPECT_FALSE(IsResearch(r)) << r.strategy();
    }
  }
  ASSERT_GT(deployable->best_size(), 0);
  EXPECT_EQ(deployable->best(0).tokens_per_gpu_per_s(),
            best_deployable.tokens_per_gpu_per_s());
  EXPECT_EQ(deployable->best_deployable().rank(), 1);
  // Fewer specs: the 10 presets of DeepSpeed, DDP and FSDP that are valid
  // on 2 nodes, none of PaRO's or Lins'.
  EXPECT_EQ(deployable->specs(), 10);
  EXPECT_LT(deployable->points(), all->points());
}

// Past its time limit, the search returns what it simulated, marked
// incomplete. Which limit stops it after its first wave and before its last
// depends on this machine's speed: the limits are fractions of the whole
// search's time, measured here, and at least one of them must stop it
// part-way (the lower bounds take a small part of the whole).
TEST(TimeLimit, GivesTheBestSoFar) {
  SearchOptions options;
  const absl::Time start = absl::Now();
  absl::StatusOr<SearchResults> whole = SearchStrategies(TinyJob(), options);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(whole->complete());
  EXPECT_EQ(whole->points(),
            whole->unplannable() + whole->pruned() + whole->simulated());

  bool stopped = false;
  for (const double fraction : {0.6, 0.4, 0.8, 0.25, 0.9}) {
    options.engine.time_limit_s = fraction * seconds;
    absl::StatusOr<SearchResults> plan = SearchStrategies(TinyJob(), options);
    if (!plan.ok()) {
      // Stopped before any point was simulated: the only error it gives.
      EXPECT_TRUE(absl::IsDeadlineExceeded(plan.status())) << plan.status();
      continue;
    }
    if (plan->complete()) continue;  // this run went faster
    stopped = true;
    EXPECT_GE(plan->best_size(), 1);
    // Points neither pruned nor simulated: those not reached.
    EXPECT_LT(plan->unplannable() + plan->pruned() + plan->simulated(),
              plan->points());
    // Stopped while bounding (a loaded machine: this run went slower),
    // the estimate's best rows, each marked; else the simulated ones.
    const bool estimates = plan->simulated() == 0;
    for (int i = 0; i < plan->best_size(); ++i) {
      EXPECT_EQ(plan->best(i).rank(), i + 1);
      EXPECT_TRUE(plan->best(i).has_step_time_s());
      EXPECT_EQ(plan->best(i).estimate(), estimates) << "row " << i;
    }
    EXPECT_FALSE(plan->pareto().empty());
    EXPECT_NE(FormatPlanTable(*plan).find("INCOMPLETE"), std::string::npos);
    break;
  }
  EXPECT_TRUE(stopped) << "no limit stopped a search of " << seconds << " s";
  EXPECT_EQ(FormatPlanTable(*whole).find("INCOMPLETE"), std::string::npos);

  // A limit over before the first point: an error, no rows.
  options.engine.time_limit_s = 1e-6;
  absl::StatusOr<SearchResults> none = SearchStrategies(TinyJob(), options);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(none.status())) << none.status();
}

// Under a time limit that never comes, the search estimates every point
// and simulates the estimate's best first (the first wave), then goes on
// in order of the bounds: the order of work changes, never the answer.
// The best point and the Pareto front are those of the search with no
// limit, and every point is pruned, simulated or unplannable.
TEST(TimeLimit, TheEstimateOrdersTheWorkNotTheAnswer) {
  SearchOptions options;
  absl::StatusOr<SearchResults> plain = SearchStrategies(TinyJob(), options);
  options.engine.time_limit_s = 1e6;
  absl::StatusOr<SearchResults> estimated =
      SearchStrategies(TinyJob(), options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(estimated.ok()) << estimated.status();
  ASSERT_TRUE(estimated->complete());
  EXPECT_EQ(
      estimated->points(),
      estimated->unplannable() + estimated->pruned() + estimated->simulated());
  ASSERT_GE(estimated->best_size(), 1);
  EXPECT_EQ(PlanPointName(estimated->best(0)), PlanPointName(plain->best(0)));
  EXPECT_EQ(estimated->best(0).step_time_s(), plain->best(0).step_time_s());
  std::vector<std::string> front, plain_front;
  for (const ResultRow& r : estimated->pareto())
    front.push_back(PlanPointName(r));
  for (const ResultRow& r : plain->pareto()) {
    plain_front.push_back(PlanPointName(r));
  }
  EXPECT_EQ(front, plain_front);
  for (const ResultRow& r : estimated->best()) EXPECT_FALSE(r.estimate());
}

}  // namespace
}  // namespace shardsim
