// Stage 3: factors -> one training step as the schedule IR, as the
// strategy's framework runs it (strategy.execution()).
//
// Per micro-batch: forward gathers P where it is sharded, backward gathers
// it again unless kept, then reduces G onto its shards in buckets. Once per
// step: finish the gradient reduction over the OS scope, update the local
// OS shard, rebuild the P shard the next step needs. Compute ops carry the
// kernels of their layer's units (sim/model/kernels.h). Ops are listed in
// the framework host's issue order: a gather appears at the hook that
// issues it (its own module's, or an earlier one's when prefetched), with
// the host's waits on rate limiters and back-pressure.
// The step is built by passes over one builder state (sim/schedule/lower/:
// the walk, recomputation, parameter fetch, gradient reduction with one
// reducer per family, the update), each owning one concern.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/arena.h"
#include "sim/base/group.h"
#include "sim/model/model.h"
#include "sim/schema/scenario.pb.h"
#include "sim/schema/schedule.pb.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// Quantized tensors carry one fp32 scale per this many elements (DeepSpeed's
// CUDAQuantizer aims at groups of about 4k elements).
inline constexpr int64_t kQuantGroupElements = 4096;
inline constexpr int64_t kQuantScaleBytes = 4;

// Bytes of `elements` values quantized to `bits`, scales included.
int64_t QuantizedBytes(int64_t elements, int bits);

// A schedule in a protobuf arena of its own. A step of many micro-batches
// is hundreds of thousands of small messages (ops, kernels, their shapes);
// the arena allocates them in large blocks and frees them all at once.
// Move-only; a moved-from one holds nothing.
class OwnedSchedule {
 public:
  OwnedSchedule()
      : arena_(std::make_unique<google::protobuf::Arena>(Options())),
        schedule_(
            google::protobuf::Arena::CreateMessage<Schedule>(arena_.get())) {}

  const Schedule& operator*() const { return *schedule_; }
  const Schedule* operator->() const { return schedule_; }
  Schedule* mutable_schedule() { return schedule_; }

 private:
  // Blocks of up to 1 MiB: protobuf's default stops growing at 8 KiB, which
  // is thousands of allocations for a large step.
  static google::protobuf::ArenaOptions Options() {
    google::protobuf::ArenaOptions o;
    o.start_block_size = 64 << 10;
    o.max_block_size = 1 << 20;
    return o;
  }

  std::unique_ptr<google::protobuf::Arena> arena_;
  Schedule* schedule_;  // in arena_
};

// `strategy` must have passed ValidateStrategy on `mesh` and have its
// execution resolved (ResolveExecution).
absl::StatusOr<OwnedSchedule> LowerStep(const std::vector<Layer>& layers,
                                        const Strategy& strategy,
                                        const Mesh& mesh,
                                        const Scenario& scenario);

// `schedule` as LowerStep would have lowered it under `strategy`'s
// algorithms (AlgorithmFor) instead: every collective but qgZ's
// all-to-all (DIRECT) takes the algorithm of its group's kind. Nothing
// else in a schedule depends on the algorithms, so `plan` bounds every
// algorithm choice of a strategy from one lowering (sim/search/).
void UseAlgorithms(const Strategy& strategy, Schedule* schedule);

// The kernels compute op `op` of `schedule` runs. An index out of range is
// a schedule built wrong (LowerStep never does): it aborts, naming it.
const KernelList& KernelsOf(const Schedule& schedule, const ComputeOp& op);

// ZeRO-Offload's host side (the OFFLOAD and HOST streams): copies by the
// copy engines and the CPU's optimizer step, which hold no SMs.
inline bool OnHostSide(const Op& op) {
  return op.stream() == OFFLOAD || op.stream() == HOST;
}

// One line per op, for `shardsim schedule`.
std::string FormatSchedule(const Schedule& schedule);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_H_
