// The closed-form memory estimate: model states (docs/strategies.md §2),
// activations, buffers in flight, and the framework's reserve; OOM against
// the GPU's capacity. A test's cross-check only: the simulator reads
// memory off the lowered step's allocation plan (sim/memory/allocation.h),
// and tests/memory_crosscheck_test.cc holds the plan to this estimate
// within stated tolerances, with the reason for each difference. No
// product target links it (CMakeLists.txt: shardsim_memory_estimate).
#ifndef SHARDSIM_TESTS_MEMORY_ESTIMATE_H_
#define SHARDSIM_TESTS_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <vector>

#include "sim/base/group.h"
#include "sim/model/model.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/scenario.pb.h"
#include "sim/schema/strategy.pb.h"
#include "sim/strategy/model_states.h"

namespace shardsim {

struct MemoryBreakdown {
  ModelStates states;
  int64_t activations = 0;  // peak activation bytes of one micro-batch
  int64_t buffers = 0;      // gathered parameters, gradient buckets
  int64_t reserved = 0;     // platform's framework reserve
  int64_t total = 0;
  bool oom = false;  // total > GPU memory
};

MemoryBreakdown EstimateMemory(const std::vector<Layer>& layers,
                               const Strategy& strategy, const Mesh& mesh,
                               const Scenario& scenario,
                               const Platform& platform);

}  // namespace shardsim

#endif  // SHARDSIM_TESTS_MEMORY_ESTIMATE_H_
