// A platform .textproto as a scenario's platform_def: ResolveJob's checks
// (its GPU model, ValidatePlatform, the mesh), then what the engine
// computes before SimGrid starts: kernel times, and the plans of one
// lowered step's collectives on the platform's channels. SimGrid itself
// runs once per process (sim/runner/isolate.h): not here.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>

#include "sim/analyze/analyze.h"
#include "sim/collective/plan.h"
#include "sim/collective/plan_summary.h"
#include "sim/compute/kernel_time.h"
#include "sim/model/kernels.h"
#include "sim/results/results.h"
#include "sim/scenario/scenario.h"
#include "tests/fuzz/fuzz_util.h"

namespace shardsim::fuzz {
namespace {

// Two nodes where the platform has them, so collectives cross the network.
// Nonsense node sizes give nonsense GPU counts, for validation to refuse.
int GpusFor(const Platform& p) {
  const int64_t per_node = std::max(1, p.gpus_per_node());
  const int64_t gpus = p.nodes() == 1 ? per_node : 2 * per_node;
  return static_cast<int>(std::min<int64_t>(gpus, INT32_MAX));
}

Scenario FixedScenario() {
  Scenario s;
  *s.mutable_model_def() = TinyModel();
  s.add_strategies("zero3");
  s.set_micro_batch_size(2);
  s.set_micro_batches(1);
  s.set_seq_len(128);
  s.set_optimizer_bytes_per_param(12);
  return s;
}

template <typename Kernels>
void KernelTimes(const Platform& p, const Kernels& kernels) {
  for (const Kernel& k : kernels) {
    Use(KernelSeconds(k, p));
    Use(KernelMemoryBound(k, p));
  }
}

}  // namespace
}  // namespace shardsim::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardsim;
  using namespace shardsim::fuzz;
  Platform platform;
  if (!ParseText(data, size, &platform)) return 0;
  Scenario scenario = FixedScenario();
  scenario.add_gpus(GpusFor(platform));
  *scenario.mutable_platform_def() = std::move(platform);
  absl::StatusOr<Job> job = ResolveJob(kScenarioPath, std::move(scenario));
  if (!job.ok()) return 0;
  const Platform& p = job->platform;

  // Memory against this GPU, and the step the engine would replay.
  absl::StatusOr<Point> point =
      AnalyzePoint(*job, job->scenario.strategies(0), job->scenario.gpus(0));
  if (!point.ok()) return 0;
  std::set<std::tuple<int, int, int, int, int64_t, int>> planned;
  for (const Op& op : point->schedule->ops()) {
    if (op.has_compute()) {
      const KernelList& kernels = KernelsOf(*point->schedule, op.compute());
      KernelTimes(p, kernels.kernels());
      Use(ComputeOpCost(kernels, p));
      continue;
    }
    if (!op.has_collective()) continue;
    // CollectiveEngine::Prepare's plan, once per shape and size.
    const CollectiveCall& call = op.collective();
    if (!planned
             .emplace(call.op(), call.algorithm(), call.group().intra_size(),
                      call.group().inter_size(), call.bytes(), call.root())
             .second) {
      continue;
    }
    PlanRequest req;
    req.op = call.op();
    req.algorithm = call.algorithm();
    req.shape = {call.group().intra_size(), call.group().inter_size()};
    req.count = call.bytes();
    req.channels = p.channels();
    req.root = call.root();
    absl::StatusOr<Plan> plan = MakePlan(req);
    if (!plan.ok()) continue;
    Use(Summarize(*plan));
    Use(CountVolume(*plan));
  }
  // The optimizer step over this GPU's P shard (2 bytes a parameter).
  KernelTimes(p, OptimizerKernels(point->row.param_bytes() / 2));
  return 0;
}
