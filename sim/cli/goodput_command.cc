// `shardsim goodput`: every point of a job simulated as `run` does, then
// the run of many steps on parts that fail (sim/goodput/job_goodput.h):
// its expected wall time, goodput and lost time by cause, with --trials a
// Monte Carlo of its distribution.
#include <cmath>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "sim/cli/commands.h"
#include "sim/cli/options.h"
#include "sim/cli/scenario_command.h"
#include "sim/engine/degraded.h"
#include "sim/goodput/job_goodput.h"
#include "sim/results/results.h"
#include "sim/results/sink.h"
#include "sim/simulate/simulate.h"

ABSL_FLAG(double, days, 0,
          "goodput: days of useful steps to run (at the step without the "
          "platform's degraded parts); or --tokens");
ABSL_FLAG(double, tokens, 0, "goodput: a token budget to train; or --days");
ABSL_FLAG(double, checkpoint_interval, 0,
          "goodput: seconds of work between checkpoints (0: the Young-Daly "
          "optimum, Daly's higher-order form)");
ABSL_FLAG(bool, async_checkpoint, false,
          "goodput: checkpoints copied to host memory and written in the "
          "background (PyTorch DCP async_save), not written while the step "
          "waits");
ABSL_FLAG(int, trials, 0,
          "goodput: > 0 runs that many Monte Carlo runs for the wall time's "
          "distribution (up to 1e7)");
ABSL_FLAG(uint64_t, seed, 1, "goodput: the Monte Carlo's seed");

namespace shardsim {
namespace {

absl::StatusOr<GoodputOptions> GoodputOptionsFromFlags() {
  GoodputOptions o;
  o.days = absl::GetFlag(FLAGS_days);
  o.tokens = absl::GetFlag(FLAGS_tokens);
  const bool days = o.days != 0, tokens = o.tokens != 0;
  if (days == tokens) {
    return absl::InvalidArgumentError(
        "goodput: give one of --days or --tokens (how much to train)");
  }
  if (!(std::isfinite(o.days) && o.days >= 0 && o.days <= 1e5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--days must be in (0, 1e5], got ", o.days));
  }
  if (!(std::isfinite(o.tokens) && o.tokens >= 0 && o.tokens <= 1e18)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokens must be in (0, 1e18], got ", o.tokens));
  }
  const double interval = absl::GetFlag(FLAGS_checkpoint_interval);
  if (!(std::isfinite(interval) && interval >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint-interval must be >= 0 seconds (0: the optimum), got ",
        interval));
  }
  if (interval > 0) o.interval_s = interval;
  o.async_checkpoint = absl::GetFlag(FLAGS_async_checkpoint);
  o.trials = absl::GetFlag(FLAGS_trials);
  if (o.trials < 0 || o.trials > 10'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trials must be in [0, 1e7], got ", o.trials));
  }
  o.seed = absl::GetFlag(FLAGS_seed);
  return o;
}

absl::Status GoodputBody(const Job& job, SweepRanks* ranks) {
  absl::StatusOr<GoodputOptions> goodput = GoodputOptionsFromFlags();
  if (!goodput.ok()) return goodput.status();
  absl::StatusOr<EngineOptions> options = EngineOptionsFromFlags(ranks);
  if (!options.ok()) return options.status();
  absl::StatusOr<Results> results = SimulateJob(job, *options);
  if (!results.ok()) return results.status();
  std::optional<Results> uniform;
  // Degraded parts: the uniform step too, for the straggler time.
  if (Degrades(job.platform)) {
    Job whole = job;
    whole.platform.clear_degraded();
    absl::StatusOr<Results> u = SimulateJob(whole, *options);
    if (!u.ok()) return u.status();
    uniform = *std::move(u);
  }
  if (ranks != nullptr && !ranks->is_root()) return absl::OkStatus();
  for (int i = 0; i < results->rows_size(); ++i) {
    ResultRow& row = *results->mutable_rows(i);
    if (row.oom() || !row.has_step_time_s()) continue;
    const double uniform_step =
        uniform ? uniform->rows(i).step_time_s() : row.step_time_s();
    absl::StatusOr<GoodputResult> g =
        PointGoodput(job, row, uniform_step, *goodput);
    if (!g.ok()) {
      return absl::Status(g.status().code(),
                          absl::StrCat(job.path, ": ", g.status().message()));
    }
    *row.mutable_goodput() = *std::move(g);
  }
  *results->mutable_warnings() = {job.warnings.begin(), job.warnings.end()};
  return Emit(FormatGoodputTable(*results), *results, OutputFilesFromFlags());
}

}  // namespace

int GoodputMain(const Invocation& invocation) {
  return RunScenarioCommand(invocation, GoodputBody);
}

}  // namespace shardsim
