// What the strategy and deepspeed targets do with a spec: ParseStrategy on
// a mesh, then for a strategy that parses its execution profile, memory and
// one lowered step of a tiny model (cheap, and the lowering reads every
// factor and execution field).
#ifndef SHARDSIM_TESTS_FUZZ_STRATEGY_RUN_H_
#define SHARDSIM_TESTS_FUZZ_STRATEGY_RUN_H_

#include <string>
#include <vector>

#include "sim/memory/allocation.h"
#include "sim/model/model.h"
#include "sim/schedule/lower.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/strategy.h"
#include "sim/traffic/traffic.h"
#include "tests/fuzz/fuzz_util.h"

namespace shardsim::fuzz {

// One node, four nodes, part of a node.
inline constexpr Mesh kMeshes[] = {{8, 1}, {8, 4}, {4, 1}};

inline void RunStrategy(const std::string& spec, const std::string& base_dir,
                        const Mesh& mesh) {
  static const Scenario scenario = [] {
    Scenario s;
    s.set_micro_batch_size(1);
    s.set_micro_batches(2);
    s.set_seq_len(64);
    s.set_optimizer_bytes_per_param(12);
    return s;
  }();
  static const Model model = TinyModel();
  static const std::vector<Layer> layers =
      ModelLayers(model, ScenarioBatch(scenario));
  absl::StatusOr<Strategy> strategy = ParseStrategy(spec, mesh, base_dir);
  if (!strategy.ok()) return;
  // ParseStrategy validates; a second opinion must agree.
  if (!ValidateStrategy(*strategy, mesh).ok()) __builtin_trap();
  Use(FactorName(strategy->p()) + FactorName(strategy->g()) +
      FactorName(strategy->os()));
  if (!ResolveExecution(scenario.execution(), model.hidden(), &*strategy)
           .ok()) {
    return;
  }
  absl::StatusOr<OwnedSchedule> schedule =
      LowerStep(layers, *strategy, mesh, scenario);
  if (!schedule.ok()) return;
  Use(PlanAllocations(**schedule));
  Use(CountTraffic(**schedule, mesh, ShippedPlatform()));
}

}  // namespace shardsim::fuzz

#endif  // SHARDSIM_TESTS_FUZZ_STRATEGY_RUN_H_
