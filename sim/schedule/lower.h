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
// Two lowerings of the same factors (SPEC section 4):
//   PARO: reduce-scatter / all-gather (ZeRO, MiCS, FSDP, ZeRO++, PaRO);
//   LINS: all-reduce with select-and-drop, broadcast inside the OS subgroup.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/collective/group.h"
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

// `strategy` must have passed ValidateStrategy on `mesh` and have its
// execution resolved (ResolveExecution).
absl::StatusOr<Schedule> LowerStep(const std::vector<Layer>& layers,
                                   const Strategy& strategy, const Mesh& mesh,
                                   const Scenario& scenario);

// One line per op, for `shardsim schedule`.
std::string FormatSchedule(const Schedule& schedule);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_H_
