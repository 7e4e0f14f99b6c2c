// The allocation plan of one GPU's step: every buffer the lowered schedule
// allocates (its memory ops, sim/schedule/lower.cc), when it is given back,
// and the peak. This is the memory model: the simulator's memory lines
// (`shardsim memory`, run's mem column, OOM, plan's memory filter) are the
// plan's lines at its peak plus the platform's reserve (StepMemoryOf), and
// shardsim-hw allocates and frees exactly these on a GPU and compares the
// measured peak with the plan's.
#ifndef SHARDSIM_SIM_MEMORY_ALLOCATION_H_
#define SHARDSIM_SIM_MEMORY_ALLOCATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/schedule/periodic.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"

namespace shardsim {

struct Allocation {
  int alloc_op = -1;
  int free_op = -1;  // -1: kept to the end of the step
  std::string buffer;
  int64_t bytes = 0;
};

// The memory lines, as bytes live at one moment.
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
  // In schedule order. Of a folded step (PlanAllocations(StepOps)) walked
  // through its base: the base's allocations, by base op id.
  std::vector<Allocation> allocations;
  int64_t peak_bytes = 0;
  int peak_op = -1;      // the memory op after which the peak is first reached
  MemoryLines at_peak;   // what is live then, line by line: sums to the peak
  MemoryLines own_peak;  // each line's own highest point over the step
  // A schedule of several programs (pipeline stages) runs each on other
  // GPUs: the plan is of the program whose GPUs peak highest (the first
  // such), its index here; -1 for a schedule of one program.
  int program = -1;
  std::string program_role;  // its Program.role ("stage 3"), if any
  // Host memory one node's ranks pin (Schedule.host_bytes_per_gpu x the
  // job's GPUs per node): ZeRO-Offload's; 0 without.
  int64_t host_bytes_per_node = 0;
};

// Walks the schedule's memory ops in order, each program's on its own.
// Errors (naming the op) for a free that names no live allocation of its
// buffer and size, and for a buffer the memory model has no line for.
absl::StatusOr<AllocationPlan> PlanAllocations(const Schedule& schedule);

// The plan of one program's GPUs (schedule.proto Program): its own memory
// ops walked in order, the other programs' left out (a rank allocates only
// what its program does). Program 0 of a schedule of one program is the
// whole schedule's plan.
absl::StatusOr<AllocationPlan> PlanAllocations(const Schedule& schedule,
                                               int program);

// The same for the step `ops` stands for, whole or folded. A folded step
// (sim/schedule/periodic.h) is its base with block r.hi repeated `copies`
// more times, every memory op of a copy the block's own (same buffer, same
// bytes; frees shifted with the block). Where the block leaves every line
// as it found it (each line's deltas over the block sum to zero), each
// copy starts from the state the block started from, so it passes through
// exactly the block's states, and the tail starts from the state it starts
// from in the base: the step's walk is the base's with the block's states
// repeated, and its peak, the lines at the peak and each line's own peak
// are the base's (peak_op moves with the tail by the copies). Otherwise
// (memory that grows or shrinks with the micro-batches) every op of the
// step is walked through the fold.
absl::StatusOr<AllocationPlan> PlanAllocations(const StepOps& ops);

// A point's memory as reported: the plan's lines at its peak, the
// platform's fixed reserve (platform.gpu().reserved_bytes(), allocator
// fragmentation, the framework's context and transient workspaces the IR
// does not allocate), their sum, and whether it exceeds the GPU's memory.
struct StepMemory {
  MemoryLines lines;  // AllocationPlan::at_peak
  int64_t reserved = 0;
  int64_t peak = 0;           // lines.total() + reserved
  bool oom = false;           // peak > TightestGpu(platform).memory_bytes(), or
                              // host_oom
  int64_t host_per_node = 0;  // AllocationPlan::host_bytes_per_node
  bool host_oom = false;      // host_per_node > platform host.memory_bytes()
};
StepMemory StepMemoryOf(const AllocationPlan& plan, const Platform& platform);

// The job's GPU with the least memory left over its reserve: the
// platform's, or a degraded GPU set's other model (platform.proto
// Degraded.Gpus.model, mixed generations). Every rank of one program
// holds the same buffers, so that GPU decides what fits.
const Gpu& TightestGpu(const Platform& platform);

// The plan's peak, then each line planned, at the peak and at its own
// peak.
std::string FormatAllocationPlan(const AllocationPlan& plan);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_MEMORY_ALLOCATION_H_
