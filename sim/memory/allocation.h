// The allocation plan of one GPU's step: every buffer the lowered schedule
// allocates (its memory ops, sim/schedule/lower.cc), when it is given back,
// and the peak. shardsim-hw allocates and frees exactly these on a GPU and
// compares the measured peak with the plan's; the simulator's memory model
// (memory.h) predicts the same lines in closed form.
#ifndef SHARDSIM_SIM_MEMORY_ALLOCATION_H_
#define SHARDSIM_SIM_MEMORY_ALLOCATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/memory/memory.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct Allocation {
  int alloc_op = -1;
  int free_op = -1;  // -1: kept to the end of the step
  std::string buffer;
  int64_t bytes = 0;
};

// The memory model's lines (memory.h), as bytes live at one moment.
struct MemoryLines {
  int64_t params = 0;       // P shard + P secondary
  int64_t grads = 0;        // G shard
  int64_t optimizer = 0;    // OS shard
  int64_t activations = 0;  // activations + recompute
  int64_t buffers = 0;      // P full + G full
  int64_t total() const {
    return params + grads + optimizer + activations + buffers;
  }
};

struct AllocationPlan {
  std::vector<Allocation> allocations;  // in schedule order
  int64_t peak_bytes = 0;
  int peak_op = -1;      // the memory op after which the peak is reached
  MemoryLines at_peak;   // what is live then, line by line
  MemoryLines own_peak;  // each line's own highest point over the step
};

// Walks the schedule's memory ops in order. Errors (naming the op) for a
// free that names no live allocation of its buffer and size, and for a
// buffer the memory model has no line for.
absl::StatusOr<AllocationPlan> PlanAllocations(const Schedule& schedule);

// The model's lines of a MemoryBreakdown, without the reserve.
MemoryLines LinesOf(const MemoryBreakdown& m);

// "buffer  bytes  alloc op  free op" per allocation (kept ones first),
// then each line planned (at peak and own peak) against `model`.
std::string FormatAllocationPlan(const AllocationPlan& plan,
                                 const MemoryBreakdown& model);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_MEMORY_ALLOCATION_H_
