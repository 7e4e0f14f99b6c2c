// In-network reduction: NVIDIA SHARP, as NCCL's CollNet uses it. The switch
// (kSwitch) adds what members send it into one zeroed buffer of `count`
// elements and multicasts results back; a multicast counts as one transfer
// per receiver. Only members on different nodes meet at the switch, so a
// group inside one node is refused.
//
// Channels: every range below is cut into k parts, part c on channel c, and
// all channels run over the same step numbers.
#include <vector>

#include "sim/collective/algorithms.h"
#include "sim/collective/chunks.h"
#include "sim/collective/ring.h"

namespace shardsim::internal {
namespace {

// `member` sends `up` into the switch at `step` (adding it when `reduce`)
// and gets `down` back, multicast, at step + 1.
void ThroughSwitch(int step, int channel, int member, Range up, bool reduce,
                   Range down, Plan* out) {
  AppendTransfer(step, channel, member, kSwitch, up, reduce, out);
  AppendTransfer(step + 1, channel, kSwitch, member, down, /*reduce=*/false,
                 out);
}

// All-reduce as CollNet does it: the node's members reduce-scatter among
// themselves (ring), so that local index l holds the node's sum of intra
// chunk l; each adds it into the switch, which multicasts the global sum of
// chunk l back to local l of every node (the columns use disjoint ranges of
// the one switch buffer); an intra-node ring all-gather finishes. With one
// member per node the ring phases are empty and the whole buffer goes
// through the switch.
int AllReduce(const ChannelGrid& grid, Plan* out) {
  const int per_node = grid.per_node();
  // Intra chunk l: chunk l of the buffer cut into one chunk per local.
  const ChannelGrid intra(PlanShape{per_node, 1}, grid.count(), grid.channels(),
                          grid.channel());
  // The intra ring of channel c starts at local c, as the flat ring's does,
  // so chunk ownership follows the member, not the ring position.
  const std::vector<int> local_order =
      FlatRingOrder(intra.shape(), grid.channel(), grid.channels());
  const std::vector<Range> ranges = intra.ChunksOf(local_order);
  // The same intra ring in every node, all sharing their steps.
  auto every_node = [&](RingPhase phase, int first_step) {
    int steps = 0;
    for (int n = 0; n < grid.nodes(); ++n) {
      std::vector<int> order(local_order);
      for (int& m : order) m += n * per_node;
      steps = phase(order, ranges, first_step, grid.channel(), out);
    }
    return steps;
  };

  const int rs = every_node(AppendRingReduceScatter, 0);
  for (int m = 0; m < grid.shape().size(); ++m) {
    const Range mine = intra.Chunk(m % per_node);
    ThroughSwitch(rs, grid.channel(), m, mine, /*reduce=*/true, mine, out);
  }
  return rs + 2 + every_node(AppendRingAllGather, rs + 2);
}

// Every member adds its whole buffer into the switch, which returns to each
// member its own chunk of the sum.
int ReduceScatter(const ChannelGrid& grid, Plan* out) {
  const Range all = grid.Part(Range{0, grid.count()});
  for (int m = 0; m < grid.shape().size(); ++m) {
    ThroughSwitch(0, grid.channel(), m, all, /*reduce=*/true, grid.Chunk(m),
                  out);
  }
  return 2;
}

// Every member copies its chunk into the switch, which multicasts the whole
// buffer (a member's own chunk comes back unchanged: multicast sends one
// payload to all).
int AllGather(const ChannelGrid& grid, Plan* out) {
  const Range all = grid.Part(Range{0, grid.count()});
  for (int m = 0; m < grid.shape().size(); ++m) {
    ThroughSwitch(0, grid.channel(), m, grid.Chunk(m), /*reduce=*/false, all,
                  out);
  }
  return 2;
}

// The root copies its buffer into the switch, which multicasts it to the
// other members.
int Broadcast(const ChannelGrid& grid, int root, Plan* out) {
  const Range all = grid.Part(Range{0, grid.count()});
  AppendTransfer(0, grid.channel(), root, kSwitch, all, /*reduce=*/false, out);
  for (int m = 0; m < grid.shape().size(); ++m) {
    if (m != root) {
      AppendTransfer(1, grid.channel(), kSwitch, m, all, /*reduce=*/false, out);
    }
  }
  return 2;
}

int SharpChannel(const PlanRequest& request, const ChannelGrid& grid,
                 Plan* out) {
  switch (request.op) {
    case ALL_REDUCE:
      return AllReduce(grid, out);
    case REDUCE_SCATTER:
      return ReduceScatter(grid, out);
    case ALL_GATHER:
      return AllGather(grid, out);
    default:  // BROADCAST
      return Broadcast(grid, request.root, out);
  }
}

}  // namespace

absl::Status BuildSharp(const PlanRequest& request, Plan* plan) {
  if (request.shape.nodes == 1) {
    return absl::InvalidArgumentError(
        "sharp: the group lies inside one node; in-network reduction needs a "
        "group that spans nodes");
  }
  if (!IsLoweredOp(request.op)) return UnsupportedOp("sharp", request.op);
  BuildChannels(request, SharpChannel, plan);
  return absl::OkStatus();
}

}  // namespace shardsim::internal
