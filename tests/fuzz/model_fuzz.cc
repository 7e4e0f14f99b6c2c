// A model .textproto as LoadModel reads it: ValidateModel, then what
// sim/model derives from a valid one (parameters, layers, kernels, FLOPs)
// and what memory and lowering make of its shape: ZeRO-3 on 2 nodes of a
// shipped platform, one micro-batch.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/memory/allocation.h"
#include "sim/model/kernels.h"
#include "sim/model/model.h"
#include "sim/schedule/lower.h"
#include "sim/strategy/execution.h"
#include "sim/strategy/model_states.h"
#include "sim/strategy/strategy.h"
#include "sim/traffic/traffic.h"
#include "tests/fuzz/fuzz_util.h"

namespace shardsim::fuzz {
namespace {

const Mesh kMesh{8, 2};
constexpr int64_t kShapeLayers = 2;

// Parsed once: the strategy is not under test here.
Strategy ZeroThree() {
  static const Strategy* s = new Strategy(*ParseStrategy("zero3", kMesh));
  return *s;
}

// A short micro-batch: the model's shape, not the batch, is under test.
Scenario FixedScenario() {
  Scenario s;
  s.set_micro_batch_size(1);
  s.set_micro_batches(1);
  s.set_seq_len(64);
  s.set_optimizer_bytes_per_param(12);
  return s;
}

void Kernels(const std::vector<Kernel>& kernels) {
  for (const Kernel& k : kernels) {
    Use(KernelFlops(k));
    Use(KernelBytes(k));
  }
}

}  // namespace
}  // namespace shardsim::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardsim;
  using namespace shardsim::fuzz;
  Model model;
  if (!ParseText(data, size, &model)) return 0;
  if (!ValidateModel(model).ok()) return 0;
  const int64_t psi = TotalParams(model);
  // One batch variant per input, picked by its length: both kernel styles,
  // with and without recomputation and flash attention.
  Scenario scenario = FixedScenario();
  scenario.set_recompute(size & 1);
  scenario.set_flash_attention(size & 2);
  if (size & 4) scenario.mutable_kernels()->set_style(KernelOptions::FUSED);
  if (size & 8) scenario.mutable_kernels()->set_fused_qkv(true);
  const Batch batch = ScenarioBatch(scenario);
  Use(ModelStateBytes(psi, scenario.optimizer_bytes_per_param(), ZeroThree()));
  Kernels(OptimizerKernels(psi));

  // Every block is the same: a few stand for all, so the cost of an input
  // does not grow with its layer count (the scenario target runs memory on
  // whole models).
  Model shape = model;
  shape.set_layers(std::min<int64_t>(model.layers(), kShapeLayers));
  const std::vector<Layer> layers = ModelLayers(shape, batch);
  for (const Layer& layer : layers) {
    for (const Unit& unit : layer.units) {
      Kernels(unit.forward);
      Kernels(unit.backward);
    }
  }
  Use(ModelFlopsPerMicroBatch(shape, batch));

  Strategy strategy = ZeroThree();
  if (!ResolveExecution(scenario.execution(), model.hidden(), &strategy).ok()) {
    return 0;
  }
  absl::StatusOr<OwnedSchedule> schedule =
      LowerStep(layers, strategy, kMesh, scenario);
  if (!schedule.ok()) return 0;
  Use(PlanAllocations(**schedule));
  Use(CountTraffic(**schedule, kMesh, ShippedPlatform()));
  return 0;
}
