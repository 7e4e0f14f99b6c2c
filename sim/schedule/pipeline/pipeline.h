// Pipeline parallelism: the model's layers cut into stages, each stage a
// program of its own ranks (schedule.proto Program) that runs its layers'
// passes in the pipeline schedule's order (order.h) and sends activations
// forward and their gradients back, point to point, to the neighbouring
// stage's ranks. Within a stage everything else is the data-parallel
// lowering (sim/schedule/lower/): the sharding strategy over the stage's dp
// ranks, recomputation, tensor parallelism inside its layers. A send
// carries the last layer's output (Layer::output_bytes), as Megatron's p2p
// tensor_shape (megatron/core/pipeline_parallel/schedules.py,
// get_tensor_shapes); the gradients sent back are the same size.
#ifndef SHARDSIM_SIM_SCHEDULE_PIPELINE_PIPELINE_H_
#define SHARDSIM_SIM_SCHEDULE_PIPELINE_PIPELINE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/layout.h"
#include "sim/model/model.h"
#include "sim/schema/scenario.pb.h"
#include "sim/schema/schedule.pb.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// The layers (indices into the model's embedding, blocks, head) of each
// virtual stage, stages * chunks of them in model order: the blocks split
// evenly (Megatron needs num_layers divisible by the virtual stages), or
// by `stage_layers` blocks a stage (chunks == 1 only); the embedding on the
// first, the head on the last. Errors name parallelism.pp, .vpp or
// .stage_layers.
absl::StatusOr<std::vector<std::vector<int>>> VirtualStageLayers(
    int blocks, int stages, int chunks, const std::vector<int>& stage_layers);

// The step of `layout.pp()` stages, one program each, into `out` (whose
// strategy, gpus and tokens the caller sets), which must be on an arena
// (OwnedSchedule's): the stages are lowered there and their ops moved in.
// `strategy` shards over layout.DpMesh() within each stage.
absl::Status LowerPipeline(const std::vector<Layer>& layers,
                           const Strategy& strategy, const Layout& layout,
                           const Scenario& scenario, Schedule* out);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_PIPELINE_PIPELINE_H_
