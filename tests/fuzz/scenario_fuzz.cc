// A scenario .textproto as `shardsim memory` and `shardsim schedule` read
// it: parse, ResolveJob (model, platform, every field), then per-GPU memory
// for its strategies x GPU counts and one lowered schedule with its traffic.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/analyze/analyze.h"
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

// The job `shardsim memory` and `shardsim schedule` lower at `gpus`, cut
// down when large: every op carries its kernels, so the cost is layers x
// micro-batches, and a larger job is lowered with kLoweredLayers x
// kLoweredMicroBatches, its own strategy, platform, GPU count and batch.
// nullopt where the scenario has no batch at `gpus`.
std::optional<Job> Lowered(const Job& job, int gpus) {
  absl::StatusOr<Scenario> at = ScenarioAt(job.scenario, gpus);
  if (!at.ok()) return std::nullopt;
  Job small = job;
  if (int64_t{job.model.layers()} * at->micro_batches() > kMaxLoweredBlocks) {
    small.model.set_layers(
        std::min<int64_t>(job.model.layers(), kLoweredLayers));
    small.scenario = *at;
    small.scenario.set_micro_batches(
        std::min<int64_t>(at->micro_batches(), kLoweredMicroBatches));
  }
  return small;
}

// A memory row as `shardsim memory` makes it (the lowered step's
// allocation plan), on the cut-down job.
void MemoryRow(const Job& job, const std::string& spec, int gpus,
               Results* results) {
  const std::optional<Job> small = Lowered(job, gpus);
  if (!small) return;
  absl::StatusOr<Point> point =
      LowerPoint(*small, spec, gpus, Storage::kFolded);
  if (!point.ok()) return;
  *results->add_rows() = point->row;
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

  // The layers at the model's real size (sums over layers are what could
  // overflow); the memory rows below lower a cut-down job.
  Use(ModelLayers(job->model, ScenarioBatch(s)));
  Results results;
  int points = 0;
  for (const std::string& spec : s.strategies()) {
    for (int gpus : s.gpus()) {
      if (++points > kMaxPoints) break;
      MemoryRow(*job, spec, gpus, &results);
    }
  }
  Use(FormatMemoryTable(results));

  // One schedule, as `shardsim schedule` lowers it (cut down as above).
  const int gpus = s.gpus(0);
  const std::optional<Job> small = Lowered(*job, gpus);
  if (!small) return 0;
  absl::StatusOr<Point> point = AnalyzePoint(*small, s.strategies(0), gpus);
  if (!point.ok()) return 0;
  Use(FormatSchedule(*point->schedule));
  Results one;
  *one.add_rows() = point->row;
  Use(FormatVolumeTable(one, /*detail=*/true));
  Use(ToJson(one));
  return 0;
}
