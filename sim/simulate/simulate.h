// The timing engine's entry points. Each simulation runs in a child process
// (sim/runner/isolate.h); the caller's process never starts SimGrid.
#ifndef SHARDSIM_SIM_SIMULATE_SIMULATE_H_
#define SHARDSIM_SIM_SIMULATE_SIMULATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/engine/collective_engine.h"
#include "sim/runner/isolate.h"
#include "sim/scenario/scenario.h"
#include "sim/schema/results.pb.h"

namespace shardsim {

// Starts this process's SimGrid engine with the settings that keep the flow
// model honest (docs/engine.md §2): CM02, no cross-traffic, no TCP-gamma cap.
// For child processes only (sim/runner/isolate.h); once per process.
void StartSimGrid();

struct EngineOptions {
  FlowMode mode = FlowMode::kFast;
  int jobs = 2;             // simulations at once
  std::string trace_path;   // Chrome trace of each point, if set
  double time_limit_s = 0;  // > 0: stop with an error when reached
  bool collapse = true;     // repeating micro-batches simulated once (replay.h)
  // Of the classes of degraded GPUs, those another dominates left out
  // (sim/engine/degraded.h); false replays every class, for checking.
  bool drop_dominated = true;
  // Lone inter-node stages replayed (CollectiveEngine::set_replay_stages).
  bool replay_stages = true;
  // Only the network flows of the nodes that the others mirror run
  // (CollectiveEngine::UseSymmetry).
  bool network_symmetry = true;
  // Runs the points; unset: RunIsolated on this machine. `shardsim run`
  // and `plan` under mpirun or srun set it to spread them over the `ranks`
  // ranks (sim/runner/distribute.h); every rank gets every row back.
  TaskRunner run_tasks;
  int ranks = 1;
  // Calls prepared before the points' processes start (`shardsim plan`
  // prepares every call of its search in its bound phase): a point whose
  // mesh and platform they serve takes its calls from them, inherited
  // (CollectiveEngine). Unset: each point prepares its own.
  PreparedCalls* prepared = nullptr;
};

// Every strategy x GPU count of the job: memory, traffic and, for the
// points that fit in memory, the simulated step. OOM rows are not timed.
absl::StatusOr<Results> SimulateJob(const Job& job,
                                    const EngineOptions& options);

// One point of a sweep: a strategy spec of a job at a GPU count.
struct JobPoint {
  const Job* job;  // validated (SimulateJob's checks), outliving the call
  std::string spec;
  int gpus = 0;
};

// The points, each simulated as SimulateJob's are, their rows in order. The
// jobs may differ: `shardsim plan` runs one spec with several settings side by
// side.
absl::StatusOr<Results> SimulatePoints(const std::vector<JobPoint>& points,
                                       const EngineOptions& options);

// What SimulatePoints runs in a child for `point`: its row, serialized.
// `single`: the point is its sweep's only one (TracePathFor).
ChildTask PointTask(const JobPoint& point, const EngineOptions& options,
                    bool single);

// The sweep's sizes, each run alone over `gpus` GPUs, one after another in
// one simulation (options: mode, replay_stages, network_symmetry and time
// limit).
absl::StatusOr<CollectiveResults> SimulateCollective(
    const Platform& platform, int gpus, const CollectiveSweep& sweep,
    const EngineOptions& options);

// A trace file per point: `path` itself for a single point, else with
// ".STRATEGY.GPUS" before its extension.
std::string TracePathFor(const std::string& path, const std::string& strategy,
                         int gpus, bool single);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SIMULATE_SIMULATE_H_
