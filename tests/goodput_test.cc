#include "sim/goodput/goodput.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardsim {
namespace {

using ::testing::HasSubstr;

// One source of 1000 parts at 1e-4 per hour: lambda = 0.1 per hour, so
// M = 10 h = 36000 s.
std::vector<FailureSource> TenHourMtbf() { return {{"gpu", 1000, 1e-4}}; }
constexpr double kM = 36000;

// Ten one-hour segments, synchronous checkpoints of a minute, restarts of
// ten minutes.
GoodputInput DalyCase() {
  GoodputInput in;
  in.work_s = 36000;
  in.failures = TenHourMtbf();
  in.restart_s = 600;
  in.checkpoint_block_s = 60;
  in.interval_s = 3600;
  return in;
}

// The same with asynchronous checkpoints: a 10 s copy, a 120 s write.
GoodputInput AsyncCase() {
  GoodputInput in = DalyCase();
  in.checkpoint_block_s = 10;
  in.checkpoint_write_s = 120;
  return in;
}

double SumOfParts(double work_s, const LostTime& lost) {
  return work_s + lost.checkpoint_s + lost.rework_s + lost.restart_s +
         lost.straggler_s;
}

TEST(GoodputTest, YoungInterval) {
  // 2 x 60 x 36000 = 4,320,000; its root is 2078.461 (2078.461^2 =
  // 4,320,000.1).
  EXPECT_NEAR(YoungInterval(60, kM), 2078.461, 1e-3);
}

TEST(GoodputTest, DalyInterval) {
  // sqrt(60 / 72000) = sqrt(1/1200) = 0.0288675, a third of it 0.0096225;
  // 60 / (18 x 36000) = 0.0000926. 2078.4610 x 1.0097151 = 2098.6534,
  // less 60: 2038.6534.
  EXPECT_NEAR(DalyInterval(60, kM), 2038.6534, 1e-3);
  // delta >= 2M: M.
  EXPECT_DOUBLE_EQ(DalyInterval(100, 50), 50);
  EXPECT_DOUBLE_EQ(DalyInterval(100, 40), 40);
}

// wall / work for n segments of tau: Daly's segment time over tau, the same
// for every n since the first phase of a synchronous job is like the others.
double CostPerWork(double tau) {
  GoodputInput in = DalyCase();
  in.interval_s = tau;
  in.work_s = 8 * tau;
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? g->wall_s / in.work_s : 0;
}

TEST(GoodputTest, DalyIsCloseToTheExactOptimum) {
  // The exact optimum solves e^{(u+delta)/M} (1 - u/M) = 1; with delta/M =
  // 1/600 its root is u = 2038.655 s (x = 0.05662930: x + 1/600 + ln(1 - x)
  // = 0), 0.0015 s from Daly's 2038.6534 and 39.8 s from Young's.
  // Golden-section search on the closed form finds it.
  double lo = 500, hi = 8000;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 100; ++i) {
    const double a = hi - phi * (hi - lo);
    const double b = lo + phi * (hi - lo);
    if (CostPerWork(a) < CostPerWork(b)) {
      hi = b;
    } else {
      lo = a;
    }
  }
  const double best = (lo + hi) / 2;
  EXPECT_NEAR(best, 2038.655, 0.5);
  const double daly = DalyInterval(60, kM);
  const double young = YoungInterval(60, kM);
  EXPECT_LT(CostPerWork(daly) - CostPerWork(best), 1e-12);
  EXPECT_LT(CostPerWork(daly), CostPerWork(young));
}

TEST(GoodputTest, OptimumIntervalIsDalysByDefault) {
  GoodputInput in = DalyCase();
  in.interval_s.reset();
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(g->interval_s, 2038.6534, 1e-3);
  EXPECT_EQ(g->interval_rule, "Young-Daly (Daly 2006 higher order)");
  // 36000 / 2038.65 = 17.66: 18 segments.
  EXPECT_EQ(g->segments, 18);

  in.rule = IntervalRule::kYoung;
  g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(g->interval_s, 2078.461, 1e-3);
  EXPECT_EQ(g->interval_rule, "Young (1974 first order)");

  // Stragglers stretch a segment's work by 1.25: the optimum holds for its
  // wall time, 2038.6534 / 1.25 = 1630.9227 s of work.
  in.rule = IntervalRule::kDaly;
  in.straggler_s_per_work_s = 0.25;
  g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(g->interval_s, 1630.9227, 1e-3);
}

TEST(GoodputTest, AsyncOptimumIsRaisedToTheWrite) {
  // Daly for a 1 s copy: sqrt(2 x 1 x 36000) = 268.3282; sqrt(1 / 72000) =
  // 0.0037268, a third of it 0.0012423; 1 / 648000 = 0.0000015. 268.3282 x
  // 1.0012438 - 1 = 267.662 s, shorter than a 600 s write: the copy would
  // wait for it.
  GoodputInput in = DalyCase();
  in.interval_s.reset();
  in.checkpoint_block_s = 1;
  in.checkpoint_write_s = 600;
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_DOUBLE_EQ(g->interval_s, 600);
  EXPECT_EQ(g->interval_rule,
            "Young-Daly (Daly 2006 higher order), raised to the background "
            "write");
  in.checkpoint_write_s = 100;
  g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(g->interval_s, 267.662, 1e-3);
}

TEST(GoodputTest, WallTimeIsDalysFormula) {
  // T = M e^{R/M} (e^{(tau+delta)/M} - 1) W / tau with e^{600/36000} =
  // 1.0168063 and e^{3660/36000} = 1.1070144:
  // 36000 x 1.0168063 x 0.1070144 x 10 = 39172.65 s.
  absl::StatusOr<Goodput> g = ExpectedGoodput(DalyCase());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->interval_rule, "given");
  EXPECT_EQ(g->segments, 10);
  EXPECT_DOUBLE_EQ(g->mtbf_s, kM);
  EXPECT_NEAR(g->wall_s, 39172.65, 0.01);
  EXPECT_NEAR(g->goodput, 36000 / 39172.65, 1e-6);
  // Wald: T / M = 1.088130.
  EXPECT_NEAR(g->failures, 1.088130, 1e-6);
  // Kept checkpoints: one a segment, 10 x 60. Restarts: per segment
  // (e^{D/M} - 1) M (e^{R/M} - 1) = 3852.519 x 0.0168063 = 64.747.
  // Rework: per segment M (e^{D/M} - 1) - D = 3852.519 - 3660 = 192.519.
  EXPECT_NEAR(g->lost.checkpoint_s, 600, 1e-6);
  EXPECT_NEAR(g->lost.restart_s, 647.47, 0.01);
  EXPECT_NEAR(g->lost.rework_s, 1925.19, 0.01);
  EXPECT_EQ(g->lost.straggler_s, 0);
}

TEST(GoodputTest, AsyncWallTime) {
  // Phase 1 (from the launch) needs tau + delta_b + w = 3730 s without a
  // failure: 36000 x e^{600/36000} x (e^{3730/36000} - 1) = 36000 x
  // 1.0168063 x 0.1091690 = 3996.135. Each of the nine later phases is a
  // synchronous segment of 3610 s whose restart costs R + w = 720 s:
  // 36000 x e^{720/36000} x (e^{3610/36000} - 1) = 36000 x 1.0202013 x
  // 0.1054780 = 3873.915. 3996.135 + 9 x 3873.915 = 38861.37.
  absl::StatusOr<Goodput> g = ExpectedGoodput(AsyncCase());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(g->wall_s, 38861.37, 0.01);
  EXPECT_NEAR(SumOfParts(36000, g->lost), g->wall_s, 1e-9 * g->wall_s);
}

TEST(GoodputTest, AsyncWithoutWriteIsSynchronous) {
  GoodputInput async = AsyncCase();
  async.checkpoint_write_s = 0;
  GoodputInput sync = DalyCase();
  sync.checkpoint_block_s = 10;
  absl::StatusOr<Goodput> a = ExpectedGoodput(async);
  absl::StatusOr<Goodput> s = ExpectedGoodput(sync);
  ASSERT_TRUE(a.ok() && s.ok());
  EXPECT_DOUBLE_EQ(a->wall_s, s->wall_s);
}

TEST(GoodputTest, NoFailuresIsWorkPlusCheckpoints) {
  // 10000 s in segments of 3000: 3000, 3000, 3000, 1000, each followed by
  // 50 s: 10200 s.
  GoodputInput in;
  in.work_s = 10000;
  in.checkpoint_block_s = 50;
  in.restart_s = 600;
  in.interval_s = 3000;
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->segments, 4);
  EXPECT_DOUBLE_EQ(g->wall_s, 10200);
  EXPECT_DOUBLE_EQ(g->lost.checkpoint_s, 200);
  EXPECT_EQ(g->lost.rework_s, 0);
  EXPECT_EQ(g->lost.restart_s, 0);
  EXPECT_EQ(g->failures, 0);
  EXPECT_TRUE(std::isinf(g->mtbf_s));

  // Asynchronous, 3050 s in segments of 1000 (1000, 1000, 1000, 50), a
  // 10 s copy and a 100 s write: phase 1 is 1000 + 10 + 100, the next two
  // 1000 + 10; the last segment's 50 s end before the previous write's
  // 100 s, so it waits for it: 100 + 10. 1110 + 2020 + 110 = 3240.
  in.work_s = 3050;
  in.interval_s = 1000;
  in.checkpoint_block_s = 10;
  in.checkpoint_write_s = 100;
  g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_DOUBLE_EQ(g->wall_s, 3240);
  EXPECT_DOUBLE_EQ(g->lost.checkpoint_s, 190);

  // Stragglers: 1000 s of work take 1250; two segments, two checkpoints.
  in = GoodputInput();
  in.work_s = 1000;
  in.interval_s = 500;
  in.checkpoint_block_s = 10;
  in.straggler_s_per_work_s = 0.25;
  g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_DOUBLE_EQ(g->wall_s, 1270);
  EXPECT_DOUBLE_EQ(g->lost.straggler_s, 250);
  EXPECT_DOUBLE_EQ(g->lost.checkpoint_s, 20);

  // No interval given: one segment and the final checkpoint.
  in.interval_s.reset();
  in.failures = {{"gpu", 8, 0}};
  g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->interval_rule, "no failures: one checkpoint at the end");
  EXPECT_DOUBLE_EQ(g->interval_s, 1000);
  EXPECT_DOUBLE_EQ(g->wall_s, 1260);
}

TEST(GoodputTest, AnIntervalThatDividesTheWorkLeavesNoShortSegment) {
  // 1 / 0.1 is 10 up to rounding: ten segments, not eleven.
  GoodputInput in;
  in.work_s = 1;
  in.interval_s = 0.1;
  in.checkpoint_block_s = 1;
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->segments, 10);
  EXPECT_NEAR(g->wall_s, 11, 1e-12);
}

GoodputInput ThreeSources() {
  GoodputInput in = AsyncCase();
  in.work_s = 30 * 86400.0;
  in.interval_s.reset();
  in.straggler_s_per_work_s = 0.05;
  in.failures = {
      {"gpu", 4096, 2.3e-5}, {"nic", 512, 1e-4}, {"host", 512, 5e-5}};
  return in;
}

TEST(GoodputTest, PartsSumToWallAndFailuresSplitByRate) {
  // Rates per hour: gpu 4096 x 2.3e-5 = 0.094208, nic 0.0512, host 0.0256,
  // together 0.171008.
  absl::StatusOr<Goodput> g = ExpectedGoodput(ThreeSources());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(g->mtbf_s, 3600 / 0.171008, 1e-6);
  EXPECT_NEAR(SumOfParts(30 * 86400.0, g->lost), g->wall_s, 1e-9 * g->wall_s);
  EXPECT_NEAR(g->lost.straggler_s, 0.05 * 30 * 86400, 1e-6);
  ASSERT_EQ(g->failures_by_source.size(), 3);
  EXPECT_EQ(g->failures_by_source[0].first, "gpu");
  EXPECT_EQ(g->failures_by_source[2].first, "host");
  const double f = g->failures;
  EXPECT_NEAR(g->failures_by_source[0].second, f * 0.094208 / 0.171008, 1e-9);
  EXPECT_NEAR(g->failures_by_source[1].second, f * 0.0512 / 0.171008, 1e-9);
  EXPECT_NEAR(g->failures_by_source[2].second, f * 0.0256 / 0.171008, 1e-9);
  EXPECT_NEAR(g->failures, g->wall_s / g->mtbf_s, 1e-9);
  EXPECT_GT(g->lost.rework_s, 0);
  EXPECT_GT(g->lost.restart_s, 0);
  EXPECT_GT(g->lost.checkpoint_s, 0);
}

// |mean - expected| within 3 standard errors, for the wall time and for
// each part: the parts rise and fall with the failure count, so each
// varies less than the wall time.
void ExpectConverges(const GoodputInput& in, int trials, uint64_t seed) {
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  absl::StatusOr<Distribution> d = MonteCarloGoodput(in, trials, seed);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->trials, trials);
  EXPECT_EQ(d->interval_s, g->interval_s);
  const double se = d->stddev_s / std::sqrt(trials);
  EXPECT_GT(se, 0);
  EXPECT_NEAR(d->mean_s, g->wall_s, 3 * se);
  EXPECT_NEAR(d->mean_lost.rework_s, g->lost.rework_s, 3 * se);
  EXPECT_NEAR(d->mean_lost.restart_s, g->lost.restart_s, 3 * se);
  EXPECT_NEAR(d->mean_lost.checkpoint_s, g->lost.checkpoint_s, 3 * se);
  EXPECT_EQ(d->mean_lost.straggler_s, g->lost.straggler_s);
  // The failure count is about Poisson: its standard error,
  // sqrt(failures / trials), is under 1% in every case here.
  EXPECT_NEAR(d->mean_failures, g->failures, 0.05 * g->failures);
  EXPECT_LE(d->min_s, d->p50_s);
  EXPECT_LE(d->p50_s, d->p90_s);
  EXPECT_LE(d->p90_s, d->p99_s);
  EXPECT_LE(d->p99_s, d->max_s);
  EXPECT_NEAR(d->goodput, in.work_s / d->mean_s, 1e-12);
}

TEST(GoodputMonteCarloTest, ConvergesToDalysFormula) {
  ExpectConverges(DalyCase(), 20000, 1);
}

TEST(GoodputMonteCarloTest, ConvergesForAsyncCheckpoints) {
  ExpectConverges(AsyncCase(), 20000, 2);
}

TEST(GoodputMonteCarloTest, ConvergesWhenCopiesWaitForWrites) {
  // Segments of 300 s against a 400 s write: every copy waits 100 s, and a
  // relaunched segment does not.
  GoodputInput in = AsyncCase();
  in.interval_s = 300;
  in.checkpoint_write_s = 400;
  in.work_s = 3000 + 120;               // the last segment, 120 s, waits 280
  in.failures = {{"gpu", 1000, 1e-3}};  // M = 3600 s
  ExpectConverges(in, 20000, 3);
}

TEST(GoodputMonteCarloTest, ConvergesWithStragglersAndSources) {
  GoodputInput in = ThreeSources();
  in.work_s = 3 * 86400;
  ExpectConverges(in, 20000, 4);
}

TEST(GoodputMonteCarloTest, NoFailuresIsDeterministic) {
  GoodputInput in;
  in.work_s = 10000;
  in.checkpoint_block_s = 50;
  in.interval_s = 3000;
  absl::StatusOr<Distribution> d = MonteCarloGoodput(in, 10, 1);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->min_s, 10200);
  EXPECT_DOUBLE_EQ(d->max_s, 10200);
  EXPECT_EQ(d->stddev_s, 0);
}

TEST(GoodputMonteCarloTest, MoreTrialsGetCloser) {
  // Averaged over seeds, the error shrinks about as 1/sqrt(trials): 100
  // times the trials, a tenth of the error.
  const GoodputInput in = DalyCase();
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok());
  double few = 0, many = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    absl::StatusOr<Distribution> a = MonteCarloGoodput(in, 500, seed);
    absl::StatusOr<Distribution> b = MonteCarloGoodput(in, 50000, seed + 100);
    ASSERT_TRUE(a.ok() && b.ok());
    few += std::abs(a->mean_s - g->wall_s);
    many += std::abs(b->mean_s - g->wall_s);
  }
  EXPECT_LT(many, few / 2);
}

TEST(GoodputMonteCarloTest, SameSeedSameResult) {
  const GoodputInput in = AsyncCase();
  absl::StatusOr<Distribution> a = MonteCarloGoodput(in, 1000, 42);
  absl::StatusOr<Distribution> b = MonteCarloGoodput(in, 1000, 42);
  absl::StatusOr<Distribution> c = MonteCarloGoodput(in, 1000, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->mean_s, b->mean_s);
  EXPECT_EQ(a->stddev_s, b->stddev_s);
  EXPECT_EQ(a->p99_s, b->p99_s);
  EXPECT_EQ(a->max_s, b->max_s);
  EXPECT_EQ(a->mean_lost.rework_s, b->mean_lost.rework_s);
  EXPECT_EQ(a->mean_failures, b->mean_failures);
  EXPECT_NE(a->mean_s, c->mean_s);
}

TEST(GoodputTest, MoreFailuresNeverRaiseGoodput) {
  for (bool optimum : {false, true}) {
    for (double write : {0.0, 120.0}) {
      double last = 2;
      for (double scale : {0.0, 0.5, 1.0, 2.0, 4.0, 8.0}) {
        GoodputInput in = DalyCase();
        in.checkpoint_write_s = write;
        in.failures[0].rate_per_hour *= scale;
        if (optimum) in.interval_s.reset();
        absl::StatusOr<Goodput> g = ExpectedGoodput(in);
        ASSERT_TRUE(g.ok()) << g.status();
        EXPECT_LE(g->goodput, last)
            << "scale " << scale << " write " << write << " opt " << optimum;
        last = g->goodput;
      }
    }
  }
}

void ExpectError(const GoodputInput& in, const std::string& field,
                 const std::string& value) {
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr(field));
  EXPECT_THAT(g.status().message(), HasSubstr(value));
}

TEST(GoodputTest, BadInputsNameTheField) {
  GoodputInput in = DalyCase();
  in.interval_s = -3;
  ExpectError(in, "checkpoint interval_s must be a finite number > 0 s",
              "got -3");
  in = DalyCase();
  in.work_s = 0;
  ExpectError(in, "work_s", "got 0");
  in = DalyCase();
  in.restart_s = std::nan("");
  ExpectError(in, "restart_s", "nan");
  in = DalyCase();
  in.checkpoint_write_s = -1;
  ExpectError(in, "checkpoint_write_s", "got -1");
  in = DalyCase();
  in.straggler_s_per_work_s = INFINITY;
  ExpectError(in, "straggler_s_per_work_s", "inf");
  in = DalyCase();
  in.failures.push_back({"nic", -2, 1});
  ExpectError(in, "failures[1] (\"nic\") count", "got -2");
  in = DalyCase();
  in.failures[0].rate_per_hour = -1e-5;
  ExpectError(in, "failures[0] (\"gpu\") rate_per_hour", "got -1e-05");
  // Free synchronous checkpoints: the optimum is 0.
  in = DalyCase();
  in.interval_s.reset();
  in.checkpoint_block_s = 0;
  ExpectError(in, "checkpoint_block_s is 0", "give interval_s");
  // Failures every 36 s against hour-long segments: e^{3660/36} = e^102
  // segments' worth, absurd but a double. Every 0.36 s: e^10167 is not.
  in = DalyCase();
  in.failures[0].rate_per_hour = 0.1;
  absl::StatusOr<Goodput> g = ExpectedGoodput(in);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_GT(g->wall_s, 1e44);
  in.failures[0].rate_per_hour = 10;
  ExpectError(in, "overflows", "interval_s");

  for (int trials : {0, -1, 10'000'001}) {
    absl::StatusOr<Distribution> d = MonteCarloGoodput(DalyCase(), trials, 1);
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("trials must be in [1, "));
  }
  // A huge run is refused, not simulated: 1e7 trials of 1000 segments.
  in = DalyCase();
  in.interval_s = 36;
  absl::StatusOr<Distribution> d = MonteCarloGoodput(in, 10'000'000, 1);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("segment attempts"));
}

}  // namespace
}  // namespace shardsim
