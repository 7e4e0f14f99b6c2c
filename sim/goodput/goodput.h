// Training goodput under failures and checkpoints: the expected wall time of
// a job that must do `work_s` seconds of useful steps on a cluster whose
// parts fail, in closed form and as a Monte Carlo distribution, with the
// time split into useful work and what checkpoints, lost work, restarts and
// stragglers cost. Pure arithmetic: no schemas, no SimGrid.
//
// The model (ExpectedGoodput computes it exactly, MonteCarloGoodput samples
// it; goodput.cc derives the closed form):
//  - Failures arrive as one Poisson process of rate lambda = sum over
//    sources of count x rate_per_hour / 3600 per second; M = 1 / lambda is
//    the job's mean time between failures. A failure can strike at any
//    moment: during work, a checkpoint, a background write or a restart.
//  - The work is cut into n = ceil(work_s / tau) segments of tau seconds of
//    useful work, the last one shorter when tau does not divide work_s.
//    Slow ranks stretch each segment's work to tau x (1 + s) of wall time
//    (s = straggler_s_per_work_s), so failures hit the stretched time.
//  - After every segment, the last one included (the trained model is
//    saved), the job blocks for checkpoint_block_s (delta): synchronous, the
//    whole write; asynchronous (checkpoint_write_s = w > 0), the copy of the
//    states to host memory, after which the write goes on for w seconds in
//    the background while the next segment runs. A checkpoint counts as
//    saved (committed) only once its write is done. There is one host copy:
//    a segment that ends before the previous write does leaves the GPUs
//    waiting for it. The job ends when its last checkpoint commits.
//  - A failure loses everything since the state of the last committed
//    checkpoint (with w > 0, a failure during a write rolls back two
//    segments' worth) and costs a restart of restart_s (R: relaunch,
//    communicator init, checkpoint load). A failure during a restart starts
//    the restart anew. The first launch costs nothing.
//
// Closed form (goodput.cc): the time from one commit to the next is a
// renewal with E = M e^{R/M} e^{(G-D)/M} (e^{D/M} - 1), D the failure-free
// time between the two commits and G the time a relaunched job needs to
// reach the next commit. Synchronous, D = G = tau + delta: Daly's
// T = M e^{R/M} (e^{(tau+delta)/M} - 1) W / tau (Daly 2006, "A higher order
// estimate of the optimum checkpoint interval for restart dumps", FGCS
// 22(3)). Asynchronous, a segment between two commits costs as a
// synchronous one with checkpoint delta_b and restart R + w.
#ifndef SHARDSIM_SIM_GOODPUT_GOODPUT_H_
#define SHARDSIM_SIM_GOODPUT_GOODPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace shardsim {

// `count` parts that each fail at `rate_per_hour`, e.g. {"gpu", 4096,
// 2.3e-5}. count is a double so that fractional exposure (a switch shared
// by two jobs) fits.
struct FailureSource {
  std::string name;
  double count = 0;
  double rate_per_hour = 0;
};

// How the checkpoint interval is chosen when none is given.
enum class IntervalRule {
  kDaly,   // Daly's higher-order optimum (the default)
  kYoung,  // Young's first-order optimum
};

struct GoodputInput {
  double work_s = 0;  // useful work wanted: the steps alone, > 0
  std::vector<FailureSource> failures;
  double restart_s = 0;           // R
  double checkpoint_block_s = 0;  // delta (synchronous) or delta_b (async)
  double checkpoint_write_s = 0;  // w: the background write; 0: synchronous
  // tau, seconds of useful work between checkpoints; nullopt: the optimum
  // by `rule`. With no failures the optimum is one segment (tau = work_s):
  // nothing is ever lost, so only the final checkpoint is written.
  std::optional<double> interval_s;
  IntervalRule rule = IntervalRule::kDaly;
  // Extra wall time per second of work from slow ranks: the caller passes
  // slowed step / uniform step - 1.
  double straggler_s_per_work_s = 0;
};

// Wall time that is not useful work. With work_s, the parts sum to wall_s.
struct LostTime {
  // Checkpoint time the job keeps: blocking copies or writes, waits for a
  // previous write, and the final write the job waits for. Checkpoints that
  // a failure rolls back count as rework.
  double checkpoint_s = 0;
  // Everything a failure rolled back: work, checkpoints, waits, from the
  // state of the last committed checkpoint to the failure.
  double rework_s = 0;
  // Time in restarts, interrupted ones included.
  double restart_s = 0;
  // s x work_s: the slowdown of the work that is kept (that of lost work is
  // rework).
  double straggler_s = 0;
};

struct Goodput {
  double interval_s = 0;  // tau used, seconds of useful work
  // "given", "Young-Daly (Daly 2006 higher order)", "Young (1974 first
  // order)", either optimum with ", raised to the background write", or
  // "no failures: one checkpoint at the end".
  std::string interval_rule;
  double segments = 0;  // n, a double: a tiny interval makes it huge
  double mtbf_s = 0;    // M = 1 / lambda; infinity with no failures
  double wall_s = 0;    // expected wall time
  double goodput = 0;   // work_s / wall_s
  double failures = 0;  // expected count, restarts' included: wall_s / M
  // Expected counts by source, in input order: failures x its share of
  // lambda.
  std::vector<std::pair<std::string, double>> failures_by_source;
  LostTime lost;  // expected values
};

// The expected wall time and its parts, exact under the model above.
// Errors name the field: any input not finite, a count, rate or time < 0,
// work_s or a given interval <= 0, an optimum that is 0 (free synchronous
// checkpoints: give interval_s), or a wall time too large for a double.
absl::StatusOr<Goodput> ExpectedGoodput(const GoodputInput& input);

// Wall times of `trials` runs, each simulated event by event (segments,
// copies, writes, commits, failures, restarts) with failures drawn from
// std::mt19937_64 seeded with `seed`, exponentials by inversion: the same
// draws with every standard library (std::log may differ in its last bit
// between C math libraries). Its mean converges to
// ExpectedGoodput's wall_s, its mean_lost to its lost.
struct Distribution {
  int trials = 0;
  double interval_s = 0;  // the tau ExpectedGoodput chose
  double mean_s = 0;
  double stddev_s = 0;  // sample standard deviation (0 for one trial)
  double p50_s = 0;     // nearest-rank percentiles
  double p90_s = 0;
  double p99_s = 0;
  double min_s = 0;
  double max_s = 0;
  // work_s / mean_s, comparable with Goodput::goodput (the mean of work_s /
  // wall per trial is larger: Jensen).
  double goodput = 0;
  double mean_failures = 0;
  LostTime mean_lost;  // checkpoint_s is the remainder, as in the closed form
};

// Errors: those of ExpectedGoodput, trials outside [1, 1e7], or a run too
// long to simulate (trials x (segments + 3 x expected failures) over 1e9
// segment attempts).
absl::StatusOr<Distribution> MonteCarloGoodput(const GoodputInput& input,
                                               int trials, uint64_t seed);

// Young's optimum interval (Young 1974, CACM 17(9)): sqrt(2 delta M), the
// first-order minimum of the synchronous closed form.
double YoungInterval(double checkpoint_s, double mtbf_s);

// Daly's higher-order optimum: sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 +
// delta / 18M) - delta for delta < 2M, else M; the third-order expansion of
// the exact minimum (goodput.cc derives it).
double DalyInterval(double checkpoint_s, double mtbf_s);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_GOODPUT_GOODPUT_H_
