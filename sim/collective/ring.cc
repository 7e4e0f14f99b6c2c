// Flat NCCL-style rings, and the ring building blocks of ring.h that the
// other algorithms reuse.
#include "sim/collective/ring.h"

#include <algorithm>
#include <utility>

#include "sim/collective/algorithms.h"
#include "sim/collective/chunks.h"

namespace shardsim::internal {
namespace {

// One pass around the ring: n - 1 steps in which every position sends to
// the next. At step t position r sends the range of position r - t - lag.
// With lag 0 a position starts with its own range and then forwards what
// just arrived (all-gather). With lag 1 range j starts at position j + 1
// and travels n - 1 hops, gathering one contribution per hop, so it arrives
// complete at position j (reduce-scatter).
int AppendRingPass(const std::vector<int>& order,
                   const std::vector<Range>& ranges, int lag, bool reduce,
                   int first_step, int channel, Plan* out) {
  const int n = static_cast<int>(order.size());
  if (n <= 1) return 0;
  // Stored whole (plan.h's RingPass), not as its (n - 1) x n transfers.
  RingPass pass;
  pass.first_step = first_step;
  pass.channel = channel;
  pass.lag = lag;
  pass.reduce = reduce;
  pass.order.assign(order.begin(), order.end());
  pass.ranges = ranges;
  out->rings.push_back(std::move(pass));
  return n - 1;
}

// The broadcast chain of one channel: the channel's ring, rotated so that
// it starts at the root.
std::vector<int> ChainFrom(std::vector<int> order, int root) {
  auto it = std::find(order.begin(), order.end(), root);
  std::rotate(order.begin(), it, order.end());
  return order;
}

// One channel of the flat ring: NCCL's ring `channel`, every member's chunk
// cut to the channel's part.
int RingChannel(const PlanRequest& request, const ChannelGrid& grid,
                Plan* out) {
  const int c = grid.channel();
  const std::vector<int> order =
      FlatRingOrder(request.shape, c, request.channels);
  // Ranges follow the member, not the position: member m ends up with its
  // own chunk m even though the ring is rotated.
  const std::vector<Range> ranges = grid.ChunksOf(order);
  switch (request.op) {
    case ALL_GATHER:
      return AppendRingAllGather(order, ranges, 0, c, out);
    case REDUCE_SCATTER:
      return AppendRingReduceScatter(order, ranges, 0, c, out);
    case ALL_REDUCE:
      return AppendRingAllReduce(order, ranges, 0, c, out);
    default:  // BROADCAST
      // Pipeline depth p: piece j is the channel's part of chunk j.
      return AppendChainBroadcast(ChainFrom(order, request.root),
                                  grid.AllChunks(), 0, c, out);
  }
}

}  // namespace

std::vector<int> FlatRingOrder(const PlanShape& shape, int channel,
                               int channels) {
  std::vector<int> order;
  order.reserve(shape.size());
  const int start = channels < shape.per_node
                        ? channel * shape.per_node / channels % shape.per_node
                        : channel % shape.per_node;
  for (int node = 0; node < shape.nodes; ++node) {
    for (int i = 0; i < shape.per_node; ++i) {
      order.push_back(node * shape.per_node + (start + i) % shape.per_node);
    }
  }
  return order;
}

int AppendRingAllGather(const std::vector<int>& order,
                        const std::vector<Range>& ranges, int first_step,
                        int channel, Plan* out) {
  return AppendRingPass(order, ranges, /*lag=*/0, /*reduce=*/false, first_step,
                        channel, out);
}

int AppendRingReduceScatter(const std::vector<int>& order,
                            const std::vector<Range>& ranges, int first_step,
                            int channel, Plan* out) {
  return AppendRingPass(order, ranges, /*lag=*/1, /*reduce=*/true, first_step,
                        channel, out);
}

int AppendRingAllReduce(const std::vector<int>& order,
                        const std::vector<Range>& ranges, int first_step,
                        int channel, Plan* out) {
  const int rs =
      AppendRingReduceScatter(order, ranges, first_step, channel, out);
  return rs + AppendRingAllGather(order, ranges, first_step + rs, channel, out);
}

int AppendChainBroadcast(const std::vector<int>& order,
                         const std::vector<Range>& pieces, int first_step,
                         int channel, Plan* out) {
  const int n = static_cast<int>(order.size());
  const int k = static_cast<int>(pieces.size());
  if (n <= 1 || k == 0) return 0;
  // Stored whole (plan.h's ChainPass). Piece j reaches order[h] at step
  // j + h - 1, so it moves on at j + h while later pieces follow one hop
  // behind (the pipeline).
  ChainPass chain;
  chain.first_step = first_step;
  chain.channel = channel;
  chain.order.assign(order.begin(), order.end());
  chain.pieces = pieces;
  out->chains.push_back(std::move(chain));
  return k + n - 2;
}

absl::Status BuildRing(const PlanRequest& request, Plan* plan) {
  if (!IsLoweredOp(request.op)) return UnsupportedOp("ring", request.op);
  BuildChannels(request, RingChannel, plan);
  return absl::OkStatus();
}

}  // namespace shardsim::internal
