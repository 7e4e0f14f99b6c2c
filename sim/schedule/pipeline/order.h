// The pipeline schedules: in which order each stage runs its micro-batches'
// forward and backward passes. Bubble, warm-up and cool-down are not
// computed here: they follow when the engine replays the stages, each
// waiting for the activations and gradients its neighbours send.
#ifndef SHARDSIM_SIM_SCHEDULE_PIPELINE_ORDER_H_
#define SHARDSIM_SIM_SCHEDULE_PIPELINE_ORDER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/schema/scenario.pb.h"

namespace shardsim {

// One forward or backward pass of one micro-batch through one model chunk
// of a stage. Chunk c of stage s is virtual stage c * stages + s
// (Megatron's interleaving: a rank holds every stages-th chunk of layers).
struct PipeStep {
  bool forward = true;
  int mb = 0;
  int chunk = 0;

  bool operator==(const PipeStep& o) const {
    return forward == o.forward && mb == o.mb && chunk == o.chunk;
  }
};

// `schedule` as it resolves: UNSPECIFIED is 1F1B, or interleaved 1F1B
// when there are several chunks (Megatron picks interleaving from
// --num-layers-per-virtual-pipeline-stage alone).
PipelineSchedule ResolvePipelineSchedule(PipelineSchedule schedule, int chunks);

// Whether `schedule` runs `micro_batches` micro-batches over `stages`
// stages of `chunks` chunks each: the errors StageOrder would give, with
// no order built (a scenario is checked with it before it is lowered, and
// plan leaves out the micro-batch sizes a schedule refuses).
absl::Status CheckStageOrder(PipelineSchedule schedule, int stages, int chunks,
                             int micro_batches);

// The passes stage `stage` (of `stages`) runs, in order, over
// `micro_batches` micro-batches of its `chunks` chunks:
//  - GPIPE: every forward, then every backward (Huang et al. 2019);
//  - ONE_F_ONE_B: stages - stage - 1 warm-up forwards, then one forward
//    and one backward in turn, then the remaining backwards
//    (megatron/core/pipeline_parallel/schedules.py,
//    forward_backward_pipelining_without_interleaving);
//  - INTERLEAVED_1F1B: as forward_backward_pipelining_with_interleaving:
//    micro-batches in groups of `stages`, each group through chunk 0,
//    then chunk 1, ... in forward (the last chunk first in backward), with
//    (stages - stage - 1) * 2 + (chunks - 1) * stages warm-up forwards, or
//    every forward first when micro_batches == stages. It needs
//    micro_batches to be a multiple of stages, as Megatron asserts.
// Errors name the field at fault (parallelism.vpp, micro_batches).
absl::StatusOr<std::vector<PipeStep>> StageOrder(PipelineSchedule schedule,
                                                 int stages, int chunks,
                                                 int micro_batches, int stage);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_PIPELINE_ORDER_H_
