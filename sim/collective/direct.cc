// Direct (all-to-all) collectives: every member exchanges with every other
// member over its own link, one partner per step. Fewest hops of any
// algorithm (one per datum) at the price of p - 1 concurrent peers.
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

// Step t - 1 (t = 1..p-1): member m sends its own chunk to m + t. The shift
// pairs every receiver with exactly one sender per step.
int AllGather(const PlanRequest& req, int first_step, Plan* plan) {
  const int p = req.shape.size();
  for (int t = 1; t < p; ++t) {
    for (int m = 0; m < p; ++m) {
      Send(first_step + t - 1, m, (m + t) % p, ChunkRange(req.count, p, m),
           /*reduce=*/false, req.channels, plan);
    }
  }
  return p - 1;
}

// Step t - 1: member m adds its chunk (m + t) % p into that chunk's owner.
// No member ever sends its own chunk, so the reduces landing in it never
// race a read of it within a step.
int ReduceScatter(const PlanRequest& req, int first_step, Plan* plan) {
  const int p = req.shape.size();
  for (int t = 1; t < p; ++t) {
    for (int m = 0; m < p; ++m) {
      const int dst = (m + t) % p;
      Send(first_step + t - 1, m, dst, ChunkRange(req.count, p, dst),
           /*reduce=*/true, req.channels, plan);
    }
  }
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
  // Sized at once: a plan of 128 members holds 130,000 transfers on 8
  // channels, and growing it by doubling would copy them and hold both.
  const int64_t p = request.shape.size();
  const int64_t passes = request.op == ALL_REDUCE ? 2 : 1;
  plan->transfers.reserve(request.op == BROADCAST
                              ? (p - 1) * request.channels
                              : passes * p * (p - 1) * request.channels);
  switch (request.op) {
    case ALL_GATHER:
      plan->num_steps = AllGather(request, 0, plan);
      return absl::OkStatus();
    case REDUCE_SCATTER:
      plan->num_steps = ReduceScatter(request, 0, plan);
      return absl::OkStatus();
    case ALL_REDUCE: {
      const int rs = ReduceScatter(request, 0, plan);
      plan->num_steps = rs + AllGather(request, rs, plan);
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
