// Direct (all-to-all) collectives: every member exchanges with every other
// member over its own link, one partner per step. Fewest hops of any
// algorithm (one per datum) at the price of p - 1 concurrent peers.
#include <utility>
#include <vector>

#include "sim/collective/algorithms.h"
#include "sim/collective/chunks.h"

namespace shardsim::internal {
namespace {

// Appends `range` from src to dst, cut into one sub-range per channel so
// that k channels each move 1/k, as they do for the ring.
void Send(int step, int src, int dst, Range range, bool reduce, int channels,
          Plan* out) {
  for (int c = 0; c < channels; ++c) {
    AppendTransfer(step, c, src, dst, SubRange(range, channels, c), reduce,
                   out);
  }
}

// An all-gather (member m sends its own chunk to m + t at step t - 1) or a
// reduce-scatter pass (m adds chunk m + t into its owner), as DirectPass.
int Pass(const PlanRequest& req, int first_step, bool reduce, Plan* plan) {
  const int p = req.shape.size();
  DirectPass pass;
  pass.first_step = first_step;
  pass.reduce = reduce;
  pass.chunks.reserve(p);
  for (int m = 0; m < p; ++m)
    pass.chunks.push_back(ChunkRange(req.count, p, m));
  plan->directs.push_back(std::move(pass));
  return p - 1;
}

// The root sends the whole buffer to every member in one step: each
// destination is a different link, so sequencing them would only add steps
// (latency); the root's shared egress is the engine's to model.
int Broadcast(const PlanRequest& req, Plan* plan) {
  const int p = req.shape.size();
  for (int m = 0; m < p; ++m) {
    if (m == req.root) continue;
    Send(0, req.root, m, Range{0, req.count}, /*reduce=*/false, req.channels,
         plan);
  }
  return 1;
}

}  // namespace

absl::Status BuildDirect(const PlanRequest& request, Plan* plan) {
  switch (request.op) {
    case ALL_GATHER:
      plan->num_steps = Pass(request, 0, /*reduce=*/false, plan);
      return absl::OkStatus();
    case REDUCE_SCATTER:
      plan->num_steps = Pass(request, 0, /*reduce=*/true, plan);
      return absl::OkStatus();
    case ALL_REDUCE: {
      const int rs = Pass(request, 0, /*reduce=*/true, plan);
      plan->num_steps = rs + Pass(request, rs, /*reduce=*/false, plan);
      return absl::OkStatus();
    }
    case BROADCAST:
      plan->num_steps = Broadcast(request, plan);
      return absl::OkStatus();
    default:
      return UnsupportedOp("direct", request.op);
  }
}

}  // namespace shardsim::internal
