// The walk over the model: which compute ops a step runs, in the order the
// framework's host issues them. The other passes hang their ops on it.
#ifndef SHARDSIM_SIM_SCHEDULE_LOWER_WALK_H_
#define SHARDSIM_SIM_SCHEDULE_LOWER_WALK_H_

#include <vector>

#include "sim/schedule/lower/step.h"

namespace shardsim {
namespace lower {

// The model cut into segments, forward order: one per layer where the
// framework gathers whole layers (FSDP, PaRO), one per module above the
// persistence threshold (DeepSpeed's SUBMODULE, with the small modules
// around it). Every layer has at least one; the first of each is marked.
std::vector<Segment> BuildSegments(const std::vector<Layer>& layers,
                                   const Execution& ex, bool params_sharded);

// The forward and backward visits of `micro_batches` micro-batches run one
// after the other (no pipeline): each micro-batch's forward over the
// segments, then its backward in reverse. Recomputes come later
// (InsertRecomputes, recompute.h).
std::vector<Visit> WalkMicroBatches(const std::vector<Segment>& segments,
                                    int micro_batches);

}  // namespace lower
}  // namespace shardsim

#endif  // SHARDSIM_SIM_SCHEDULE_LOWER_WALK_H_
