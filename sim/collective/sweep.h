// The collective calls of a benchmark sweep, as nccl-tests runs them: one
// collective over every GPU, sizes (the whole buffer) from min to max by a
// factor. The simulator (`shardsim collective`) and the hardware backend
// (`shardsim-hw collective`) time the same list.
#ifndef SHARDSIM_SIM_COLLECTIVE_SWEEP_H_
#define SHARDSIM_SIM_COLLECTIVE_SWEEP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sim/base/group.h"
#include "sim/schema/collective.pb.h"
#include "sim/schema/platform.pb.h"
#include "sim/schema/schedule.pb.h"
#include "sim/schema/strategy.pb.h"

namespace shardsim {

// Checks every field against sim/schema/limits.h: 1 <= min_bytes <=
// max_bytes <= 1 TiB, a finite step_factor > 1 and at most 1,000 sizes,
// channels in [0, 64], warmup and iters in [0, 1e6] (measuring needs
// iters >= 1: the caller's rule). Errors read "WHERE: field NAME: ...".
absl::Status ValidateSweep(const CollectiveSweep& sweep,
                           absl::string_view where);

// The rings the sweep runs on: its own channels, or the platform's.
int SweepChannels(const CollectiveSweep& sweep, const Platform& platform);

std::vector<CollectiveCall> SweepCalls(const CollectiveSweep& sweep,
                                       const Mesh& mesh);

// nccl-tests' bus bandwidth factor: (n-1)/n for all-gather and
// reduce-scatter, 2(n-1)/n for all-reduce, 1 for broadcast.
double BusFactor(CollectiveOp op, int gpus);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_COLLECTIVE_SWEEP_H_
