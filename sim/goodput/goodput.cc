#include "sim/goodput/goodput.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace shardsim {
namespace {

// Derivations. X is the time to the next failure, exponential of rate
// lambda = 1 / M; memorylessness makes every restart and every commit a
// fresh start.
//
// Restart. A restart of R that begins anew at each failure lasts
// E_R = E[min(X, R)] + P(X < R) E_R, E[min(X, R)] = M (1 - e^{-R/M}), so
// E_R = M (e^{R/M} - 1).
//
// A relaunched attempt that must run L seconds without a failure (Daly's
// segment): F(L) = E[min(X, L)] + P(X < L) (E_R + F(L)), so
// F(L) = (e^{L/M} - 1) (M + E_R) = M e^{R/M} (e^{L/M} - 1). The job's
// launch is such an attempt too (it starts from a fresh state).
//
// Phase k runs from commit k-1 to commit k. D_k: its failure-free length.
// G_k: the length of an attempt relaunched from checkpoint k-1, which
// needs no wait for an earlier write. A failure in the phase rolls back to
// checkpoint k-1, then relaunches until one attempt of G_k succeeds:
//   E_k = E[min(X, D)] + P(X < D) (E_R + F(G))
//       = M (1 - e^{-D/M}) e^{R/M} e^{G/M} = M e^{R/M} e^{(G-D)/M} (e^{D/M}-1).
// With a_k the wall time of segment k's work (tau_k (1 + s)):
//   k = 1:  D = G = a_1 + delta + w (from the launch, no write pending);
//   k >= 2: D = max(a_k, w) + delta (the write of k-1 began when segment k
//           did; its copy waits for it), G = a_k + delta + w.
// Synchronous (w = 0): D = G = tau + delta and E_k is Daly's segment time,
// so n equal segments give T = M e^{R/M} (e^{(tau+delta)/M} - 1) W / tau.
// Asynchronous with a_k >= w: E_k = M e^{(R+w)/M} (e^{(a_k+delta)/M} - 1),
// a synchronous segment whose restart costs R + w.
//
// Parts of a phase. Failures of the first attempt: P(X < D) = p. Failed
// relaunches: a geometric count of mean e^{G/M} - 1 per first failure, so
// the phase has p e^{G/M} restart spells of E_R each:
//   restart_k = p e^{G/M} M (e^{R/M} - 1).
// A failure rolls back to the state of checkpoint k-1, which the first
// attempt left o before the phase began (o = w for k >= 2: the copy of
// k-1 ended w before it committed; o = 0 for k = 1) and a relaunch at its
// start. E[X; X < L] = M (1 - e^{-L/M}) - L e^{-L/M}, and the failed
// relaunches' lengths sum to (e^{G/M} - 1) M - G per first failure, so
//   rework_k = M (1 - e^{-D/M}) - D e^{-D/M} + p (o + M (e^{G/M} - 1) - G).
// The kept checkpoint time is what is left: E_k - a_k - rework_k -
// restart_k (delta, plus any wait and the final write).
//
// Failures: N(t) - lambda t is a martingale and the end a stopping time,
// so E[failures] = lambda E[T] (Wald); by source, each failure's source is
// i with probability lambda_i / lambda.
//
// Optimum interval (Young, Daly). Per unit of work, a middle phase costs
// (e^{(u+delta)/M} - 1) / u up to factors constant in u = a_k, the wall
// time of a segment's work. Its derivative vanishes where
// e^{(u+delta)/M} (1 - u/M) = 1, i.e. d = -x - ln(1 - x) = x^2/2 + x^3/3 +
// x^4/4 + ... with x = u/M, d = delta/M. Inverting with t = sqrt(2d):
// x = t - t^2/3 + t^3/36 + O(t^4). Young keeps x = t. Daly's
// sqrt(2 delta M) (1 + sqrt(delta/2M)/3 + delta/18M) - delta is, in units
// of M, t (1 + t/6 + t^2/36) - t^2/2 = t - t^2/3 + t^3/36: the same three
// terms. Asynchronous, a segment shorter than w only waits (the cost then
// falls as u grows, for u < M), so the optimum is max(u, w). Either way
// the interval is u / (1 + s) of useful work.

constexpr double kSecondsPerHour = 3600;
constexpr int kMaxTrials = 10'000'000;
// About 15 s of simulation on one core (some 15 ns an attempt).
constexpr double kMaxSegmentAttempts = 1e9;
// A last segment shorter than this share of tau is the rounding residue of
// a work_s that tau divides.
constexpr double kResidue = 1e-9;

absl::Status CheckAtLeast(absl::string_view field, double value, double min,
                          absl::string_view unit) {
  if (std::isfinite(value) && value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, " must be a finite number >= ", min, unit, ", got ", value));
}

absl::Status CheckPositive(absl::string_view field, double value) {
  if (std::isfinite(value) && value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be a finite number > 0 s, got ", value));
}

absl::Status Validate(const GoodputInput& in) {
  if (absl::Status s = CheckPositive("work_s", in.work_s); !s.ok()) return s;
  for (size_t i = 0; i < in.failures.size(); ++i) {
    const FailureSource& f = in.failures[i];
    const std::string name =
        absl::StrCat("failures[", i, "] (\"", f.name, "\")");
    if (absl::Status s =
            CheckAtLeast(absl::StrCat(name, " count"), f.count, 0, "");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckAtLeast(absl::StrCat(name, " rate_per_hour"),
                                      f.rate_per_hour, 0, " per hour");
        !s.ok()) {
      return s;
    }
  }
  struct Field {
    absl::string_view name;
    double value;
    absl::string_view unit;
  };
  const Field fields[] = {
      {"restart_s", in.restart_s, " s"},
      {"checkpoint_block_s", in.checkpoint_block_s, " s"},
      {"checkpoint_write_s", in.checkpoint_write_s, " s"},
      {"straggler_s_per_work_s", in.straggler_s_per_work_s, ""},
  };
  for (const Field& f : fields) {
    if (absl::Status s = CheckAtLeast(f.name, f.value, 0, f.unit); !s.ok()) {
      return s;
    }
  }
  if (in.interval_s.has_value()) {
    return CheckPositive("checkpoint interval_s", *in.interval_s);
  }
  return absl::OkStatus();
}

// Per second. Huge counts and rates may overflow: the caller checks the
// sum.
double SourceRate(const FailureSource& f) {
  return f.count * f.rate_per_hour / kSecondsPerHour;
}

struct Segments {
  double interval_s = 0;  // tau, useful work
  std::string rule;
  double count = 0;   // n
  double last_s = 0;  // useful work of segment n
};

absl::StatusOr<Segments> ChooseSegments(const GoodputInput& in, double lambda) {
  Segments seg;
  const double stretch = 1 + in.straggler_s_per_work_s;
  if (in.interval_s.has_value()) {
    seg.interval_s = *in.interval_s;
    seg.rule = "given";
  } else if (lambda == 0) {
    seg.interval_s = in.work_s;
    seg.rule = "no failures: one checkpoint at the end";
  } else {
    const double m = 1 / lambda;
    const bool daly = in.rule == IntervalRule::kDaly;
    double u = daly ? DalyInterval(in.checkpoint_block_s, m)
                    : YoungInterval(in.checkpoint_block_s, m);
    seg.rule = daly ? "Young-Daly (Daly 2006 higher order)"
                    : "Young (1974 first order)";
    if (u < in.checkpoint_write_s) {
      u = in.checkpoint_write_s;
      absl::StrAppend(&seg.rule, ", raised to the background write");
    }
    if (!(u > 0)) {
      return absl::InvalidArgumentError(
          "checkpoint_block_s is 0 with no background write: the optimum "
          "interval is 0 s (free checkpoints); give interval_s");
    }
    seg.interval_s = u / stretch;
  }
  const double tau = seg.interval_s;
  seg.count = std::max(1.0, std::ceil(in.work_s / tau));
  // Beyond 2^52 segments (n - 1) tau is no longer exact; the last one is
  // then as long as the others, to a relative 2^-52 of the work.
  if (seg.count >= 0x1p52) {
    seg.last_s = tau;
    return seg;
  }
  seg.last_s = in.work_s - (seg.count - 1) * tau;
  if (seg.count > 1 && seg.last_s <= kResidue * tau) {
    seg.count -= 1;
    seg.last_s = in.work_s - (seg.count - 1) * tau;
  }
  return seg;
}

// One phase between two commits, in wall seconds (the derivation above).
struct Phase {
  double work = 0;  // a: wall time of the segment's work
  double d = 0;     // failure-free length
  double g = 0;     // length of a relaunched attempt
  double o = 0;     // how long before the phase began the job was in the
                    // state of checkpoint k-1
};

Phase MakePhase(const GoodputInput& in, double work_s, bool first) {
  Phase p;
  const double w = in.checkpoint_write_s;
  const double delta = in.checkpoint_block_s;
  p.work = work_s * (1 + in.straggler_s_per_work_s);
  p.g = p.work + delta + w;
  p.d = first ? p.g : std::max(p.work, w) + delta;
  p.o = first ? 0 : w;
  return p;
}

struct PhaseCost {
  double wall = 0;
  double rework = 0;
  double restart = 0;
};

// expm1 and the 1/lambda factors kept together: the terms stay accurate
// when lambda D is tiny and finite when M is huge.
PhaseCost ExpectedPhase(const Phase& p, double lambda, double restart_s) {
  if (lambda == 0) return {p.d, 0, 0};
  const double fail = -std::expm1(-lambda * p.d);  // P(X < D)
  const double survive = std::exp(-lambda * p.d);
  PhaseCost c;
  c.wall = std::expm1(lambda * p.d) / lambda *
           std::exp(lambda * (restart_s + p.g - p.d));
  c.restart =
      fail * std::exp(lambda * p.g) * std::expm1(lambda * restart_s) / lambda;
  c.rework = (fail / lambda - p.d * survive) +
             fail * (p.o + std::expm1(lambda * p.g) / lambda - p.g);
  return c;
}

// Sums `cost` `times` times into `total`.
void Add(const PhaseCost& cost, double times, PhaseCost& total) {
  total.wall += times * cost.wall;
  total.rework += times * cost.rework;
  total.restart += times * cost.restart;
}

// The failure clock of the Monte Carlo: exponentials by inversion from the
// 53 high bits of std::mt19937_64, whose sequence the standard fixes
// (std::exponential_distribution's is the library's choice).
class FailureClock {
 public:
  FailureClock(double lambda, uint64_t seed) : lambda_(lambda), bits_(seed) {}

  // When the next failure after `now` strikes.
  double Next(double now) {
    if (lambda_ == 0) return std::numeric_limits<double>::infinity();
    const double u = static_cast<double>(bits_() >> 11) * 0x1p-53;
    return now - std::log(1 - u) / lambda_;  // 1 - u is exact, in (0, 1]
  }

 private:
  double lambda_;
  std::mt19937_64 bits_;
};

struct Trial {
  double wall = 0;
  double rework = 0;
  double restart = 0;
  double failures = 0;
};

// What one trial needs of the input, in wall seconds.
struct Timeline {
  int64_t segments = 0;
  double work = 0;  // a segment's work, stretched
  double last_work = 0;
  double block = 0;
  double write = 0;
  double restart = 0;
};

// The restart after a failure at `now`: anew at each failure. Returns when
// it ends; `next_failure` is then the first failure after it.
double Restart(const Timeline& t, double now, FailureClock& clock,
               double& next_failure, Trial& trial) {
  while (true) {
    next_failure = clock.Next(now);
    if (next_failure >= now + t.restart) {
      trial.restart += t.restart;
      return now + t.restart;
    }
    trial.restart += next_failure - now;
    trial.failures += 1;
    now = next_failure;
  }
}

// One run, event by event. Segment k's work starts when the copy of k-1
// ends; the write of k-1 runs beside it and commits `write` later; the
// copy of k starts when both are done. Failures roll back to the state of
// the last committed checkpoint: the moment its copy ended, or the end of
// the restart that loaded it.
Trial RunTrial(const Timeline& t, FailureClock& clock) {
  Trial trial;
  double next_failure = clock.Next(0);
  int64_t committed = 0;  // checkpoint 0: the job's initial state
  int64_t k = 1;
  double start = 0;       // segment k's work begins
  double kept_state = 0;  // when the job was in the committed state
  bool pending = false;   // the write of checkpoint k-1 is running
  double pending_commit = 0;
  while (true) {
    const double work_end = start + (k == t.segments ? t.last_work : t.work);
    double copy_start = work_end;
    bool failed = false;
    if (pending) {
      failed = next_failure < pending_commit;
      if (!failed) {
        committed = k - 1;
        kept_state = start;
        copy_start = std::max(work_end, pending_commit);
      }
    }
    const double copy_end = copy_start + t.block;
    const double commit = copy_end + t.write;
    failed = failed || next_failure < copy_end ||
             (k == t.segments && next_failure < commit);
    if (failed) {
      const double failure = next_failure;
      trial.failures += 1;
      trial.rework += failure - kept_state;
      start = Restart(t, failure, clock, next_failure, trial);
      kept_state = start;
      k = committed + 1;
      pending = false;
      continue;
    }
    if (k == t.segments) {
      trial.wall = commit;
      return trial;
    }
    pending = true;
    pending_commit = commit;
    start = copy_end;
    ++k;
  }
}

double NearestRank(const std::vector<double>& sorted, double p) {
  const size_t n = sorted.size();
  const size_t rank = static_cast<size_t>(std::ceil(p * n));
  return sorted[std::clamp<size_t>(rank, 1, n) - 1];
}

}  // namespace

double YoungInterval(double checkpoint_s, double mtbf_s) {
  return std::sqrt(2 * checkpoint_s * mtbf_s);
}

double DalyInterval(double checkpoint_s, double mtbf_s) {
  if (checkpoint_s >= 2 * mtbf_s) return mtbf_s;
  return YoungInterval(checkpoint_s, mtbf_s) *
             (1 + std::sqrt(checkpoint_s / (2 * mtbf_s)) / 3 +
              checkpoint_s / (18 * mtbf_s)) -
         checkpoint_s;
}

namespace {

// ExpectedGoodput, with what the Monte Carlo needs besides.
struct Solved {
  Goodput goodput;
  Segments segments;
  double lambda = 0;
};

absl::StatusOr<Solved> Solve(const GoodputInput& input) {
  if (absl::Status s = Validate(input); !s.ok()) return s;
  double lambda = 0;
  for (const FailureSource& f : input.failures) lambda += SourceRate(f);
  if (!std::isfinite(lambda)) {
    return absl::InvalidArgumentError(
        "failures: the total rate (sum of count x rate_per_hour) overflows");
  }
  absl::StatusOr<Segments> seg = ChooseSegments(input, lambda);
  if (!seg.ok()) return seg.status();

  // Phase 1 from the launch, phases 2 .. n-1 alike, phase n with the last
  // segment.
  PhaseCost total;
  const double n = seg->count;
  const double r = input.restart_s;
  if (n == 1) {
    Add(ExpectedPhase(MakePhase(input, seg->last_s, true), lambda, r), 1,
        total);
  } else {
    const double tau = seg->interval_s;
    Add(ExpectedPhase(MakePhase(input, tau, true), lambda, r), 1, total);
    Add(ExpectedPhase(MakePhase(input, tau, false), lambda, r), n - 2, total);
    Add(ExpectedPhase(MakePhase(input, seg->last_s, false), lambda, r), 1,
        total);
  }
  if (!std::isfinite(total.wall) || !std::isfinite(total.rework) ||
      !std::isfinite(total.restart)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the expected wall time overflows: failures every ", 1 / lambda,
        " s on average against segments of ", seg->interval_s,
        " s (checkpoint interval_s) and restarts of ", r,
        " s (restart_s): the job would almost never commit a checkpoint"));
  }

  Goodput g;
  g.interval_s = seg->interval_s;
  g.interval_rule = seg->rule;
  g.segments = n;
  g.mtbf_s = lambda > 0 ? 1 / lambda : std::numeric_limits<double>::infinity();
  g.wall_s = total.wall;
  g.goodput = input.work_s / total.wall;
  g.failures = lambda * total.wall;
  for (const FailureSource& f : input.failures) {
    g.failures_by_source.emplace_back(
        f.name, lambda > 0 ? g.failures * SourceRate(f) / lambda : 0);
  }
  g.lost.straggler_s = input.straggler_s_per_work_s * input.work_s;
  g.lost.rework_s = total.rework;
  g.lost.restart_s = total.restart;
  g.lost.checkpoint_s = total.wall - input.work_s - g.lost.straggler_s -
                        total.rework - total.restart;
  return Solved{std::move(g), *std::move(seg), lambda};
}

}  // namespace

absl::StatusOr<Goodput> ExpectedGoodput(const GoodputInput& input) {
  absl::StatusOr<Solved> solved = Solve(input);
  if (!solved.ok()) return solved.status();
  return std::move(solved->goodput);
}

absl::StatusOr<Distribution> MonteCarloGoodput(const GoodputInput& input,
                                               int trials, uint64_t seed) {
  if (trials < 1 || trials > kMaxTrials) {
    return absl::InvalidArgumentError(
        absl::StrCat("trials must be in [1, ", kMaxTrials, "], got ", trials));
  }
  absl::StatusOr<Solved> solved = Solve(input);
  if (!solved.ok()) return solved.status();
  const Goodput& expected = solved->goodput;
  const double attempts = trials * (expected.segments + 3 * expected.failures);
  if (!(attempts <= kMaxSegmentAttempts)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Monte Carlo would simulate about ", attempts,
        " segment attempts (trials x (segments + 3 x expected failures)), "
        "over the limit of ",
        kMaxSegmentAttempts, ": fewer trials or a longer interval_s"));
  }

  const double stretch = 1 + input.straggler_s_per_work_s;
  Timeline t;
  t.segments = static_cast<int64_t>(solved->segments.count);
  t.work = solved->segments.interval_s * stretch;
  t.last_work = solved->segments.last_s * stretch;
  t.block = input.checkpoint_block_s;
  t.write = input.checkpoint_write_s;
  t.restart = input.restart_s;
  FailureClock clock(solved->lambda, seed);

  std::vector<double> walls;
  walls.reserve(trials);
  Trial sum;
  for (int i = 0; i < trials; ++i) {
    const Trial trial = RunTrial(t, clock);
    walls.push_back(trial.wall);
    sum.wall += trial.wall;
    sum.rework += trial.rework;
    sum.restart += trial.restart;
    sum.failures += trial.failures;
  }

  Distribution d;
  d.trials = trials;
  d.interval_s = expected.interval_s;
  d.mean_s = sum.wall / trials;
  double squares = 0;
  for (double w : walls) squares += (w - d.mean_s) * (w - d.mean_s);
  d.stddev_s = trials > 1 ? std::sqrt(squares / (trials - 1)) : 0;
  std::sort(walls.begin(), walls.end());
  d.p50_s = NearestRank(walls, 0.50);
  d.p90_s = NearestRank(walls, 0.90);
  d.p99_s = NearestRank(walls, 0.99);
  d.min_s = walls.front();
  d.max_s = walls.back();
  d.goodput = input.work_s / d.mean_s;
  d.mean_failures = sum.failures / trials;
  d.mean_lost.straggler_s = input.straggler_s_per_work_s * input.work_s;
  d.mean_lost.rework_s = sum.rework / trials;
  d.mean_lost.restart_s = sum.restart / trials;
  d.mean_lost.checkpoint_s = d.mean_s - input.work_s - d.mean_lost.straggler_s -
                             d.mean_lost.rework_s - d.mean_lost.restart_s;
  return d;
}

}  // namespace shardsim
