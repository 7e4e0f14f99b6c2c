// A scenario .textproto as `shardsim memory` and `shardsim schedule` read
// it: parse, ResolveJob (model, platform, every field), then per-GPU memory
// for its strategies x GPU counts and one lowered schedule with its traffic.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/analyze/analyze.h"
#include "sim/memory/memory.h"
#include "sim/model/model.h"
#include "sim/results/results.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/lower.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "tests/fuzz/fuzz_util.h"

namespace shardsim::fuzz {
namespace {

constexpr int64_t kMaxLoweredBlocks = 16;
constexpr int64_t kLoweredLayers = 2;
constexpr int64_t kLoweredMicroBatches = 2;

// AnalyzePoint's memory half, without lowering the schedule: `shardsim
// memory` lowers every point, which costs what the job's size says.
void MemoryRow(const Job& job, const std::vector<Layer>& layers,
               const std::string& spec, int gpus, Results* results) {
  absl::StatusOr<Mesh> mesh = JobMesh(job.platform, gpus);
  if (!mesh.ok()) return;
  absl::StatusOr<Strategy> strategy = ParseStrategy(spec, *mesh, job.base_dir);
  if (!strategy.ok()) return;
  if (!ResolveExecution(job.scenario.execution(), job.model.hidden(),
                        &*strategy)
           .ok()) {
    return;
  }
  absl::StatusOr<Scenario> at = ScenarioAt(job.scenario, gpus);
  if (!at.ok()) return;
  const MemoryBreakdown mem =
      EstimateMemory(layers, *strategy, *mesh, *at, job.platform);
  SetNameAndMemory(job, spec, gpus, mem, results->add_rows());
}

}  // namespace
}  // namespace shardsim::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardsim;
  using namespace shardsim::fuzz;
  Scenario scenario;
  if (!ParseText(data, size, &scenario)) return 0;
  absl::StatusOr<Job> job = ResolveJob(kScenarioPath, std::move(scenario));
  if (!job.ok()) return 0;
  const Scenario& s = job->scenario;
  Use(TotalParams(job->model));

  // The micro-batch does not depend on the GPU count: one set of layers,
  // at the model's real size (sums over layers are what could overflow).
  const std::vector<Layer> layers = ModelLayers(job->model, ScenarioBatch(s));
  Results results;
  int points = 0;
  for (const std::string& spec : s.strategies()) {
    for (int gpus : s.gpus()) {
      if (++points > kMaxPoints) break;
      MemoryRow(*job, layers, spec, gpus, &results);
    }
  }
  Use(FormatMemoryTable(results));

  // One schedule, as `shardsim schedule` lowers it. Every op carries its
  // kernels, so the cost is layers x micro-batches: a larger job is
  // lowered cut down to kLoweredLayers x kLoweredMicroBatches, with its own
  // strategy, platform, GPU count and batch.
  const int gpus = s.gpus(0);
  absl::StatusOr<Scenario> at = ScenarioAt(s, gpus);
  if (!at.ok()) return 0;
  Job small = *job;
  if (int64_t{job->model.layers()} * at->micro_batches() > kMaxLoweredBlocks) {
    small.model.set_layers(
        std::min<int64_t>(job->model.layers(), kLoweredLayers));
    small.scenario = *at;
    small.scenario.set_micro_batches(
        std::min<int64_t>(at->micro_batches(), kLoweredMicroBatches));
  }
  absl::StatusOr<Point> point = AnalyzePoint(small, s.strategies(0), gpus);
  if (!point.ok()) return 0;
  Use(FormatSchedule(*point->schedule));
  Results one;
  *one.add_rows() = point->row;
  Use(FormatVolumeTable(one, /*detail=*/true));
  Use(ToJson(one));
  return 0;
}
