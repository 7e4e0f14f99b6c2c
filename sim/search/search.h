// `shardsim plan`: the best strategy for a model on a cluster, found by
// simulation. The candidates of space.h (each spec with each setting) that
// fit in memory (under the cap) are lowered once each; every algorithm
// choice for their group kinds is a point, bounded (bound.h) on that
// schedule with its algorithms (UseAlgorithms), and, under --time-limit,
// estimated (the estimate tier, sim/estimate/estimate.h) on it. The points
// are simulated a wave at a time, first those the estimate ranks best, then
// in order of their bounds (which prunes as much as any order; with no
// time limit every wave is in that order); a point whose bound proves
// a simulated point beats it on both speed and memory is pruned: it can be
// neither the best nor on the Pareto front, which come out as --exhaustive
// finds them. The named presets are compared at the scenario's own
// settings; a pruned one is reported with its bound
// (SearchResults.pruned_presets).
// The rows are ranked by tokens/s per GPU (every candidate runs the same
// tokens per step, so shorter steps rank first); below rank 1, `best`
// ranks the simulated points only.
// Each row says whether it is deployable (space.h, Deployable). A
// deployable point is pruned only by a deployable one, so that the fastest
// deployable point (SearchResults.best_deployable) is exact too.
// Past --time-limit (EngineOptions::time_limit_s) the search bounds and
// starts no more points and returns what it has simulated
// (SearchResults.complete false): best, presets and front over those rows;
// with none simulated, the estimate's best of the points bounded, each row
// marked `estimate`.
#ifndef SHARDSIM_SIM_SEARCH_SEARCH_H_
#define SHARDSIM_SIM_SEARCH_SEARCH_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/results.pb.h"
#include "sim/simulate/simulate.h"

namespace shardsim {

// Rows whose step is within this fraction of the best's are ties
// (SearchResults.ties): the kernel and collective models agree with
// measurements to a few percent and published steps to about 5%
// (docs/validation.md), so a point 1% slower is not shown to be slower.
inline constexpr double kTie = 0.01;

struct SearchOptions {
  // Peak memory per GPU a point may reach; unset: the GPU's memory (the
  // memory model's OOM rule alone).
  std::optional<int64_t> memory_cap_bytes;
  int top = 10;  // rows in `best`
  // Simulate every point that fits, none pruned (to check the pruning).
  bool exhaustive = false;
  // Every algorithm for each group kind (AlgorithmVariants); false: rings.
  bool algorithms = true;
  // Every setting of each spec (SettingsChoices: micro-batch size,
  // recomputation); false: the scenario's own.
  bool settings = true;
  // The parallel layouts too (LayoutChoices: tensor parallel size,
  // pipeline stages and chunks), each setting with each; false: the
  // scenario's own layout. Needs the scenario's global_batch_tokens (steps
  // of one batch, whatever the layout).
  bool parallelism = false;
  // A point that lowers to the schedule of a point already simulated takes
  // that point's times (ResultRow.same_step_as); false: every point is
  // simulated on its own (to check that the two agree).
  bool share_steps = true;
  // Cores a wave leaves idle start the points the next waves will likely
  // simulate (search.cc, WaveRunner); false: a wave's points start only
  // once it is decided (to check that the two agree).
  bool start_ahead = true;
  // Points that are one outcome (the same step, memory, traffic and
  // deployability) are one row of `best`, the others listed as its
  // equivalents (SearchResults.equivalents); false: each its own row, to
  // check every point's bound.
  bool merge_same = true;
  // Deployable points only (space.h, Deployable): the other frameworks'
  // specs are not candidates, and the other algorithm choices not points.
  bool deployable = false;
  EngineOptions engine;  // jobs, MPI ranks, time limit
};

// The job's scenario must name one GPU count; its strategies are replaced
// by the candidates. While it runs, a line on stderr says how far it got
// (sim/runner/progress.h). A point whose simulation the models refuse
// (an InvalidArgument, FailedPrecondition, Unimplemented or OutOfRange
// error) is counted unplannable and named in the warnings; the search
// goes on. Errors: no GPU count
// or several; every candidate over the cap ("... the smallest peak is X
// GiB, STRATEGY"); the time limit reached before any point was bounded
// (DeadlineExceeded).
absl::StatusOr<SearchResults> SearchStrategies(const Job& job,
                                               const SearchOptions& options);

// The rows no other row beats on both peak memory (lower) and tokens/s
// per GPU (higher), by peak memory; ties keep the first.
std::vector<ResultRow> ParetoFront(const std::vector<ResultRow>& rows);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SEARCH_SEARCH_H_
